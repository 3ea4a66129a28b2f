package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoBinaries is wrapped by the error [BinDir] and [Start] return when no
// PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries not found (initdb); install them with: apt-get install -y postgresql")

// BinDirEnv names the environment variable that, when set, points [BinDir]
// at a directory holding initdb and postgres.
const BinDirEnv = "WALRELAY_PG_BINDIR"

// debianGlob is where Debian and Ubuntu install one directory per major version.
const debianGlob = "/usr/lib/postgresql/*/bin"

// BinDir finds the PostgreSQL server binaries (initdb, postgres, pg_ctl):
// $WALRELAY_PG_BINDIR if set, else the newest /usr/lib/postgresql/*/bin
// containing initdb, else the directory of initdb on PATH. The error wraps
// [ErrNoBinaries] when none is found.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if !hasServerBinaries(dir) {
			return "", fmt.Errorf("%s=%s has no initdb and postgres; point it at a PostgreSQL bin directory or unset it: %w", BinDirEnv, dir, ErrNoBinaries)
		}
		return dir, nil
	}

	dirs, _ := filepath.Glob(debianGlob) // the pattern is constant and valid
	slices.SortFunc(dirs, func(a, b string) int {
		return compareVersions(filepath.Base(filepath.Dir(b)), filepath.Base(filepath.Dir(a))) // newest first
	})
	for _, dir := range dirs {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}

	if initdb, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(initdb)
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("searched $%s, %s and PATH: %w", BinDirEnv, debianGlob, ErrNoBinaries)
}

// BinDirFor finds the server binaries of one major version ("17"), at Debian's
// /usr/lib/postgresql/<major>/bin, for tests that need that version's features. The
// error wraps [ErrNoBinaries] when it is not installed.
func BinDirFor(major string) (string, error) {
	dir := filepath.Join("/usr/lib/postgresql", major, "bin")
	if !hasServerBinaries(dir) {
		return "", fmt.Errorf("PostgreSQL %s is not installed at %s (apt-get install -y postgresql-%s): %w", major, dir, major, ErrNoBinaries)
	}
	return dir, nil
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// compareVersions orders version strings like "9.6", "15" and "16" numerically,
// component by component; non-numeric components sort before numeric ones.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		x, y := -1, -1
		if i < len(as) {
			if n, err := strconv.Atoi(as[i]); err == nil {
				x = n
			}
		}
		if i < len(bs) {
			if n, err := strconv.Atoi(bs[i]); err == nil {
				y = n
			}
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}
