package http

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/walrelay/walrelay/record"
)

// Defaults of Config.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultMaxConnections = 16
)

// Config of the HTTP sink. Start from DefaultConfig.
type Config struct {
	// URL is where each event is POSTed, http or https. Its path and query may use
	// {aggregate_type} and {event_type} (escaped, see url.go); its host may not.
	URL string
	// Timeout bounds one request, from connecting to the end of the answer's status.
	Timeout time.Duration
	// MaxConnections is how many requests are under way at once, each for a
	// different aggregate; also the connections kept alive to the host.
	MaxConnections int
	// CAFile is a PEM file of the CA that signed the server's certificate (empty:
	// the system roots); CertFile and KeyFile a client certificate, for servers
	// that require one.
	CAFile, CertFile, KeyFile string
	// Headers are fixed headers sent with every request (an Authorization among
	// them); their values are read from a file or the environment when the sink is
	// created, never held in the configuration, and never logged.
	Headers []Header
	// SigningSecrets are where the Standard Webhooks secrets are read from
	// ("env:NAME" or "file:PATH"; a file may hold several, one a line). Every request
	// carries one v1 signature per secret, so that a receiver verifies during a key
	// rotation with either key. Empty: requests are not signed.
	SigningSecrets []string
	// Format is how an event becomes the body and headers (package record).
	Format record.Format
	// Logger receives warnings while the endpoint does not take events; nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock requests are signed with; nil means time.Now. For tests.
	Now func() time.Time
}

// Header is a fixed header: Name, and Source, where its value is read from:
// "env:NAME" (an environment variable) or "file:PATH" (a file's contents, without
// the trailing newline).
type Header struct {
	Name, Source string
}

// ParseHeader reads "Name=env:VAR" or "Name=file:PATH", the form of --http-headers.
func ParseHeader(s string) (Header, error) {
	name, src, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return Header{}, fmt.Errorf("header %q: want Name=env:VARIABLE or Name=file:PATH (the value is never written in the configuration)", s)
	}
	return Header{Name: strings.TrimSpace(name), Source: strings.TrimSpace(src)}, nil
}

// DefaultConfig returns the defaults; set URL.
func DefaultConfig() Config {
	return Config{Timeout: DefaultTimeout, MaxConnections: DefaultMaxConnections}
}

// Validate checks the configuration, and that every file and variable it names
// can be read, without connecting.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL == "" {
		add("url is required (--http-url or WALRELAY_HTTP_URL): where events are POSTed")
	} else if _, err := parseURLTemplate(c.URL); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout <= 0 {
		add("timeout must be positive, got %s", c.Timeout)
	}
	if c.MaxConnections < 1 {
		add("max connections must be at least 1, got %d", c.MaxConnections)
	}
	if _, err := c.tlsConfig(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.fixedHeaders(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.secrets(); err != nil {
		errs = append(errs, err)
	}
	if c.Format.KeyConverter != record.String || c.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: an HTTP request has no key (the aggregate id is the " +
			"Aggregate-Id header); leave them at their defaults")
	}
	if c.Format.EventTimestamp {
		add("record-timestamp created-at: a request carries no record timestamp (created_at is the Created-At header); leave record-timestamp at publish")
	}
	if err := c.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tlsConfig is the client's TLS configuration, nil for the defaults.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca file %s holds no PEM certificate", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("tls cert file and key file go together: set both or neither")
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// fixedHeaders reads the fixed headers' values from their sources.
func (c *Config) fixedHeaders() ([][2]string, error) {
	out := make([][2]string, 0, len(c.Headers))
	for _, h := range c.Headers {
		name := textproto.CanonicalMIMEHeaderKey(h.Name)
		if !validToken(name) {
			return nil, fmt.Errorf("header name %q: use letters, digits and '-'", h.Name)
		}
		if ownHeader(name) {
			return nil, fmt.Errorf("header %s is one the sink sets itself; remove it from --http-headers", name)
		}
		v, err := readSource(h.Source)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		v = strings.TrimRight(v, "\r\n")
		if !printable(v) {
			return nil, fmt.Errorf("header %s: its value (from %s) must be one line of printable ASCII", name, h.Source)
		}
		out = append(out, [2]string{name, v})
	}
	return out, nil
}

// secrets reads the signing secrets: Standard Webhooks' whsec_ and base64, or base64
// alone, of 24 to 64 bytes as the specification asks.
func (c *Config) secrets() ([][]byte, error) {
	var out [][]byte
	for _, src := range c.SigningSecrets {
		v, err := readSource(src)
		if err != nil {
			return nil, fmt.Errorf("signing secret: %w", err)
		}
		sc := bufio.NewScanner(strings.NewReader(v))
		n := 0
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			n++
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, "whsec_"))
			if err != nil || len(key) < 24 || len(key) > 64 {
				return nil, fmt.Errorf("signing secret %d from %s: want whsec_ and the base64 of 24 to 64 random bytes "+
					"(e.g. echo whsec_$(head -c 32 /dev/urandom | base64))", n, src)
			}
			out = append(out, key)
		}
		if n == 0 {
			return nil, fmt.Errorf("signing secret from %s is empty", src)
		}
	}
	return out, nil
}

// readSource reads "env:NAME" or "file:PATH". Errors never include the value.
func readSource(src string) (string, error) {
	kind, ref, _ := strings.Cut(src, ":")
	switch {
	case kind == "env" && ref != "":
		v, ok := os.LookupEnv(ref)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", ref)
		}
		return v, nil
	case kind == "file" && ref != "":
		b, err := os.ReadFile(ref)
		if err != nil {
			return "", fmt.Errorf("read %w", err)
		}
		return string(b), nil
	}
	return "", errors.New("want env:VARIABLE or file:PATH, where the value is read from; a value itself is never written in the configuration")
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// printable: bytes an HTTP header value carries through every proxy unchanged.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
