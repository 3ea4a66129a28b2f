#!/usr/bin/env bash
# Prints the version a build of this tree reports: the release tag when HEAD has one,
# otherwise a Go pseudo-version of the commit, "+dirty" when tracked files changed.
# Prints nothing outside a git checkout (the binary then says "(devel)").
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse HEAD >/dev/null 2>&1 || exit 0
version="$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null ||
	echo "v0.0.0-$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)-$(git rev-parse --short=12 HEAD)")"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	version="$version+dirty"
fi
echo "$version"
