package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testregistry"
)

// converterRun is one variant of scenario 7: a value converter over a payload kept as
// text or expanded into a struct.
type converterRun struct {
	Label     string   `json:"label"`
	Converter string   `json:"value_converter"`
	Expanded  bool     `json:"expand_json_payload"`
	args      []string // the relay's flags beyond the registry's URL
}

// converterRuns are the variants, the ones without a registry first: string and
// Avro over the payload as text, the JSON converter and Avro over the expanded
// payload (the string converter does not expand).
var converterRuns = []converterRun{
	{Label: "string", Converter: "string"},
	{Label: "avro", Converter: "avro", args: []string{"--value-converter", "avro"}},
	{Label: "json-expanded", Converter: "json", Expanded: true, args: []string{"--value-converter", "json", "--expand-json-payload"}},
	{Label: "avro-expanded", Converter: "avro", Expanded: true, args: []string{"--value-converter", "avro", "--expand-json-payload"}},
}

// converterResult is one variant drained by the relay and, from a second slot over
// the same rows, by pg_recvlogical.
type converterResult struct {
	converterRun
	Relay drainResult `json:"walrelay"`
	Recv  recvResult  `json:"pg_recvlogical"`
	Ratio float64     `json:"ratio"` // relay events/s over pg_recvlogical's
	// RegistryCalls is the requests the registry served during the relay's drain:
	// one registration per subject, then every id comes from the relay's cache.
	RegistryCalls int `json:"registry_calls"`
}

// runConverters drains a backlog of -converter-events rows per variant, each in a
// database of its own, with the tests' schema registry (internal/testregistry)
// served from the harness's process on loopback. pg_recvlogical drains first each
// time, then the relay, so that the variants' ratios compare within the run.
func (e *env) runConverters(ctx context.Context) ([]converterResult, error) {
	reg := testregistry.Start()
	defer reg.Close()
	n := e.opts.converterEvents
	var out []converterResult
	for _, v := range converterRuns {
		res, err := e.runConverter(ctx, reg, v, n)
		if err != nil {
			return out, fmt.Errorf("%s: %w", v.Label, err)
		}
		progress("[converters] %s: %s in %.2fs, %.1f µs CPU/event; pg_recvlogical %s; ratio %.2f; %d registry calls",
			v.Label, rate(n+1, secs(res.Relay.Seconds)), res.Relay.Seconds, res.Relay.CPUMicrosPerEvent,
			rate(n, secs(res.Recv.Seconds)), res.Ratio, res.RegistryCalls)
		out = append(out, res)
	}
	return out, nil
}

func (e *env) runConverter(ctx context.Context, reg *testregistry.Registry, v converterRun, n int) (converterResult, error) {
	res := converterResult{converterRun: v}
	db := "bench_conv_" + strings.ReplaceAll(v.Label, "-", "_")
	url, err := e.createDatabase(ctx, db)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := e.dropDatabase(context.Background(), db); err != nil {
			progress("  %v", err)
		}
	}()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.Background())
	run := relayRun{dbURL: url, slot: db, mode: "stream", onPublish: e.opts.onPublish,
		topicTemplate: "bench.prime.{aggregate_type}", args: v.args}
	if v.Converter == "avro" {
		run.args = append(run.args, "--schema-registry-url", reg.URL())
	}
	progress("[converters] %s: creating slot %s: walrelay runs until it streams, then stops gracefully", v.Label, db)
	if err := e.primeSlot(ctx, run); err != nil {
		return res, err
	}
	slot := db + "_recv"
	if err := recreateSlot(ctx, conn, slot); err != nil {
		return res, err
	}
	progress("[converters] %s: writing %d rows (%d per transaction) with the relay stopped", v.Label, n, rowsPerTx)
	wal0, err := walPosition(ctx, conn)
	if err != nil {
		return res, err
	}
	if err := e.insertBacklog(ctx, conn, n, 0); err != nil {
		return res, err
	}
	endLSN, lastTxLSN, err := currentLSN(ctx, conn)
	if err != nil {
		return res, err
	}
	// The sentinel that ends pg_recvlogical's drain (runDrain says why).
	if err := e.insertBacklog(ctx, conn, 1, n); err != nil {
		return res, err
	}
	wal1, err := walPosition(ctx, conn)
	if err != nil {
		return res, err
	}
	if err := quiesce(ctx, conn); err != nil {
		return res, err
	}
	if res.Recv, err = e.drainRecvlogical(ctx, conn, db, slot, endLSN, n, recvProto1); err != nil {
		return res, err
	}
	if err := dropSlot(ctx, conn, slot); err != nil {
		return res, err
	}
	if err := quiesce(ctx, conn); err != nil {
		return res, err
	}
	topic := "bench." + db + ".order"
	run.topicTemplate = "bench." + db + ".{aggregate_type}"
	calls0 := registryCalls(reg)
	plan := walPlan{lastTxLSN: lastTxLSN, insertBytes: wal1 - wal0}
	if res.Relay, err = e.drainRelay(ctx, conn, run, n+1, "conv-"+v.Label, plan); err != nil {
		return res, err
	}
	res.RegistryCalls = registryCalls(reg) - calls0
	res.Ratio = res.Relay.EventsPerSec / res.Recv.EventsPerSec
	if res.Relay.ReadBack, res.Relay.Distinct, err = e.readBack(ctx, topic, n+1); err != nil {
		return res, err
	}
	if err := checkReadBack(topic, n+1, res.Relay.ReadBack, res.Relay.Distinct); err != nil {
		return res, err
	}
	if err := e.deleteTopic(ctx, topic); err != nil {
		progress("  %v", err)
	}
	return res, nil
}

// registryCalls is every request the registry has served, by the routes the
// converters use.
func registryCalls(reg *testregistry.Registry) int {
	total := 0
	for _, route := range []string{"POST /subjects/{subject}/versions", "POST /subjects/{subject}",
		"GET /subjects/{subject}/versions/latest", "GET /schemas/ids/{id}"} {
		total += reg.Calls(route)
	}
	return total
}

// writeConverters is scenario 7's table.
func writeConverters(w io.Writer, r *results) {
	if len(r.Converters) == 0 {
		return
	}
	fmt.Fprintf(w, "### Converters: backlog of %s events per value converter, each beside pg_recvlogical\n\n", commas(r.Settings.ConverterEvents))
	fmt.Fprintln(w, "| value converter | payload | events/s | pg_recvlogical events/s | walrelay / pg_recvlogical | relay CPU µs/event | peak RSS | machine busy | registry calls | read back (distinct) |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range r.Converters {
		payload := "as text"
		if c.Expanded {
			payload = "expanded JSON"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2f | %.1f | %s | %.0f%% | %d | %s (%s) |\n", c.Converter, payload,
			commas(int(math.Round(c.Relay.EventsPerSec))), commas(int(math.Round(c.Recv.EventsPerSec))), c.Ratio,
			c.Relay.CPUMicrosPerEvent, bytesIEC(c.Relay.PeakRSSBytes), c.Relay.MachineBusy*100, c.RegistryCalls,
			commas(c.Relay.ReadBack), commas(c.Relay.Distinct))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Avro through the tests' schema registry (internal/testregistry, served by the harness on loopback); "+
		"each relay registers its value schema at its first event and takes the id from its cache after that.")
	fmt.Fprintln(w)
}
