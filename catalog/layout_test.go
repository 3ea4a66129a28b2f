package catalog_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// catalog remembers; replication streams. catalog imports neither replication nor
// what runs or serves a relay, so that what walrelay records in PostgreSQL can be
// read (walrelay status, migrate) without the replication protocol (docs/design.md,
// "What depends on what"). go list shows what catalog links.
func TestCatalogImportsNoReplication(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/walrelay/walrelay/catalog").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/walrelay/walrelay/outbox") {
		t.Fatalf("go list -deps gave an implausible list (no outbox package):\n%s", out)
	}
	for _, dep := range deps {
		for _, banned := range []string{"replication", "relay", "poller", "admin", "ops", "migrations", "sink", "decoder"} {
			if dep == "github.com/walrelay/walrelay/"+banned || strings.HasPrefix(dep, "github.com/walrelay/walrelay/"+banned+"/") {
				t.Errorf("catalog depends on %s; catalog is below it, and it imports catalog", dep)
			}
		}
	}
}

// sqlNamingWalrelay matches text that is a statement, or a piece of one, naming one
// of walrelay's own tables or functions: a walrelay_ name called as a function, or a
// walrelay_ name beside an SQL keyword (written in capitals, as every statement here
// is). Log and error messages and metric names name walrelay_ tables in prose,
// without either; a command's help text, which may quote SQL, is not read.
var (
	walrelayName = regexp.MustCompile(`\bwalrelay_[a-z_]+\b`)
	walrelayCall = regexp.MustCompile(`\bwalrelay_[a-z_]+\(`)
	sqlKeyword   = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|FROM|WHERE|JOIN|CREATE|ALTER|DROP|TRUNCATE|RETURNING|EXISTS)\b|to_regclass|to_regproc`)
)

func namesWalrelaySQL(s string) bool {
	return walrelayCall.MatchString(s) || (walrelayName.MatchString(s) && sqlKeyword.MatchString(s))
}

// walrelaySQL returns the string constants of a Go file that are SQL naming a
// walrelay_ table or function. A string built with + is read whole (its other
// operands as a blank), so a statement split over several literals counts too.
func walrelaySQL(t *testing.T, fset *token.FileSet, file string) []string {
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	var found []string
	var visit func(n ast.Node) bool
	var flatten func(e ast.Expr) string
	flatten = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				if s, err := strconv.Unquote(e.Value); err == nil {
					return s
				}
			}
			return " "
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				return flatten(e.X) + flatten(e.Y)
			}
		case *ast.ParenExpr:
			return flatten(e.X)
		}
		ast.Inspect(e, visit)
		return " "
	}
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			// A command's help (cobra's Short, Long and Example) is prose a person reads.
			if key, ok := n.Key.(*ast.Ident); ok && (key.Name == "Short" || key.Name == "Long" || key.Name == "Example") {
				return false
			}
		case *ast.BasicLit, *ast.BinaryExpr:
			e := n.(ast.Expr)
			if b, ok := e.(*ast.BinaryExpr); ok && b.Op != token.ADD {
				return true
			}
			if s := flatten(e); namesWalrelaySQL(s) {
				found = append(found, fset.Position(n.Pos()).String()+": "+s)
			}
			return false
		}
		return true
	}
	ast.Inspect(f, visit)
	return found
}

// Outside tests and help texts, every statement that names a walrelay_ table or
// function is catalog's or migrations' (docs/design.md, "What depends on what"), so
// that the published horizon's invariant has its enforcing statements in two places.
func TestWalrelaySQLOnlyInCatalogAndMigrations(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"SELECT max(recorded_at) FROM walrelay_progress WHERE slot_name = $1",
		"(SELECT walrelay_horizon(", "to_regclass('walrelay_table_slots') IS NOT NULL"} {
		if !namesWalrelaySQL(s) {
			t.Fatalf("the check does not see %q as SQL naming walrelay's tables", s)
		}
	}
	for _, s := range []string{"read walrelay_slots (run walrelay migrate?)", "walrelay_slot_active{slot=\"",
		"the database's walrelay schema is older than this walrelay (it lacks walrelay_confirmed, migration 9): run walrelay migrate"} {
		if namesWalrelaySQL(s) {
			t.Fatalf("the check takes the message %q for SQL", s)
		}
	}
	// One line per package of the module (not the harness's, a module of its own):
	// its import path, then its Go files, those of other platforms too.
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}}{{range .GoFiles}} {{$.Dir}}/{{.}}{{end}}{{range .IgnoredGoFiles}} {{$.Dir}}/{{.}}{{end}}`,
		"github.com/walrelay/walrelay/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	fset := token.NewFileSet()
	home, files := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], "github.com/walrelay/walrelay/")
		if !ok {
			t.Fatalf("go list named a package outside the module: %s", fields[0])
		}
		for _, file := range fields[1:] {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			files++
			found := walrelaySQL(t, fset, file)
			if pkg == "catalog" || pkg == "migrations" {
				home += len(found)
				continue
			}
			for _, s := range found {
				t.Errorf("SQL naming walrelay's tables outside catalog and migrations (move the statement to catalog): %s", s)
			}
		}
	}
	t.Logf("read %d files; %d statements naming walrelay's tables in catalog and migrations", files, home)
	if home < 20 {
		t.Fatalf("found %d statements naming walrelay's tables in catalog and migrations: the check reads too little", home)
	}
}
