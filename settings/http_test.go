package settings_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
	httpsink "github.com/walrelay/walrelay/sink/http"
)

// The HTTP sink's headers and secrets name where their values are, in the file as
// on the command line; a value written in their place is refused without showing
// it, and so is a source that cannot be read.
func TestSettingsHTTP(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("Bearer abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALRELAY_TEST_HOOK_SECRET", "whsec_"+strings.Repeat("QUJD", 8))
	file := filepath.Join(dir, "walrelay.yaml")
	yaml := "database-url: postgres://relay@db/app\nsink: http\nhttp-url: https://hooks.example.com/{aggregate_type}\n" +
		"http-headers: Authorization=file:" + token + "\nhttp-signing-secrets: env:WALRELAY_TEST_HOOK_SECRET\nhttp-max-connections: 4\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means valid
	}{
		{"file", nil, ""},
		{"flag over file", []string{"--http-headers", "X-Api-Key=env:WALRELAY_TEST_HOOK_SECRET"}, ""},
		{"literal value", []string{"--http-headers", "Authorization=Bearer l1teral"}, "want env:VARIABLE or file:PATH"},
		{"missing file", []string{"--http-signing-secrets", "file:" + filepath.Join(dir, "none")}, "no such file"},
		{"templated host", []string{"--http-url", "https://{aggregate_type}.example.com/"}, "not in the host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			if err := fs.Parse(append([]string{"--config", file}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := s.Load(fs); err != nil {
				t.Fatal(err)
			}
			cfg, err := s.RelayConfig(t.Context(), slog.New(slog.DiscardHandler))
			if cfg.Sink != nil {
				cfg.Sink.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			case err != nil && strings.Contains(err.Error(), "l1teral"):
				t.Fatalf("the error shows the value: %v", err)
			}
			if tc.name == "file" {
				h := s.Sinks.HTTP
				if want := []httpsink.Header{{Name: "Authorization", Source: "file:" + token}}; !reflect.DeepEqual(h.Headers, want) ||
					h.MaxConnections != 4 || !reflect.DeepEqual(h.SigningSecrets, []string{"env:WALRELAY_TEST_HOOK_SECRET"}) {
					t.Fatalf("http settings %+v", h)
				}
			}
		})
	}
}
