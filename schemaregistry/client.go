package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/record"
)

// requestTimeout bounds one call: a registry that does not answer within it is
// down for the relay, which holds the stream and asks again.
const requestTimeout = 10 * time.Second

// Client resolves schemas to ids through franz-go's registry client.
type Client struct {
	cfg Config
	cl  *sr.Client
}

// New builds a client; it connects on the first call.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	opts := []sr.ClientOpt{
		sr.URLs(append([]string(nil), cfg.URLs...)...),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: requestTimeout}),
		sr.UserAgent("walrelay"),
	}
	if cfg.BasicAuth != "" {
		user, pass, _ := strings.Cut(cfg.BasicAuth, ":")
		opts = append(opts, sr.BasicAuth(user, pass))
	}
	if cfg.Token != "" {
		opts = append(opts, sr.BearerToken(cfg.Token))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	return &Client{cfg: cfg, cl: cl}, nil
}

func schemaType(t string) sr.SchemaType {
	switch t {
	case record.SchemaProtobuf:
		return sr.TypeProtobuf
	case record.SchemaJSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// Resolve gives need's id: registered (auto-register), the subject's latest
// version's (use-latest-version), or looked up. The registry refusing the schema
// (409, 422), or not having it when it may not be registered, is a
// *record.RefusedError; anything else is the registry not answering.
func (c *Client) Resolve(ctx context.Context, need record.SchemaNeed) (int32, error) {
	if c.cfg.Normalize {
		ctx = sr.WithParams(ctx, sr.Normalize)
	}
	s := sr.Schema{Schema: need.Schema, Type: schemaType(need.Type)}
	var id int
	var err error
	switch {
	case c.cfg.UseLatestVersion:
		var ss sr.SubjectSchema
		ss, err = c.cl.SchemaByVersion(ctx, need.Subject, -1)
		id = ss.ID
	case c.cfg.AutoRegister:
		id, err = c.cl.RegisterSchema(ctx, need.Subject, s, -1, -1)
	default:
		var ss sr.SubjectSchema
		ss, err = c.cl.LookupSchema(ctx, need.Subject, s)
		id = ss.ID
	}
	if err != nil {
		// The error may quote a URL, which /readyz shows: redacted, as every
		// URL setting is (docs/configuration.md, "Redaction").
		return 0, redact.Error(classify(need.Subject, err, !c.cfg.AutoRegister), c.cfg.URLs...)
	}
	return int32(id), nil
}

// classify makes the registry's refusal a *record.RefusedError. notFound: a 404
// is a refusal too, where the schema may not be registered.
func classify(subject string, err error, notFound bool) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity:
			return &record.RefusedError{Subject: subject, Status: re.StatusCode, Message: re.Error()}
		case re.StatusCode == http.StatusNotFound && notFound:
			return &record.RefusedError{Subject: subject, Status: re.StatusCode,
				Message: re.Error() + " (schema-registry-auto-register is false: register the schema, or set it true)"}
		}
	}
	return fmt.Errorf("schema registry, subject %s: %w", subject, err)
}

// Fetch gives the schema a native payload was written with: the latest version
// of need.Subject, or the schema with id need.ID. The registry not having it
// (404) is a *record.RefusedError; anything else is the registry not answering.
func (c *Client) Fetch(ctx context.Context, need record.SchemaNeed) (record.FetchedSchema, error) {
	var s sr.Schema
	var id int
	var err error
	where := need.Subject
	if need.ID > 0 {
		where = fmt.Sprintf("schema id %d", need.ID)
		id = int(need.ID)
		s, err = c.cl.SchemaByID(ctx, id)
	} else {
		var ss sr.SubjectSchema
		ss, err = c.cl.SchemaByVersion(ctx, need.Subject, -1)
		s, id = ss.Schema, ss.ID
	}
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
			err = &record.RefusedError{Subject: where, Status: re.StatusCode, Message: re.Error() +
				" (a native payload's schema is fetched, never registered: register it, or correct native-payload-subject or the id column)"}
			return record.FetchedSchema{}, redact.Error(err, c.cfg.URLs...)
		}
		return record.FetchedSchema{}, redact.Error(fmt.Errorf("schema registry, %s: %w", where, err), c.cfg.URLs...)
	}
	t := record.SchemaAvro
	switch s.Type {
	case sr.TypeProtobuf:
		t = record.SchemaProtobuf
	case sr.TypeJSON:
		t = record.SchemaJSONSchema
	}
	return record.FetchedSchema{ID: int32(id), Type: t, Text: s.Schema, References: len(s.References)}, nil
}
