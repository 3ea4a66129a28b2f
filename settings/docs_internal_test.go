package settings

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the docs")

const (
	tableStart = "<!-- settings: generated from settings/settings.go by `go test ./settings -run TestConfigurationTable -update` -->\n"
	tableEnd   = "<!-- end of settings -->\n"
)

// The settings table in docs/configuration.md is the settings themselves, rendered:
// each default and each description is written once, in settings.go.
func TestConfigurationTable(t *testing.T) {
	const path = "../docs/configuration.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	a, b := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if a < 0 || b < a {
		t.Fatalf("%s has no generated settings table between %q and %q", path, tableStart, tableEnd)
	}
	want := settingsTable()
	if got := text[a+len(tableStart) : b]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(text[:a+len(tableStart)]+want+text[b:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's settings table differs from settings.go; run with -update. Want:\n%s", path, want)
	}
}

func settingsTable() string {
	var b strings.Builder
	b.WriteString("| setting | type | default | meaning |\n|---|---|---|---|\n")
	for _, st := range New().all {
		def := "(none)"
		if st.def != "" {
			def = "`" + st.def + "`"
		}
		kind := st.kind
		if kind == "" {
			kind = kindString
		}
		b.WriteString("| `" + st.name + "` | " + kind + " | " + def + " | " + strings.ReplaceAll(st.usage, "|", `\|`) + " |\n")
	}
	return b.String()
}
