package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// mainDB holds scenarios 1 to 3. Each round and the latency scenario get a relay
// slot of their own, primed just before their rows are written: a slot used before
// would make its next walsender decode again from an old restart_lsn, through the
// previous round's WAL, which pg_recvlogical's fresh slot never reads.
const (
	mainDB   = "bench"
	recvSlot = "bench_recv"
)

// dropSlot drops a replication slot if it exists, waiting up to 30s for the
// walsender of a client that just stopped to release it, and releases the outbox
// tables the slot's relay claimed, so that the next scenario's slot may stream them.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	if err := dropReplicationSlot(ctx, conn, slot); err != nil {
		return err
	}
	var claims bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('walrelay_table_slots') IS NOT NULL").Scan(&claims); err != nil {
		return fmt.Errorf("release the tables of slot %s: %w", slot, err)
	}
	if claims {
		if _, err := conn.Exec(ctx, "DELETE FROM walrelay_table_slots WHERE slot_name = $1", slot); err != nil {
			return fmt.Errorf("release the tables of slot %s: %w", slot, err)
		}
	}
	return nil
}

func dropReplicationSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	for deadline := time.Now().Add(30 * time.Second); ; {
		var active bool
		err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("drop slot %s: %w", slot, err)
		}
		if !active || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot); err != nil {
		return fmt.Errorf("drop slot %s: %w", slot, err)
	}
	return nil
}

// drainPair is one round of the backlog scenario: the relay and pg_recvlogical
// draining the same rows.
type drainPair struct {
	Round int         `json:"round"`
	Relay drainResult `json:"walrelay"`
	Recv  recvResult  `json:"pg_recvlogical"`
	Peer  *peerResult `json:"peer,omitempty"`
	Ratio float64     `json:"ratio"` // relay events/s over pg_recvlogical's
	// SlotLeadBytes is the WAL between the relay's slot's confirmed position and
	// the backlog's start: what its walsender decodes before the rows and
	// pg_recvlogical's, whose slot is created just before them, does not.
	SlotLeadBytes int64 `json:"relay_slot_lead_bytes"`
}

