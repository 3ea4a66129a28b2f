#!/usr/bin/env bash
# Builds walrelay's container image without a registry: a static binary (CGO_ENABLED=0)
# on an empty base (FROM scratch, deploy/image/Containerfile), with Debian's CA bundle
# and a non-root user, labelled with the version and revision the binary reports.
#
#   scripts/image.sh                      # walrelay:dev
#   IMAGE=walrelay:v0.5.0 VERSION=v0.5.0 scripts/image.sh
#
# Builds with buildah, or podman when only podman is there; installs Debian's buildah
# and ca-certificates when neither is. Nothing is pulled and nothing runs inside the
# image while it is built, so this works where containers cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${IMAGE:-walrelay:dev}"
REVISION="${REVISION:-$(git rev-parse HEAD)}"
VERSION="${VERSION:-$(scripts/version.sh)}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

missing=""
command -v buildah >/dev/null 2>&1 || command -v podman >/dev/null 2>&1 || missing="buildah"
test -s "$CA_BUNDLE" || missing="$missing ca-certificates"
if [ -n "$missing" ]; then
	echo "installing Debian packages:$missing ..." >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if command -v buildah >/dev/null 2>&1; then
	builder=buildah
else
	builder=podman
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

pkg=github.com/walrelay/walrelay/internal/buildinfo
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X $pkg.version=$VERSION -X $pkg.revision=$REVISION" \
	-o "$ctx/walrelay" ./cmd/walrelay
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
# The distroless convention: uid and gid 65532, "nonroot", so manifests written for the
# Dockerfile's image (runAsUser: 65532) hold for this one too.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/group"

"$builder" build --quiet -f deploy/image/Containerfile \
	--build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
	-t "$IMAGE" "$ctx" >/dev/null
echo "built $IMAGE ($VERSION, revision $REVISION) with $builder" >&2
