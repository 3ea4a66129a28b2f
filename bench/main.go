// Command bench is walrelay's end-to-end benchmark harness. It starts a throwaway
// PostgreSQL cluster and a Kafka-protocol broker (kfake, in a process of its own),
// builds the walrelay binary once and runs it as a subprocess, so that the CPU and
// memory it reports are the relay's alone. Everything runs on this machine over
// loopback, so figures are comparable between runs here, not across machines.
//
// Scenarios:
//  1. Backlog drain: rows written while the relay is stopped, then drained; events/s,
//     relay CPU per event, peak RSS, the WAL the relay causes against the inserts';
//     every record is read back and counted.
//  2. Decode limit: the same rows drained by pg_recvlogical (pgoutput, protocol 1,
//     the relay's publication) from a second slot, and by a peer relay (-peer-cmd)
//     from a third; the relay's rate and PostgreSQL CPU as ratios of pg_recvlogical's.
//     Scenarios 1 and 2 run as pairs, -repeats times.
//  3. Latency: first -idle with no writes (the relay's CPU per second and RSS while it
//     stands by, with /readyz and the slot's lag checked after), then -console-rounds
//     pairs of -console-idle steps without and with a console polling /overview (what
//     an open console costs an idle relay), then fixed-rate
//     single-event transactions; commit-to-consume and
//     created-to-hand-over, exact, overall and per second of the load, and the relay's
//     commit-to-ack histogram, and whether slot lag grew.
//  4. Modes: a smaller backlog per -modes entry (--mode and --on-publish), with its WAL.
//  5. pgoutput: pg_recvlogical per set of pgoutput options (binary, protocol 2).
//  6. Databases: one relay process with a databases list of 1, 4 and 8 databases,
//     each -idle with no writes; the relay's CPU per second and what each database
//     past the first adds.
//  7. Converters: a backlog per value converter (string, avro) and payload (as text,
//     expanded JSON) drained by the relay and by pg_recvlogical, with the tests'
//     schema registry served by the harness (converters.go).
//
// The drain and latency runs use the relay binary's default --on-publish unless
// -on-publish says otherwise, and the tables start with the goals side by side.
//
// The harness is a module of its own (bench/, beside the product's module, which it
// reaches through a replace), so that nothing of it is built into the product.
//
// Usage: go -C bench run . [-quick] [-out bench-results.json] [-md FILE], from the
// repository's root (relative paths are then bench/'s), or go run . in bench/.
// Progress goes to stderr, the markdown tables to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// options are the harness's flags.
type options struct {
	events          int
	repeats         int
	modeEvents      int
	pgoutputEvents  int
	converterEvents int
	rates           []int
	rateDuration    time.Duration
	idle            time.Duration // the latency scenario's step with no writes, before the rates
	consoleIdle     time.Duration // after it, each step without and with a console open
	consoleRounds   int
	workers         int
	partitions      int
	brokerDelay     time.Duration
	aggregates      int
	payloadBytes    int
	drainTimeout    time.Duration
	removalWait     time.Duration
	scenarios       []string
	walrelay        string
	out             string
	markdown        string
	quick           bool
	keep            bool
	onPublish       string // the drain and latency runs' --on-publish; "" the binary's default
	modes           []modeSpec
	relayArgs       []string // more `walrelay run` flags, for every relay
	peerCmd         string   // a peer relay for the drain (peer.go)
	relayTrace      string   // directory for runtime traces of the latency steps' first seconds
	relayProfile    string   // directory for CPU profiles of the drains' first seconds
}

