package schemaregistry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Config is how to reach the registry and what to ask of it.
type Config struct {
	// URLs are the registry's base URLs, tried in turn.
	URLs []string
	// BasicAuth is user:password; Token a bearer token. At most one.
	BasicAuth, Token string
	// CAFile, CertFile and KeyFile are PEM files: the CA that signed the
	// registry's certificate, and a client certificate with its key.
	CAFile, CertFile, KeyFile string
	// AutoRegister registers a schema not yet under its subject (Confluent's
	// auto.register.schemas); otherwise it is looked up, and one not found is
	// refused.
	AutoRegister bool
	// UseLatestVersion takes the subject's latest version's id rather than
	// registering or looking up (use.latest.version); the latest version must be
	// the schema walrelay writes.
	UseLatestVersion bool
	// Normalize asks the registry to normalize the schema (normalize.schemas).
	Normalize bool
}

// DefaultConfig registers schemas, as Confluent's serializers do by default.
func DefaultConfig() Config { return Config{AutoRegister: true} }

// ParseURLs splits a comma-separated list of URLs.
func ParseURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Validate checks the configuration without connecting.
func (c Config) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, errors.New("schema-registry-url is empty: the avro, protobuf and json-schema converters need "+
			"a schema registry; set schema-registry-url to it, e.g. http://schema-registry:8081"))
	}
	for _, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, errors.New("schema-registry-url: each URL must be http:// or https:// with a host"))
			break
		}
	}
	if c.BasicAuth != "" && !strings.Contains(c.BasicAuth, ":") {
		errs = append(errs, errors.New("schema-registry-basic-auth must be user:password"))
	}
	if c.BasicAuth != "" && c.Token != "" {
		errs = append(errs, errors.New("schema-registry-basic-auth and schema-registry-token: set one of them"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("schema-registry-tls-cert-file and schema-registry-tls-key-file go together: set both or neither"))
	}
	if c.UseLatestVersion && c.AutoRegister {
		errs = append(errs, errors.New("schema-registry-use-latest-version needs schema-registry-auto-register false, "+
			"as Confluent's use.latest.version needs auto.register.schemas false"))
	}
	return errors.Join(errs...)
}

// tlsConfig is the client's TLS configuration, nil for the defaults.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("schema-registry-tls-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("schema-registry-tls-ca-file %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("schema-registry client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
