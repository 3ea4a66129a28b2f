package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An error body reads as written: the advice's <placeholders> are not escaped for
// HTML (a JSON body is never HTML).
func TestErrorBodyKeepsAngleBrackets(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusUnauthorized, adminError{"send Authorization: Bearer <the relay's --admin-token> & retry"})
	body := w.Body.String()
	if !strings.Contains(body, "<the relay's --admin-token> & retry") || strings.Contains(body, `\u003c`) {
		t.Fatalf("body %s, want the advice as written", body)
	}
}
