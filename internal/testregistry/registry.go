// Package testregistry is a schema registry for tests: the part of Confluent
// Schema Registry's REST API that walrelay's converters use, served strictly
// (an unknown path, method, parameter or body field is an error, as a real
// registry would refuse it), with switches to take it down and to refuse
// subjects. No Schema Registry server can run where the tests run (it needs the
// JVM); docs/operations.md says what was not tried against a real one.
//
// Served: POST /subjects/{subject}/versions (register), POST /subjects/{subject}
// (look up), GET /subjects/{subject}/versions/latest, GET /schemas/ids/{id}, each
// with the normalize parameter where the API takes it. Errors are the API's JSON
// {"error_code":…,"message":…}: 404 with 40401 (subject not found) or 40403
// (schema not found), 409 (incompatible), 422 with 42201 (invalid schema), 401
// without the configured credentials.
package testregistry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
)

// Registry is a running test registry.
type Registry struct {
	srv    *httptest.Server
	prefix string
	// User, Password and Token, when set, are the credentials every request
	// must carry (basic auth, or a bearer token).
	User, Password, Token string

	mu       sync.Mutex
	down     bool
	refuse   map[string]string // subject -> message
	ids      map[string]int    // schema type + text -> id
	schemas  []stored          // by id-1
	subjects map[string][]int  // subject -> ids, by version-1
	calls    map[string]int    // "METHOD /path-pattern" -> count
}

type stored struct {
	Schema     string
	SchemaType string
}

// Start serves a registry on loopback until Close.
func Start() *Registry { return StartAt("") }

// StartAt serves the API under a path prefix, as Apicurio serves its
// Confluent-compatible API under /apis/ccompat/v7; requests outside it are 404.
func StartAt(prefix string) *Registry {
	r := &Registry{prefix: strings.TrimSuffix(prefix, "/"), refuse: map[string]string{}, ids: map[string]int{},
		subjects: map[string][]int{}, calls: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the registry's base URL, its prefix included.
func (r *Registry) URL() string { return r.srv.URL + r.prefix }

// Close stops it.
func (r *Registry) Close() { r.srv.Close() }

// SetDown makes every request fail with 503 (true) or be served (false).
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// Refuse makes registering a new schema under subject fail with 409 and
// message, as an incompatible schema does; one the subject has registers as before.
func (r *Registry) Refuse(subject, message string) {
	r.mu.Lock()
	r.refuse[subject] = message
	r.mu.Unlock()
}

// Calls counts the requests served (not refused for being down) by method and
// route, e.g. "POST /subjects/{subject}/versions".
func (r *Registry) Calls(route string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[route]
}

// Subjects lists the registered subjects.
func (r *Registry) Subjects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for s := range r.subjects {
		out = append(out, s)
	}
	return out
}

// Schema returns the schema registered under id.
func (r *Registry) Schema(id int) (text, schemaType string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.schemas) {
		return "", "", false
	}
	s := r.schemas[id-1]
	return s.Schema, s.SchemaType, true
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	_ = json.NewEncoder(w).Encode(v)
}

func (r *Registry) authorized(req *http.Request) bool {
	switch {
	case r.Token != "":
		return req.Header.Get("Authorization") == "Bearer "+r.Token
	case r.User != "":
		u, p, ok := req.BasicAuth()
		return ok && u == r.User && p == r.Password
	}
	return true
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		fail(w, http.StatusServiceUnavailable, 50003, "test registry is down")
		return
	}
	if !r.authorized(req) {
		fail(w, http.StatusUnauthorized, 401, "Unauthorized")
		return
	}
	for k := range req.URL.Query() {
		if k != "normalize" || req.Method != http.MethodPost {
			fail(w, http.StatusBadRequest, 400, "unknown parameter "+k)
			return
		}
	}
	normalize := false
	if v := req.URL.Query().Get("normalize"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fail(w, http.StatusBadRequest, 400, "normalize: "+err.Error())
			return
		}
		normalize = b
	}
	path, ok := strings.CutPrefix(req.URL.EscapedPath(), r.prefix+"/")
	if !ok {
		fail(w, http.StatusNotFound, 404, "HTTP 404 Not Found: "+req.URL.Path)
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			fail(w, http.StatusBadRequest, 400, "bad path")
			return
		}
		parts[i] = u
	}
	switch {
	case req.Method == http.MethodPost && len(parts) == 3 && parts[0] == "subjects" && parts[2] == "versions":
		r.calls["POST /subjects/{subject}/versions"]++
		r.register(w, req, parts[1], normalize)
	case req.Method == http.MethodPost && len(parts) == 2 && parts[0] == "subjects":
		r.calls["POST /subjects/{subject}"]++
		r.lookup(w, req, parts[1], normalize)
	case req.Method == http.MethodGet && len(parts) == 4 && parts[0] == "subjects" && parts[2] == "versions" && parts[3] == "latest":
		r.calls["GET /subjects/{subject}/versions/latest"]++
		ids := r.subjects[parts[1]]
		if len(ids) == 0 {
			fail(w, http.StatusNotFound, 40401, "Subject '"+parts[1]+"' not found.")
			return
		}
		s := r.schemas[ids[len(ids)-1]-1]
		reply(w, subjectSchema(parts[1], len(ids), ids[len(ids)-1], s))
	case req.Method == http.MethodGet && len(parts) == 3 && parts[0] == "schemas" && parts[1] == "ids":
		r.calls["GET /schemas/ids/{id}"]++
		id, err := strconv.Atoi(parts[2])
		if err != nil || id < 1 || id > len(r.schemas) {
			fail(w, http.StatusNotFound, 40403, "Schema "+parts[2]+" not found")
			return
		}
		s := r.schemas[id-1]
		out := map[string]any{"schema": s.Schema}
		if s.SchemaType != "AVRO" {
			out["schemaType"] = s.SchemaType
		}
		reply(w, out)
	default:
		fail(w, http.StatusNotFound, 404, "HTTP 404 Not Found: "+req.Method+" "+req.URL.Path)
	}
}