func parseFlags() (options, error) {
	var o options
	var err error
	var rates, scenarios string
	flag.IntVar(&o.events, "events", 1_000_000, "backlog rows for the drain scenarios (1 and 2)")
	flag.IntVar(&o.repeats, "repeats", defaultRepeats, "rounds of walrelay + pg_recvlogical drains (even: each goes first as often)")
	flag.IntVar(&o.modeEvents, "mode-events", 200_000, "backlog rows per --mode/--on-publish run (scenario 4)")
	flag.IntVar(&o.pgoutputEvents, "pgoutput-events", 500_000, "backlog rows per round of the pgoutput scenario (pg_recvlogical per pgoutput option set)")
	flag.IntVar(&o.converterEvents, "converter-events", 200_000, "backlog rows per value converter and payload (scenario 7), each beside pg_recvlogical")
	flag.StringVar(&rates, "rates", defaultRates, "load generator rates, events/s (scenario 3)")
	flag.DurationVar(&o.rateDuration, "rate-duration", 20*time.Second, "how long each rate runs")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "how long the relay stands by with no writes before the rates (scenario 3; 0 skips the step)")
	flag.DurationVar(&o.consoleIdle, "console-idle", 100*time.Second, "after the idle step, each step with no writes without a console and with one polling GET /overview every 2s (scenario 3; 0 skips them)")
	flag.IntVar(&o.consoleRounds, "console-rounds", 2, "rounds of -console-idle steps, one without and one with the console each, the order alternating")
	flag.IntVar(&o.workers, "workers", 8, "load generator connections")
	flag.IntVar(&o.partitions, "partitions", 4, "partitions per topic")
	flag.DurationVar(&o.brokerDelay, "broker-delay", 0, "kfake holds each produce request this long, one at a time: a broker that lags, so that the in-flight window stays full (0: none)")
	flag.IntVar(&o.aggregates, "aggregates", 10_000, "distinct aggregate ids (record keys)")
	flag.IntVar(&o.payloadBytes, "payload-bytes", 200, "approximate JSON payload size")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", 15*time.Minute, "give up on one drain after this long")
	flag.DurationVar(&o.removalWait, "removal-wait", 30*time.Second, "after a drain, how long to wait for a mode that removes published rows to empty the table")
	flag.StringVar(&scenarios, "scenarios", "drain,latency,modes,pgoutput,databases,converters", "which scenarios to run (comma-separated)")
	flag.StringVar(&o.walrelay, "walrelay", "", "use this walrelay binary instead of building ./cmd/walrelay")
	flag.StringVar(&o.out, "out", "bench-results.json", "JSON results file")
	flag.StringVar(&o.markdown, "md", "", "also write the markdown tables to this file")
	flag.BoolVar(&o.quick, "quick", false, "small sizes (about 2 minutes): 100,000 rows, 1 round, 20,000 per mode, 1,000 and 5,000/s for 5s, 10s idle and console steps")
	flag.StringVar(&o.onPublish, "on-publish", "", "--on-publish of the drain and latency runs (scenarios 1-3); empty: the relay's default")
	var modes string
	flag.StringVar(&modes, "modes", "mark,delete,none,progress,poll:mark,poll:delete",
		"scenario 4's runs: --on-publish values for --mode stream, poll:VALUE for --mode poll; the relay's default is added if missing, and values the binary refuses are skipped")
	var relayArgs string
	flag.StringVar(&relayArgs, "relay-args", "", "more `walrelay run` flags for every relay, space-separated (e.g. \"--kafka-compression lz4\")")
	flag.StringVar(&o.peerCmd, "peer-cmd", "", "a peer relay to drain the same backlog in each round (sh -c; PEER_* variables, see bench/peer.go)")
	flag.StringVar(&o.relayTrace, "relay-trace", "", "write a Go runtime trace of the relay's first 5s of each latency step to this directory (turns on --pprof)")
	flag.StringVar(&o.relayProfile, "relay-profile", "", "write CPU profiles of the relay to this directory: the first 3s of each backlog drain, the idle step, the first 10s of each rate without -relay-trace (turns on --pprof)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (binaries, relay logs)")
	flag.Parse()
	o.relayArgs = strings.Fields(relayArgs)
	if (o.relayTrace != "" || o.relayProfile != "") && !slices.Contains(o.relayArgs, "--pprof") {
		o.relayArgs = append(o.relayArgs, "--pprof")
	}

	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]func(){
			"events":           func() { o.events = 100_000 },
			"repeats":          func() { o.repeats = 1 },
			"mode-events":      func() { o.modeEvents = 20_000 },
			"pgoutput-events":  func() { o.pgoutputEvents = 50_000 },
			"converter-events": func() { o.converterEvents = 20_000 },
			"rates":            func() { rates = "1000,5000" },
			"rate-duration":    func() { o.rateDuration = 5 * time.Second },
			"idle":             func() { o.idle = 10 * time.Second },
			"console-idle":     func() { o.consoleIdle = 10 * time.Second },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	for _, s := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("-rates: want positive whole numbers, got %q", s)
		}
		o.rates = append(o.rates, n)
	}
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains([]string{"drain", "latency", "modes", "pgoutput", "databases", "converters"}, s) {
			return o, fmt.Errorf("-scenarios: %q is not drain, latency, modes, pgoutput, databases or converters", s)
		}
		o.scenarios = append(o.scenarios, s)
	}
	if o.modes, err = parseModes(modes); err != nil {
		return o, err
	}
	switch {
	case o.events < 1 || o.repeats < 1 || o.modeEvents < 1 || o.pgoutputEvents < 1 || o.converterEvents < 1:
		return o, errors.New("-events, -repeats, -mode-events, -pgoutput-events and -converter-events must be positive")
	case o.workers < 1 || o.partitions < 1 || o.aggregates < 1:
		return o, errors.New("-workers, -partitions and -aggregates must be positive")
	case o.payloadBytes < 40:
		return o, errors.New("-payload-bytes must be at least 40")
	case o.idle < 0 || o.consoleIdle < 0 || o.brokerDelay < 0:
		return o, errors.New("-idle, -console-idle and -broker-delay must not be negative")
	case o.consoleRounds < 1:
		return o, errors.New("-console-rounds must be positive")
	case o.rateDuration <= 0 || o.drainTimeout <= 0:
		return o, errors.New("-rate-duration and -drain-timeout must be positive")
	}
	return o, nil
}