// summary is min, median and max over the rounds.
type summary struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func summarize(values []float64) summary {
	if len(values) == 0 {
		return summary{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{Min: s[0], Median: med, Max: s[len(s)-1]}
}

// drainScenario is scenarios 1 and 2.
type drainScenario struct {
	Events        int         `json:"events"`
	Rounds        []drainPair `json:"rounds"`
	RelayRate     summary     `json:"walrelay_events_per_sec"`
	RecvRate      summary     `json:"pg_recvlogical_events_per_sec"`
	Ratio         summary     `json:"ratio"`
	CPUMicros     summary     `json:"relay_cpu_us_per_event"`
	PeakRSSBytes  int64       `json:"relay_peak_rss_bytes_max"`
	WalsenderCPU  summary     `json:"relay_walsender_cpu_us_per_event"`
	RecvWalsender summary     `json:"recvlogical_walsender_cpu_us_per_event"`
	MachineBusy   summary     `json:"machine_busy_fraction_relay_drain"`
	PostgresCPU   summary     `json:"postgres_cpu_us_per_event_relay_drain"`
	RecvPostgres  summary     `json:"postgres_cpu_us_per_event_recvlogical_drain"`
	BrokerCPU     summary     `json:"broker_cpu_us_per_event"`
	OtherCPU      summary     `json:"other_cpu_seconds_relay_drain"`
	// RelayWALShare is the relay's WAL over the inserts' (walAccount.RelayShare).
	RelayWALShare summary `json:"relay_wal_share_of_insert_wal"`
	// PostgresCPURatio is PostgreSQL's CPU per event in the relay drain over the
	// pg_recvlogical drain's, per round.
	PostgresCPURatio summary `json:"postgres_cpu_ratio_to_recvlogical"`
	// The peer relay's (-peer-cmd), when one was given.
	PeerRate        *summary `json:"peer_events_per_sec,omitempty"`
	PeerRatio       *summary `json:"peer_ratio,omitempty"`
	PeerCPU         *summary `json:"peer_cpu_us_per_event,omitempty"`
	PeerPostgresCPU *summary `json:"postgres_cpu_us_per_event_peer_drain,omitempty"`
}

// runDrain writes the backlog with the relay stopped, drains it with the relay and,
// from a second slot created just before the rows, with pg_recvlogical, taking turns
// at going first: -repeats rounds.
func (e *env) runDrain(ctx context.Context, conn *pgx.Conn, run relayRun, seq *int) (*drainScenario, error) {
	n := e.opts.events
	sc := &drainScenario{Events: n}
	defer func() { _ = dropSlot(context.Background(), conn, recvSlot) }()
	for round := 1; round <= e.opts.repeats; round++ {
		r := run
		r.slot = fmt.Sprintf("bench_drain%d", round)
		r.topicTemplate = "bench.prime.{aggregate_type}"
		if err := clearOutbox(ctx, conn); err != nil {
			return sc, err
		}
		progress("[drain %d/%d] creating slot %s: walrelay runs until it streams, then stops gracefully", round, e.opts.repeats, r.slot)
		if err := e.primeSlot(ctx, r); err != nil {
			return sc, err
		}
		progress("[drain %d/%d] writing %d rows (%d per transaction) with the relay stopped", round, e.opts.repeats, n, rowsPerTx)
		if err := recreateSlot(ctx, conn, recvSlot); err != nil {
			return sc, err
		}
		if e.opts.peerCmd != "" {
			if err := recreateSlot(ctx, conn, peerSlot); err != nil {
				return sc, err
			}
		}
		wal0, err := walPosition(ctx, conn)
		if err != nil {
			return sc, err
		}
		slotAt, err := slotConfirmed(ctx, conn, r.slot)
		if err != nil {
			return sc, err
		}
		if err := e.insertBacklog(ctx, conn, n, *seq); err != nil {
			return sc, err
		}
		*seq += n
		endLSN, lastTxLSN, err := currentLSN(ctx, conn)
		if err != nil {
			return sc, err
		}
		// A sentinel transaction after the backlog: pg_recvlogical stops at the first
		// message past --endpos, so it ends on the sentinel instead of decoding on
		// through the relay's later writes until a keepalive. The relay publishes it.
		if err := e.insertBacklog(ctx, conn, 1, *seq); err != nil {
			return sc, err
		}
		*seq++
		wal1, err := walPosition(ctx, conn)
		if err != nil {
			return sc, err
		}
		// Both drains must decode the same WAL: a relay's slot that starts well before
		// the backlog measures its walsender's extra decoding, not the relay.
		lead := wal0 - slotAt
		if lead > (wal1-wal0)/20 {
			return sc, fmt.Errorf("slot %s starts %s before the backlog, more than 5%% of the backlog's %s of WAL: the drains would not decode the same WAL",
				r.slot, bytesIEC(lead), bytesIEC(wal1-wal0))
		}
		if err := quiesce(ctx, conn); err != nil {
			return sc, err
		}
		// Old rows' removal is waited for in the first round only: it can take the
		// whole -removal-wait.
		plan := walPlan{lastTxLSN: lastTxLSN, insertBytes: wal1 - wal0, removal: round == 1 && removes(e.resolve(r.onPublish), e.opts.relayArgs)}

		topic := fmt.Sprintf("bench.drain%d.order", round)
		r.topicTemplate = fmt.Sprintf("bench.drain%d.{aggregate_type}", round)
		var rel drainResult
		var rec recvResult
		relayDrain := func() error {
			progress("[drain %d/%d] walrelay draining %d events", round, e.opts.repeats, n+1)
			var err error
			if rel, err = e.drainRelay(ctx, conn, r, n+1, fmt.Sprintf("drain%d", round), plan); err != nil {
				return err
			}
			progress("[drain %d/%d] walrelay: %s in %.2fs, %.1f µs CPU/event, peak RSS %s",
				round, e.opts.repeats, rate(n+1, secs(rel.Seconds)), rel.Seconds, rel.CPUMicrosPerEvent, bytesIEC(rel.PeakRSSBytes))
			if err := dropSlot(ctx, conn, r.slot); err != nil {
				return err
			}
			return quiesce(ctx, conn)
		}
		recvDrain := func() error {
			progress("[drain %d/%d] pg_recvlogical draining the same rows (slot %s, --endpos %s)", round, e.opts.repeats, recvSlot, endLSN)
			var err error
			if rec, err = e.drainRecvlogical(ctx, conn, mainDB, recvSlot, endLSN, n, recvProto1); err != nil {
				return err
			}
			return quiesce(ctx, conn)
		}
		// The two drains take turns going first, so that neither is always the one
		// right after the inserts.
		first, second := relayDrain, recvDrain
		if round%2 == 0 {
			first, second = recvDrain, relayDrain
		}
		if err := first(); err != nil {
			return sc, err
		}
		if err := second(); err != nil {
			return sc, err
		}
		pair := drainPair{Round: round, Relay: rel, Recv: rec, Ratio: rel.EventsPerSec / rec.EventsPerSec, SlotLeadBytes: lead}
		progress("[drain %d/%d] pg_recvlogical: %s in %.2fs; walrelay/pg_recvlogical = %.2f",
			round, e.opts.repeats, rate(n, secs(rec.Seconds)), rec.Seconds, pair.Ratio)

		if e.opts.peerCmd != "" {
			peerTopic := fmt.Sprintf("bench.peer%d.order", round)
			progress("[drain %d/%d] the peer (-peer-cmd) draining the same rows (slot %s, topic %s)", round, e.opts.repeats, peerSlot, peerTopic)
			peer, err := e.drainPeer(ctx, conn, run.dbURL, peerTopic, n+1)
			if err != nil {
				return sc, err
			}
			progress("[drain %d/%d] peer: %s in %.2fs", round, e.opts.repeats, rate(n+1, secs(peer.Seconds)), peer.Seconds)
			pair.Peer = &peer
			if err := dropSlot(ctx, conn, peerSlot); err != nil {
				return sc, err
			}
			if err := e.deleteTopic(ctx, peerTopic); err != nil {
				progress("  %v", err)
			}
		}
		progress("[drain %d/%d] reading back %s", round, e.opts.repeats, topic)
		records, distinct, err := e.readBack(ctx, topic, n+1)
		if err != nil {
			return sc, err
		}
		pair.Relay.ReadBack, pair.Relay.Distinct = records, distinct
		if err := checkReadBack(topic, n+1, records, distinct); err != nil {
			return sc, err
		}
		progress("[drain %d/%d] read back %d records, %d distinct events", round, e.opts.repeats, records, distinct)
		if err := e.deleteTopic(ctx, topic); err != nil {
			progress("  %v", err)
		}
		sc.Rounds = append(sc.Rounds, pair)
	}
	var relayRates, recvRates, ratios, cpu, ws, rws, busy, pg, rpg, broker, other, walShare, pgRatio []float64
	for _, p := range sc.Rounds {
		relayRates = append(relayRates, p.Relay.EventsPerSec)
		recvRates = append(recvRates, p.Recv.EventsPerSec)
		ratios = append(ratios, p.Ratio)
		cpu = append(cpu, p.Relay.CPUMicrosPerEvent)
		ws = append(ws, p.Relay.WalsenderCPUSec/float64(p.Relay.Events)*1e6)
		rws = append(rws, p.Recv.WalsenderCPUSec/float64(p.Recv.Events)*1e6)
		busy = append(busy, p.Relay.MachineBusy)
		pg = append(pg, p.Relay.PostgresCPUSec/float64(p.Relay.Events)*1e6)
		rpg = append(rpg, p.Recv.PostgresCPUSec/float64(p.Recv.Events)*1e6)
		broker = append(broker, p.Relay.BrokerCPUSeconds/float64(p.Relay.Events)*1e6)
		other = append(other, p.Relay.OtherCPUSec)
		walShare = append(walShare, p.Relay.WAL.RelayShare())
		if p.Recv.PostgresCPUSec > 0 {
			pgRatio = append(pgRatio, (p.Relay.PostgresCPUSec/float64(p.Relay.Events))/(p.Recv.PostgresCPUSec/float64(p.Recv.Events)))
		}
		sc.PeakRSSBytes = max(sc.PeakRSSBytes, p.Relay.PeakRSSBytes)
	}
	sc.RelayRate, sc.RecvRate, sc.Ratio, sc.CPUMicros = summarize(relayRates), summarize(recvRates), summarize(ratios), summarize(cpu)
	sc.WalsenderCPU, sc.RecvWalsender, sc.MachineBusy = summarize(ws), summarize(rws), summarize(busy)
	sc.PostgresCPU, sc.RecvPostgres, sc.BrokerCPU, sc.OtherCPU = summarize(pg), summarize(rpg), summarize(broker), summarize(other)
	sc.RelayWALShare, sc.PostgresCPURatio = summarize(walShare), summarize(pgRatio)
	var peerRates, peerRatios, peerCPU, peerPG []float64
	for _, p := range sc.Rounds {
		if p.Peer != nil {
			peerRates = append(peerRates, p.Peer.EventsPerSec)
			peerRatios = append(peerRatios, p.Peer.EventsPerSec/p.Recv.EventsPerSec)
			peerCPU = append(peerCPU, p.Peer.CPUSeconds/float64(p.Peer.Events)*1e6)
			peerPG = append(peerPG, p.Peer.PostgresCPUSec/float64(p.Peer.Events)*1e6)
		}
	}
	if len(peerRates) > 0 {
		r, ra, c, pg := summarize(peerRates), summarize(peerRatios), summarize(peerCPU), summarize(peerPG)
		sc.PeerRate, sc.PeerRatio, sc.PeerCPU, sc.PeerPostgresCPU = &r, &ra, &c, &pg
	}
	return sc, nil
}

// modeSpec is one run of scenario 4: a --mode and an --on-publish.
type modeSpec struct {
	Mode      string `json:"mode"`
	OnPublish string `json:"on_publish"`
}

// parseModes reads -modes: on-publish values for --mode stream, poll:VALUE for --mode
// poll.
func parseModes(list string) ([]modeSpec, error) {
	var out []modeSpec
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		spec := modeSpec{Mode: "stream", OnPublish: item}
		if mode, onPublish, ok := strings.Cut(item, ":"); ok {
			spec = modeSpec{Mode: mode, OnPublish: onPublish}
		}
		if spec.Mode != "stream" && spec.Mode != "poll" || spec.OnPublish == "" {
			return nil, fmt.Errorf("-modes: %q is neither an --on-publish value (stream mode) nor poll:VALUE", item)
		}
		if !slices.Contains(out, spec) {
			out = append(out, spec)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-modes: empty list")
	}
	return out, nil
}

// modeResult is scenario 4: one mode and on-publish setting draining a backlog.
type modeResult struct {
	Mode      string `json:"mode"`
	OnPublish string `json:"on_publish"`
	Default   bool   `json:"relay_default,omitempty"` // the binary's default --on-publish
	// Skipped says why the binary refused these settings; nothing was measured.
	Skipped string `json:"skipped,omitempty"`
	drainResult
}

// runModes drains a smaller backlog once per -modes entry, and for the binary's
// default --on-publish if the list lacks it, each in a database of its own (poll
// mode publishes every pending row it finds). Settings the binary refuses are
// reported as skipped: the harness measures older and newer builds too.
func (e *env) runModes(ctx context.Context) ([]modeResult, error) {
	var out []modeResult
	n := e.opts.modeEvents
	specs := slices.Clone(e.opts.modes)
	// The default run: by name when the binary's help names it, otherwise without
	// the flag (OnPublish "").
	if def := (modeSpec{Mode: "stream", OnPublish: e.onPublishDefault}); !slices.Contains(specs, def) {
		specs = append([]modeSpec{def}, specs...)
	}
	for _, v := range specs {
		name := e.resolve(v.OnPublish)
		label := v.Mode + "-" + name
		res := modeResult{Mode: v.Mode, OnPublish: name, Default: v.Mode == "stream" && v.OnPublish == e.onPublishDefault}
		// A named value may be one the binary does not know; its default it knows.
		if v.OnPublish != "" {
			if ok, why := relayAccepts(ctx, e.walrelay, v.Mode, v.OnPublish, e.opts.relayArgs); !ok {
				progress("[modes] --mode %s --on-publish %s: skipped, the relay refuses it: %s", v.Mode, v.OnPublish, why)
				res.Skipped = why
				out = append(out, res)
				continue
			}
		}
		db := "bench_" + v.Mode + "_" + strings.ReplaceAll(name, "-", "_")
		progress("[modes] --mode %s --on-publish %s: %d events", v.Mode, name, n)
		d, err := e.runMode(ctx, db, label, relayRun{slot: db, mode: v.Mode, onPublish: v.OnPublish,
			topicTemplate: "bench." + db + ".{aggregate_type}"}, n)
		if err != nil {
			return out, fmt.Errorf("%s: %w", label, err)
		}
		progress("[modes] %s: %s in %.2fs, %.1f µs CPU/event, peak RSS %s, read back %d",
			label, rate(n, secs(d.Seconds)), d.Seconds, d.CPUMicrosPerEvent, bytesIEC(d.PeakRSSBytes), d.Distinct)
		res.drainResult = d
		out = append(out, res)
	}
	return out, nil
}

func (e *env) runMode(ctx context.Context, db, label string, run relayRun, n int) (drainResult, error) {
	url, err := e.createDatabase(ctx, db)
	if err != nil {
		return drainResult{}, err
	}
	defer func() {
		if err := e.dropDatabase(context.Background(), db); err != nil {
			progress("  %v", err)
		}
	}()
	run.dbURL = url
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return drainResult{}, err
	}
	defer conn.Close(context.Background())
	if run.mode == "stream" {
		if err := e.primeSlot(ctx, run); err != nil {
			return drainResult{}, err
		}
	}
	// The last row in a transaction of its own, so that the slot confirming past the
	// position before it means the whole backlog was published.
	wal0, err := walPosition(ctx, conn)
	if err != nil {
		return drainResult{}, err
	}
	if err := e.insertBacklog(ctx, conn, n-1, 0); err != nil {
		return drainResult{}, err
	}
	lastTx, err := walPosition(ctx, conn)
	if err != nil {
		return drainResult{}, err
	}
	if err := e.insertBacklog(ctx, conn, 1, n-1); err != nil {
		return drainResult{}, err
	}
	wal1, err := walPosition(ctx, conn)
	if err != nil {
		return drainResult{}, err
	}
	if err := quiesce(ctx, conn); err != nil {
		return drainResult{}, err
	}
	plan := walPlan{lastTxLSN: lastTx, insertBytes: wal1 - wal0, removal: removes(e.resolve(run.onPublish), e.opts.relayArgs)}
	res, err := e.drainRelay(ctx, conn, run, n, label, plan)
	if err != nil {
		return res, err
	}
	topic := "bench." + db + ".order"
	res.ReadBack, res.Distinct, err = e.readBack(ctx, topic, n)
	if err != nil {
		return res, err
	}
	if err := checkReadBack(topic, n, res.ReadBack, res.Distinct); err != nil {
		return res, err
	}
	if err := e.deleteTopic(ctx, topic); err != nil {
		progress("  %v", err)
	}
	return res, nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
