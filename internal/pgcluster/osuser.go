package pgcluster

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverUser is the OS user initdb and postgres run as when we are root.
const serverUser = "postgres"

// runAs is who the server processes run as; nil cred means the current user.
type runAs struct {
	cred *syscall.Credential
}

// lookupRunAs returns the current user, or the postgres OS user when running
// as root (initdb and postgres refuse to run as root).
func lookupRunAs() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return runAs{}, fmt.Errorf("look up OS user %q (initdb and postgres refuse to run as root; install the postgresql package, which creates it, or run as a non-root user): %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("parse uid %q of OS user %q: %w", u.Uid, serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("parse gid %q of OS user %q: %w", u.Gid, serverUser, err)
	}
	return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// prepareDir hands dir (recursively) to the server user and checks that the
// user can reach it.
func (r runAs) prepareDir(dir string) error {
	if r.cred == nil {
		return nil
	}
	uid, gid := int(r.cred.Uid), int(r.cred.Gid)
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown %s to OS user %q: %w", dir, serverUser, err)
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if !r.canTraverse(p) {
			return fmt.Errorf("OS user %q cannot traverse %s to reach %s; set TMPDIR to a directory it can reach, e.g. TMPDIR=/tmp", serverUser, p, dir)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (r runAs) canTraverse(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let initdb report it
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == r.cred.Uid:
		return perm&0o100 != 0
	case st.Gid == r.cred.Gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// chown gives a file we created to the server user.
func (r runAs) chown(path string) error {
	if r.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
		return fmt.Errorf("chown %s to OS user %q: %w", path, serverUser, err)
	}
	return nil
}

// command builds an exec.Cmd that runs as the server user in its own process
// group, in dir, with PG* variables removed from the environment so the
// caller's PGDATA, PGPORT and friends cannot leak in.
func (r runAs) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true, // Ctrl-C to our process group must not reach it
		Credential: r.cred,
		// If we die without Close, shut the server down immediately rather
		// than leaving an orphan. Linux ties this to the creating thread;
		// Go keeps its threads alive unless a goroutine exits while locked.
		Pdeathsig: syscall.SIGQUIT,
	}
	return cmd
}

// checkReachable makes sure the server user can reach binDir: binaries installed
// by root under a private directory (a clone in /root, say) would otherwise fail
// in initdb with a bare "permission denied".
func (r runAs) checkReachable(binDir string) error {
	if r.cred == nil {
		return nil
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", binDir, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		if !r.canTraverse(p) {
			return fmt.Errorf("OS user %q cannot traverse %s to reach the server binaries in %s; make it traversable (chmod o+x) or install them elsewhere", serverUser, p, abs)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
