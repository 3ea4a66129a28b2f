package schemaregistry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testregistry"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/schemaregistry"
)

// Fetch gives a native payload's schema: the subject's latest version, or the
// schema of an id, with its type; a subject or id the registry lacks is a
// refusal saying the schema is fetched, never registered; a registry that does
// not answer is not a refusal.
func TestFetch(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	c := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
	ctx := context.Background()
	const proto = "syntax = \"proto3\";\nmessage M { string a = 1; }\n"
	id, err := c.Resolve(ctx, record.SchemaNeed{Subject: "s1", Type: record.SchemaProtobuf, Schema: proto})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := c.Fetch(ctx, record.SchemaNeed{Subject: "s1", Type: record.SchemaProtobuf, Native: true})
	if err != nil || latest.ID != id || latest.Type != record.SchemaProtobuf || latest.Text != proto {
		t.Fatalf("latest of s1: %+v %v, want id %d", latest, err, id)
	}
	byID, err := c.Fetch(ctx, record.SchemaNeed{ID: id, Type: record.SchemaProtobuf, Native: true})
	if err != nil || byID != latest {
		t.Fatalf("schema id %d: %+v %v", id, byID, err)
	}
	var refused *record.RefusedError
	for _, n := range []record.SchemaNeed{{Subject: "nope"}, {ID: 999}} {
		n.Native = true
		if _, err := c.Fetch(ctx, n); !errors.As(err, &refused) || refused.Status != http.StatusNotFound ||
			!strings.Contains(err.Error(), "never registered") {
			t.Errorf("%+v: %v, want a 404 refusal", n, err)
		}
	}
	reg.SetDown(true)
	if _, err := c.Fetch(ctx, record.SchemaNeed{Subject: "s1", Native: true}); err == nil || errors.As(err, &refused) {
		t.Errorf("registry down: %v, want an error that is not a refusal", err)
	}
}
