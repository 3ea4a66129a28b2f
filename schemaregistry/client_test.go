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

func client(t *testing.T, cfg schemaregistry.Config) *schemaregistry.Client {
	t.Helper()
	c, err := schemaregistry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var textNeed = record.SchemaNeed{Subject: "outbox.event.order-value", Type: record.SchemaAvro, Schema: `["null","string"]`, Value: true}

// Registering gives an id, the same for the same schema; a second subject with
// the same schema gets the same id, as Confluent's registry gives one id per
// schema. The registry must have seen the POST /subjects/{subject}/versions call.
func TestResolveRegisters(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	c := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
	id, err := c.Resolve(context.Background(), textNeed)
	if err != nil || id != 1 {
		t.Fatalf("Resolve: %d %v", id, err)
	}
	other := textNeed
	other.Subject = "other-value"
	if id2, err := c.Resolve(context.Background(), other); err != nil || id2 != id {
		t.Fatalf("same schema under another subject: %d %v, want %d", id2, err, id)
	}
	if text, typ, ok := reg.Schema(1); !ok || text != textNeed.Schema || typ != "AVRO" {
		t.Errorf("registered %q %q %v", text, typ, ok)
	}
}

// 409 (incompatible) and 422 (invalid) are refusals carrying the registry's
// message; a registry that does not answer is not.
func TestResolveRefusalsAndOutage(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	c := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
	reg.Refuse(textNeed.Subject, "Schema being registered is incompatible with an earlier schema")
	var refused *record.RefusedError
	_, err := c.Resolve(context.Background(), textNeed)
	if !errors.As(err, &refused) || refused.Status != http.StatusConflict || !strings.Contains(refused.Message, "incompatible") {
		t.Errorf("refused subject: %v", err)
	}
	bad := record.SchemaNeed{Subject: "bad-value", Type: record.SchemaAvro, Schema: `{"type":"record"}`}
	if _, err := c.Resolve(context.Background(), bad); !errors.As(err, &refused) || refused.Status != http.StatusUnprocessableEntity {
		t.Errorf("invalid schema: %v, want a 422 refusal", err)
	}
	reg.SetDown(true)
	ok := textNeed
	ok.Subject = "fine-value"
	if _, err := c.Resolve(context.Background(), ok); err == nil || errors.As(err, &refused) {
		t.Errorf("registry down: %v, want an error that is no refusal", err)
	}
}

// Without auto-register the schema is looked up (POST /subjects/{subject}); one
// not registered is refused, saying which setting registers it. With
// use-latest-version the subject's latest version's id is taken.
func TestResolveLookupAndLatest(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	lookup := client(t, schemaregistry.Config{URLs: []string{reg.URL()}})
	var refused *record.RefusedError
	if _, err := lookup.Resolve(context.Background(), textNeed); !errors.As(err, &refused) ||
		!strings.Contains(err.Error(), "schema-registry-auto-register") {
		t.Errorf("lookup of an unregistered schema: %v", err)
	}
	if _, err := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true}).Resolve(context.Background(), textNeed); err != nil {
		t.Fatal(err)
	}
	if id, err := lookup.Resolve(context.Background(), textNeed); err != nil || id != 1 {
		t.Errorf("lookup: %d %v", id, err)
	}
	latest := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, UseLatestVersion: true})
	if id, err := latest.Resolve(context.Background(), record.SchemaNeed{Subject: textNeed.Subject, Schema: "ignored"}); err != nil || id != 1 {
		t.Errorf("latest: %d %v", id, err)
	}
	if reg.Calls("POST /subjects/{subject}") != 2 || reg.Calls("GET /subjects/{subject}/versions/latest") != 1 {
		t.Errorf("calls: lookup %d, latest %d", reg.Calls("POST /subjects/{subject}"), reg.Calls("GET /subjects/{subject}/versions/latest"))
	}
}

// Basic auth and bearer tokens are sent; without them the registry answers 401,
// which is no refusal (the events wait for the operator to fix the credentials).
func TestResolveAuth(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	reg.User, reg.Password = "relay", "s3cret"
	if _, err := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true, BasicAuth: "relay:s3cret"}).
		Resolve(context.Background(), textNeed); err != nil {
		t.Errorf("basic auth: %v", err)
	}
	var refused *record.RefusedError
	_, err := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true, BasicAuth: "relay:wrong"}).
		Resolve(context.Background(), textNeed)
	if err == nil || errors.As(err, &refused) || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong password: %v, want an error that is no refusal and does not carry the password", err)
	}
	reg.User, reg.Token = "", "tok"
	if _, err := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true, Token: "tok"}).
		Resolve(context.Background(), textNeed); err != nil {
		t.Errorf("bearer token: %v", err)
	}
}

// Several URLs: a registry that cannot be reached is passed over for the next.
func TestResolveSeveralURLs(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	dead := testregistry.Start()
	deadURL := dead.URL()
	dead.Close()
	c := client(t, schemaregistry.Config{URLs: []string{deadURL, reg.URL()}, AutoRegister: true})
	if _, err := c.Resolve(context.Background(), textNeed); err != nil {
		t.Errorf("with the first URL down: %v", err)
	}
}

// The normalize setting is sent as the normalize parameter.
func TestResolveNormalize(t *testing.T) {
	reg := testregistry.Start()
	defer reg.Close()
	c := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true, Normalize: true})
	a := record.SchemaNeed{Subject: "n-value", Type: record.SchemaAvro, Schema: `{"type":"string"}`}
	b := record.SchemaNeed{Subject: "n-value", Type: record.SchemaAvro, Schema: `"string"`}
	ida, err1 := c.Resolve(context.Background(), a)
	idb, err2 := c.Resolve(context.Background(), b)
	if err1 != nil || err2 != nil || ida != idb {
		t.Errorf("normalized ids %d %d (%v %v), want one id for equivalent schemas", ida, idb, err1, err2)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  schemaregistry.Config
		want string
	}{
		{schemaregistry.Config{}, "schema-registry-url is empty"},
		{schemaregistry.Config{URLs: []string{"ftp://x"}}, "http:// or https://"},
		{schemaregistry.Config{URLs: []string{"http://x"}, BasicAuth: "nocolon"}, "user:password"},
		{schemaregistry.Config{URLs: []string{"http://x"}, BasicAuth: "a:b", Token: "t"}, "set one of them"},
		{schemaregistry.Config{URLs: []string{"http://x"}, CertFile: "c"}, "go together"},
		{schemaregistry.Config{URLs: []string{"http://x"}, AutoRegister: true, UseLatestVersion: true}, "auto-register false"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// A URL's credentials never show in an error, which /readyz and the log carry.
func TestResolveErrorRedactsURL(t *testing.T) {
	c := client(t, schemaregistry.Config{URLs: []string{"http://relay:url-secret@127.0.0.1:1"}, AutoRegister: true})
	_, err := c.Resolve(context.Background(), textNeed)
	if err == nil || strings.Contains(err.Error(), "url-secret") {
		t.Errorf("error %v, want one without the URL's password", err)
	}
}

// A base URL with a path, as Apicurio's Confluent-compatible API has
// (/apis/ccompat/v7), keeps it.
func TestResolveUnderAPath(t *testing.T) {
	reg := testregistry.StartAt("/apis/ccompat/v7")
	defer reg.Close()
	c := client(t, schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
	if id, err := c.Resolve(context.Background(), textNeed); err != nil || id != 1 {
		t.Errorf("Resolve under /apis/ccompat/v7: %d %v", id, err)
	}
}
