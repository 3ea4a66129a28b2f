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

// VersionEnv names the environment variable that selects a PostgreSQL major
// version, e.g. WALRELAY_PG_VERSION=17: [BinDir] resolves it with [BinDirFor],
// and [Start] refuses a server of another major version, so a version-matrix
// run cannot silently test the machine's default PostgreSQL.
const VersionEnv = "WALRELAY_PG_VERSION"

// LocalDir is the project-local directory, at the repository root, where
// `make setup-matrix` installs one PostgreSQL per major version (LocalDir/17/bin).
const LocalDir = ".pg"

// debianGlob is where Debian and Ubuntu install one directory per major version.
const debianGlob = "/usr/lib/postgresql/*/bin"

// BinDir finds the PostgreSQL server binaries (initdb, postgres, pg_ctl):
// $WALRELAY_PG_BINDIR if set, else [BinDirFor] $WALRELAY_PG_VERSION if set,
// else the newest /usr/lib/postgresql/*/bin containing initdb, else the
// directory of initdb on PATH. The error wraps [ErrNoBinaries] when none is
// found.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if !hasServerBinaries(dir) {
			return "", fmt.Errorf("%s=%s has no initdb and postgres; point it at a PostgreSQL bin directory or unset it: %w", BinDirEnv, dir, ErrNoBinaries)
		}
		return dir, nil
	}
	if major := os.Getenv(VersionEnv); major != "" {
		dir, err := BinDirFor(major)
		if err != nil {
			// %v, not %w: a version asked for by name and missing is a failure,
			// never a reason for a test to skip.
			return "", fmt.Errorf("%s=%s: %v", VersionEnv, major, err)
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

// BinDirFor finds the server binaries of one major version: LocalDir/<major>/bin
// in the working directory or the nearest parent that has it (tests run in their
// package's directory), else Debian's /usr/lib/postgresql/<major>/bin. The error
// wraps [ErrNoBinaries] and says how to install them.
func BinDirFor(major string) (string, error) {
	if _, err := strconv.Atoi(major); err != nil {
		return "", fmt.Errorf("PostgreSQL major version %q: want a number such as 17", major)
	}
	var searched []string
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(dir, LocalDir, major, "bin")
			if hasServerBinaries(candidate) {
				return candidate, nil
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
		searched = append(searched, filepath.Join(LocalDir, major, "bin")+" in "+wd+" and its parents")
	}
	// Where scripts/pg-matrix.sh installs when the postgres OS user cannot reach the
	// repository (a clone under /root, say), or where WALRELAY_PG_MATRIX_DIR points it.
	for _, base := range []string{os.Getenv("WALRELAY_PG_MATRIX_DIR"), "/var/tmp/walrelay-pg"} {
		if base == "" {
			continue
		}
		candidate := filepath.Join(base, major, "bin")
		if hasServerBinaries(candidate) {
			return candidate, nil
		}
		searched = append(searched, candidate)
	}
	debian := filepath.Join("/usr/lib/postgresql", major, "bin")
	if hasServerBinaries(debian) {
		return debian, nil
	}
	searched = append(searched, debian)
	return "", fmt.Errorf("no PostgreSQL %s (searched %s; `make setup-matrix` installs the tested versions): %w",
		major, strings.Join(searched, ", "), ErrNoBinaries)
}

// setupMajor is the major version besides the machine's default that `make setup`
// installs: the newest tested.
const setupMajor = "17"

// BinDirAtLeast finds server binaries of major version minMajor or later, for a
// feature older servers lack (decoding on a hot standby, docs/postgresql.md): the
// version $WALRELAY_PG_VERSION asks for when it is recent enough, so a matrix run
// tests its own version where it can, else setupMajor. Errors are [BinDirFor]'s.
func BinDirAtLeast(minMajor int) (string, error) {
	major := setupMajor
	if v := os.Getenv(VersionEnv); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= minMajor {
			major = v
		}
	}
	return BinDirFor(major)
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