// defaultRepeats is -repeats' default: even, so that the relay and pg_recvlogical
// each drain first in half of the rounds.
const defaultRepeats = 4

// defaultRates is -rates' default: the loads of the "By load" table.
const defaultRates = "100,1000,5000,20000"

func main() {
	opts, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		progress("interrupted: stopping the relay, the broker and PostgreSQL (again to kill at once)")
		cancel()
		<-sig
		killAll(0)
		os.Exit(130)
	}()
	err = run(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options) (err error) {
	res := &results{Started: time.Now(), Settings: settingsInfo{
		Quick: opts.quick, Events: opts.events, Repeats: opts.repeats, ModeEvents: opts.modeEvents, PgoutputEvents: opts.pgoutputEvents, ConverterEvents: opts.converterEvents,
		Rates: opts.rates, RateSeconds: opts.rateDuration.Seconds(), Workers: opts.workers,
		Partitions: opts.partitions, BrokerDelayMS: float64(opts.brokerDelay) / float64(time.Millisecond),
		Aggregates: opts.aggregates, PayloadBytes: opts.payloadBytes,
		RowsPerTx: rowsPerTx, PostgreSQL: map[string]string{
			"fsync": "off", "full_page_writes": "off", "synchronous_commit": "on", "wal_level": "logical",
			"shared_buffers": "128MB", "max_wal_size": pgSettings["max_wal_size"], "autovacuum": "on",
		},
	}}
	before := readMachineCPU()
	loadAvg, _ := os.ReadFile("/proc/loadavg")
	time.Sleep(2 * time.Second)
	busyBefore := before.busySince()
	e, err := setup(ctx, opts)
	defer e.close()
	res.Machine = machine(e.pgVer)
	res.Settings.Relay = strings.TrimSpace("walrelay run defaults (--mode stream, --on-publish " + e.resolve("") +
		"); drain and latency runs: --on-publish " + e.resolve(opts.onPublish) + " " + strings.Join(opts.relayArgs, " "))
	res.Machine.BusyBefore = busyBefore
	if f := strings.Fields(string(loadAvg)); len(f) >= 3 {
		res.Machine.LoadAvg = strings.Join(f[:3], " ")
	}
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil) // after the results are written, before close stops the broker
	if err == nil {
		go e.watchBroker(ctx, stopRun)
	}
	// Whatever happens, write what was measured.
	defer func() {
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = errors.Join(cause, err)
		}
		res.DurationSeconds = time.Since(res.Started).Seconds()
		res.Complete = err == nil
		if err != nil {
			res.Error = err.Error()
		}
		writeMarkdown(os.Stdout, res)
		if opts.markdown != "" {
			if werr := writeMarkdownFile(opts.markdown, res); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		if werr := writeJSON(opts.out, res); werr != nil {
			err = errors.Join(err, werr)
		} else {
			progress("wrote %s (%s in all)", opts.out, time.Since(res.Started).Round(time.Second))
		}
	}()
	if err != nil {
		return err
	}

	want := func(s string) bool { return slices.Contains(opts.scenarios, s) }
	if want("drain") || want("latency") {
		url, err := e.createDatabase(ctx, mainDB)
		if err != nil {
			return err
		}
		mainRun := relayRun{dbURL: url, mode: "stream", onPublish: opts.onPublish}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		seq := 0
		if want("drain") {
			if res.Drain, err = e.runDrain(ctx, conn, mainRun, &seq); err != nil {
				return fmt.Errorf("backlog drain: %w", err)
			}
		}
		if want("latency") {
			latencyRun := mainRun
			latencyRun.slot, latencyRun.topicTemplate = "bench_latency", "bench.prime.{aggregate_type}"
			if err := clearOutbox(ctx, conn); err != nil {
				return err
			}
			progress("[latency] creating slot %s: walrelay runs until it streams, then stops gracefully", latencyRun.slot)
			if err := e.primeSlot(ctx, latencyRun); err != nil {
				return err
			}
			// The drains left their rows' dead versions (marks, deletes) for autovacuum,
			// which would otherwise land in the load steps.
			if err := quiesce(ctx, conn); err != nil {
				return err
			}
			progress("[latency] rates %v events/s, %s each, %d connections", opts.rates, opts.rateDuration, opts.workers)
			res.Latency, res.Idle, err = e.runLatency(ctx, latencyRun)
			for _, l := range res.Latency {
				if l.Held {
					res.HighestRateHeld = max(res.HighestRateHeld, l.TargetRate)
				}
			}
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
			// Like the drain's slots: left behind, it would keep its WAL and hold back
			// catalog vacuum through the modes scenario.
			if err := dropSlot(ctx, conn, latencyRun.slot); err != nil {
				return err
			}
		}
		// WAL is the cluster's: an autovacuum of these rows during the next scenarios
		// would count as their relays' WAL.
		if err := quiesce(ctx, conn); err != nil {
			return err
		}
	}
	if want("modes") {
		if res.Modes, err = e.runModes(ctx); err != nil {
			return fmt.Errorf("modes: %w", err)
		}
	}
	if want("pgoutput") {
		if res.Pgoutput, err = e.runPgoutput(ctx); err != nil {
			return fmt.Errorf("pgoutput: %w", err)
		}
	}
	if want("converters") {
		if res.Converters, err = e.runConverters(ctx); err != nil {
			return fmt.Errorf("converters: %w", err)
		}
	}
	if want("databases") && opts.idle > 0 {
		progress("[databases] one process streaming %v databases in turn, -idle %s each with no writes", idleDatabaseCounts, opts.idle)
		if res.Databases, err = e.runDatabases(ctx, opts.idle); err != nil {
			return fmt.Errorf("databases: %w", err)
		}
	}
	return nil
}
