package admin

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/ops"
)

// maxPurgeIDs bounds the ids one POST /dlq/purge deletes.
const maxPurgeIDs = 1000

// purgeRequest is POST /dlq/purge's body: the ids to delete, and their count
// again as confirm. Deleting is final, so the request says twice what it
// deletes: a body cut short or built wrong is refused rather than half obeyed.
type purgeRequest struct {
	IDs     []string `json:"ids"`
	Confirm *int     `json:"confirm"`
}

// servePurge deletes dead letters by id, as `walrelay dlq purge --id` does.
func (a *relayAPI) servePurge(w http.ResponseWriter, req *http.Request) {
	dl, ok := deadLetters(w, a.r)
	if !ok {
		return
	}
	var body purgeRequest
	if !decodeBody(w, req, 1<<20, &body, false, `want a JSON body {"ids": ["..."], "confirm": <how many ids>}`) {
		return
	}
	ids := slices.Compact(slices.Sorted(slices.Values(body.IDs)))
	switch {
	case len(ids) == 0 || slices.Contains(ids, ""):
		writeJSON(w, http.StatusBadRequest, adminError{`give the dead letters' ids: {"ids": ["..."], "confirm": <how many ids>}`})
		return
	case len(ids) > maxPurgeIDs:
		writeJSON(w, http.StatusBadRequest, adminError{"at most " + strconv.Itoa(maxPurgeIDs) + " ids per request; purge in pages, or older ones with walrelay dlq purge --older-than"})
		return
	case body.Confirm == nil || *body.Confirm != len(ids):
		writeJSON(w, http.StatusConflict, adminError{"confirm must be the number of distinct ids to purge, " + strconv.Itoa(len(ids)) +
			": purging is final, so say how many you mean to delete"})
		return
	}
	n, err := dl.Purge(req.Context(), ids, 0)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
		return
	}
	a.r.Logger().Info("dead letters purged", "asked", len(ids), "purged", n, "ids", strings.Join(ids[:min(len(ids), 20)], ","))
	writeJSON(w, http.StatusOK, map[string]int64{"purged": n})
}

// servePreview answers a dead letter's record as the sink would publish it.
func (a *relayAPI) servePreview(w http.ResponseWriter, req *http.Request) {
	pool := a.r.Pool()
	if pool == nil {
		writeJSON(w, http.StatusServiceUnavailable, adminError{"the relay has not connected to the database yet; ask again shortly"})
		return
	}
	id := strings.TrimSpace(req.PathValue("id"))
	p, err := ops.PreviewDeadLetter(req.Context(), pool, a.r.Config(), id)
	switch {
	case errors.Is(err, ops.ErrNoDeadLetter):
		writeJSON(w, http.StatusNotFound, adminError{"no dead letter " + strconv.Quote(id) + " (retried, purged or published since?); GET /dlq lists them"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, adminError{err.Error()})
	default:
		writeJSON(w, http.StatusOK, p)
	}
}
