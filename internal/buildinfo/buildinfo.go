// Package buildinfo says which walrelay a binary is: the module version and the VCS
// revision the Go toolchain stamped into it. `walrelay version`, the start-up log
// line and the walrelay_build_info metric all read it here.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// ModulePath is walrelay's module.
const ModulePath = "github.com/walrelay/walrelay"

// version and revision are set at link time by builds that know better than the
// toolchain's stamp, such as `make image` (scripts/image.sh), whose image labels carry
// the same two values:
//
//	go build -ldflags "-X github.com/walrelay/walrelay/internal/buildinfo.version=v0.5.0 \
//	    -X github.com/walrelay/walrelay/internal/buildinfo.revision=$(git rev-parse HEAD)"
//
// Empty (the default) leaves the stamp alone.
var version, revision string

// Info identifies a build.
type Info struct {
	// Version is the module version: a tag, a pseudo-version, or (devel) for a
	// build the toolchain could not stamp.
	Version string
	// Revision is the VCS commit the binary was built from; empty when the build
	// had no VCS information (go build -buildvcs=false, a source tree without .git).
	Revision string
	// Modified: the work tree had uncommitted changes.
	Modified  bool
	GoVersion string
}

// Read returns the running binary's build. Where walrelay is a library of another
// program, Version is the version of walrelay that program requires, and Revision
// is empty: the VCS stamp is the program's. Values set at link time win.
func Read() Info {
	info := stamped()
	if version != "" {
		info.Version = version
	}
	if revision != "" {
		info.Revision = revision
	}
	return info
}

// stamped is what the Go toolchain recorded in the binary.
func stamped() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if bi.Main.Path != ModulePath {
		for _, d := range bi.Deps {
			if d.Path == ModulePath {
				info.Version = d.Version
			}
		}
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `walrelay version` prints, e.g.
// "walrelay v0.4.0 (revision 1a2b3c4d5e6f, modified) go1.26.0".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("walrelay " + i.Version)
	if i.Revision != "" {
		b.WriteString(" (revision " + i.Revision)
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.GoVersion)
	return b.String()
}