func subjectSchema(subject string, version, id int, s stored) map[string]any {
	out := map[string]any{"subject": subject, "version": version, "id": id, "schema": s.Schema}
	if s.SchemaType != "AVRO" {
		out["schemaType"] = s.SchemaType
	}
	return out
}

// body reads the request's schema: only schema, schemaType and an empty
// references are known fields.
func body(req *http.Request) (stored, error) {
	var in struct {
		Schema     *string           `json:"schema"`
		SchemaType string            `json:"schemaType"`
		References []json.RawMessage `json:"references"`
	}
	d := json.NewDecoder(req.Body)
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return stored{}, fmt.Errorf("bad request body: %w", err)
	}
	if in.Schema == nil {
		return stored{}, fmt.Errorf("bad request body: no schema")
	}
	if len(in.References) > 0 {
		return stored{}, fmt.Errorf("references are not served by the test registry")
	}
	if in.SchemaType == "" {
		in.SchemaType = "AVRO"
	}
	switch in.SchemaType {
	case "AVRO":
		if _, err := avro.ParseWithCache(*in.Schema, "", &avro.SchemaCache{}); err != nil {
			return stored{}, fmt.Errorf("Invalid schema %s: %w", *in.Schema, err)
		}
	case "JSON", "PROTOBUF":
		if in.SchemaType == "JSON" && !json.Valid([]byte(*in.Schema)) {
			return stored{}, fmt.Errorf("Invalid schema %s", *in.Schema)
		}
	default:
		return stored{}, fmt.Errorf("unknown schemaType %s", in.SchemaType)
	}
	return stored{Schema: *in.Schema, SchemaType: in.SchemaType}, nil
}

// key identifies a schema; normalized, Avro schemas compare by their canonical
// form.
func key(s stored, normalize bool) string {
	if normalize && s.SchemaType == "AVRO" {
		if p, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{}); err == nil {
			return s.SchemaType + " " + p.String()
		}
	}
	return s.SchemaType + " " + s.Schema
}

func (r *Registry) register(w http.ResponseWriter, req *http.Request, subject string, normalize bool) {
	s, err := body(req)
	if err != nil {
		if strings.HasPrefix(err.Error(), "bad request") {
			fail(w, http.StatusBadRequest, 400, err.Error())
		} else {
			fail(w, http.StatusUnprocessableEntity, 42201, err.Error())
		}
		return
	}
	k := key(s, normalize)
	id, ok := r.ids[k]
	if msg, refused := r.refuse[subject]; refused && !(ok && slices.Contains(r.subjects[subject], id)) {
		// A schema already under the subject registers again without a check.
		fail(w, http.StatusConflict, 409, msg)
		return
	}
	if !ok {
		r.schemas = append(r.schemas, s)
		id = len(r.schemas)
		r.ids[k] = id
	}
	for _, have := range r.subjects[subject] {
		if have == id {
			reply(w, map[string]int{"id": id})
			return
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	reply(w, map[string]int{"id": id})
}

func (r *Registry) lookup(w http.ResponseWriter, req *http.Request, subject string, normalize bool) {
	s, err := body(req)
	if err != nil {
		fail(w, http.StatusBadRequest, 400, err.Error())
		return
	}
	ids, ok := r.subjects[subject]
	if !ok {
		fail(w, http.StatusNotFound, 40401, "Subject '"+subject+"' not found.")
		return
	}
	id, ok := r.ids[key(s, normalize)]
	for v, have := range ids {
		if ok && have == id {
			reply(w, subjectSchema(subject, v+1, id, r.schemas[id-1]))
			return
		}
	}
	fail(w, http.StatusNotFound, 40403, "Schema not found")
}
