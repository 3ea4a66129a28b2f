package testregistry_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testregistry"
)

// The test registry is strict: unknown paths, methods, parameters and body fields
// are errors, as they are for a real registry, so that a client sending them fails
// here too.
func TestStrict(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/subjects/s/versions", `{"schema":"\"string\""}`, 200},
		{"GET", "/subjects", "", 404},
		{"DELETE", "/subjects/s", "", 404},
		{"POST", "/subjects/s/versions", `{"schema":"\"string\"","bogus":1}`, 400},
		{"POST", "/subjects/s/versions", `not json`, 400},
		{"POST", "/subjects/s/versions?verbose=true", `{"schema":"\"string\""}`, 400},
		{"POST", "/subjects/s/versions", `{"schema":"{\"type\":\"nope\"}"}`, 422},
		{"POST", "/subjects/s", `{"schema":"\"int\""}`, 404},
		{"GET", "/schemas/ids/1", "", 200},
		{"GET", "/schemas/ids/9", "", 404},
		{"GET", "/subjects/s/versions/latest", "", 200},
		{"GET", "/subjects/none/versions/latest", "", 404},
	} {
		req, _ := http.NewRequest(tc.method, reg.URL()+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %s: %d, want %d", tc.method, tc.path, tc.body, resp.StatusCode, tc.want)
		}
	}
}
