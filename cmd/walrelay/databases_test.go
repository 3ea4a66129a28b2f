package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// takeoverBound is how soon after a leader dies a standby streams its databases:
// the lock is free once the server sees the session close, standbys try every
// second (docs/operations.md, "High availability"), and then the slot is started;
// the rest is room for a machine other tests load.
const takeoverBound = 10 * time.Second

// Two processes run one file listing three databases: the first to start leads all
// three, the second stands by for each. SIGKILLed under load, the leader's
// databases are taken over by the survivor within the takeover bound, every event
// of every database is delivered, and each database's aggregates keep their order.
func TestDatabasesTakenOverAfterSIGKILL(t *testing.T) {
	t.Parallel()
	kafka := testenv.Kafka(t)
	kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.SleepControl(func() { time.Sleep(20 * time.Millisecond) }) // broker latency: acks are in flight at the kill
		return nil, nil, false
	})
	brokers := kafka.ListenAddrs()
	names := []string{"orders", "billing", "shipping"}
	type database struct {
		name, url, slot string
		admin, writer   *pgx.Conn
	}
	dbs := make([]*database, len(names))
	var file strings.Builder
	fmt.Fprintf(&file, "status-interval: 100ms\ndatabases:\n")
	for i, name := range names {
		d := &database{name: name, url: testenv.MigratedDatabase(t), slot: slotName(t, name)}
		d.admin, d.writer = testenv.Connect(t, d.url), testenv.Connect(t, d.url)
		dbs[i] = d
		fmt.Fprintf(&file, "  - name: %s\n    database-url: %s\n    slot: %s\n    topic-template: %s.{aggregate_type}\n", name, d.url, d.slot, name)
	}
	config := writeFile(t, "walrelay.yaml", file.String())
	addrs := []string{testenv.FreeAddr(t), testenv.FreeAddr(t)}
	envOf := func(i int) []string {
		return baseEnv("WALRELAY_KAFKA_BROKERS="+strings.Join(brokers, ","), "WALRELAY_LOG_FORMAT=text",
			"WALRELAY_METRICS_ADDR="+addrs[i], "WALRELAY_CONFIG="+config)
	}

	leader := startProc(t, "relay#1", envOf(0), "run")
	for _, d := range dbs {
		waitStreaming(t, d.admin, d.slot, leader)
	}
	survivor := startProc(t, "relay#2", envOf(1), "run")
	for _, d := range dbs {
		d := d
		testenv.WaitFor(t, 30*time.Second, "relay#2 to stand by for "+d.name, func() bool {
			code, body := fetchHTTP(t, "http://"+addrs[1]+"/readyz?streaming&database="+d.name)
			return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "standby")
		})
		if code, body := fetchHTTP(t, "http://"+addrs[1]+"/readyz?database="+d.name); code != http.StatusOK || !strings.HasPrefix(body, "standby") {
			t.Fatalf("relay#2 standing by for %s: /readyz?database=%s %d %q, want 200 standby", d.name, d.name, code, body)
		}
	}
	if code, body := fetchHTTP(t, "http://"+addrs[1]+"/readyz"); code != http.StatusOK {
		t.Fatalf("relay#2 standing by for every database: /readyz %d %q, want 200", code, body)
	}
	consumer := testenv.NewConsumer(t, brokers, `^(orders|billing|shipping)\..*`)

	// Each database's writer commits sequentially (so its order is commit order),
	// paced so that the relay streams while it writes, and holds its last quarter
	// until the leader is killed.
	const txns, numAggs = 80, 20
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	plans := make([][][]string, len(dbs))
	total := 0
	for i := range plans {
		plans[i] = make([][]string, txns)
		for j := range plans[i] {
			plans[i][j] = make([]string, 1+rng.IntN(20))
			for k := range plans[i][j] {
				plans[i][j][k] = fmt.Sprintf("agg-%02d", rng.IntN(numAggs))
			}
			total += len(plans[i][j])
		}
	}
	t.Logf("seed %d: %d databases, %d events", seed, len(dbs), total)
	killed := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	written := make([][]outbox.Event, len(dbs))
	writeErrs := make([]error, len(dbs))
	for i, d := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(20 * time.Millisecond)
			defer pace.Stop()
			for j, aggs := range plans[i] {
				select {
				case <-pace.C:
				case <-ctx.Done():
					writeErrs[i] = ctx.Err()
					return
				}
				if j == txns*3/4 {
					select {
					case <-killed:
					case <-ctx.Done():
						writeErrs[i] = ctx.Err()
						return
					}
				}
				evs, err := writeTx(ctx, d.writer, j, aggs)
				if err != nil {
					writeErrs[i] = fmt.Errorf("%s, transaction %d: %w", d.name, j, err)
					return
				}
				written[i] = append(written[i], evs...)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the writers' connections close

	if !consumer.WaitDistinct(60*time.Second, total/4) {
		t.Fatalf("consumed %d distinct events before the kill, want %d", consumer.Distinct(), total/4)
	}
	leader.signal(syscall.SIGKILL)
	if code := leader.wait(10 * time.Second); code != -1 {
		t.Fatalf("relay#1 exited with code %d, want death by SIGKILL", code)
	}
	killedAt := time.Now()
	close(killed)
	t.Logf("killed relay#1 with %d events consumed", consumer.Distinct())

	// Every database is taken over, each within the bound.
	for _, d := range dbs {
		if !poll(takeoverBound-time.Since(killedAt), func() bool {
			code, body := fetchHTTP(t, "http://"+addrs[1]+"/readyz?database="+d.name)
			return code == http.StatusOK && strings.HasPrefix(body, "streaming")
		}) {
			_, body := fetchHTTP(t, "http://"+addrs[1]+"/readyz")
			t.Fatalf("relay#2 did not stream %s within %s of the kill; /readyz:\n%s", d.name, takeoverBound, body)
		}
		t.Logf("%s taken over %s after the kill", d.name, time.Since(killedAt).Round(time.Millisecond))
	}

	wg.Wait()
	for _, err := range writeErrs {
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	want := map[string]int{} // event id: its database
	for i := range dbs {
		for _, ev := range written[i] {
			want[ev.ID] = i
		}
	}
	if len(want) != total {
		t.Fatalf("wrote %d events, planned %d", len(want), total)
	}
	if !consumer.WaitFor(90*time.Second, func() bool {
		for id := range want {
			if consumer.Count(id) == 0 {
				return false
			}
		}
		return true
	}) {
		lost := map[string]int{}
		for id, i := range want {
			if consumer.Count(id) == 0 {
				lost[dbs[i].name]++
			}
		}
		t.Fatalf("not every committed event was delivered within 90s; lost per database: %v", lost)
	}

	// Each database's events on its own topics, first deliveries per aggregate in
	// commit order.
	wantOrder, gotOrder := map[string][]string{}, map[string][]string{}
	for i, d := range dbs {
		for _, ev := range written[i] {
			wantOrder[d.name+"/"+ev.AggregateID] = append(wantOrder[d.name+"/"+ev.AggregateID], ev.ID)
		}
	}
	seen := map[string]bool{}
	for _, r := range consumer.Records {
		id := testenv.Header(r, "id")
		i, ok := want[id]
		if !ok {
			t.Errorf("unknown event %q consumed (topic %s)", id, r.Topic)
			continue
		}
		if topic := dbs[i].name + ".order"; r.Topic != topic {
			t.Errorf("event %s of %s on topic %s, want %s", id, dbs[i].name, r.Topic, topic)
		}
		if !seen[id] {
			seen[id] = true
			key := dbs[i].name + "/" + string(r.Key)
			gotOrder[key] = append(gotOrder[key], id)
		}
	}
	for key, ids := range wantOrder {
		if !slices.Equal(gotOrder[key], ids) {
			t.Errorf("%s: first deliveries (%d) differ from commit order (%d events)", key, len(gotOrder[key]), len(ids))
		}
	}

	// The survivor's metrics carry each database's label; status reports each.
	_, metrics := fetchHTTP(t, "http://"+addrs[1]+"/metrics")
	for _, d := range dbs {
		if line := fmt.Sprintf(`walrelay_leader{database="%s"} 1`, d.name); !strings.Contains(metrics, line) {
			t.Errorf("relay#2's /metrics lacks %s", line)
		}
	}
	res := run(t, time.Minute, envOf(1), "status", "--json")
	var rep struct {
		Databases map[string]struct {
			ExitCode   int  `json:"exit_code"`
			SlotActive bool `json:"slot_active"`
		} `json:"databases"`
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s%s", err, res.stdout, res.stderr)
	}
	if res.code != 0 || rep.ExitCode != 0 || len(rep.Databases) != len(dbs) {
		t.Fatalf("status with relay#2 streaming every database: exit %d, want 0 and %d databases\n%s%s", res.code, len(dbs), res.stdout, res.stderr)
	}
	survivor.stop(30 * time.Second)
	// The server lets go of the slot a moment after the process ends: once it has,
	// status says no relay streams it.
	billing := dbs[slices.IndexFunc(dbs, func(d *database) bool { return d.name == "billing" })]
	testenv.WaitFor(t, takeoverBound, "the server to release slot "+billing.slot, func() bool {
		var active bool
		err := billing.admin.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
			billing.slot).Scan(&active)
		return err == nil && !active
	})
	res = run(t, time.Minute, envOf(1), "status", "--database", "billing")
	if res.code != 4 || !strings.Contains(res.stdout, "database billing") || strings.Contains(res.stdout, "database orders") {
		t.Fatalf("status --database billing with no relay: exit %d, want 4 and billing alone\n%s%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("summary: %d events of %d databases, %d records delivered (%d distinct)", total, len(dbs), len(consumer.Records), consumer.Distinct())
}

// fetchHTTP fetches url and returns its status code and body; 0 when it cannot be asked.
func fetchHTTP(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// migrate, dlq and replay take a file's databases list: migrate migrates every entry
// (each through its owner-url when it has one, and each table of its tables list,
// into one publication), dlq and replay the entry --database names, and refuse to
// guess among several.
func TestCommandsTakeADatabasesList(t *testing.T) {
	t.Parallel()
	a, b := testenv.Database(t), testenv.Database(t)
	for _, table := range []string{"ev1", "ev2"} {
		execSQL(t, b, `CREATE TABLE `+table+` (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL,
			aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
	}
	u, err := url.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("nobody-here") // the relay's role, which cannot migrate (it does not exist)
	relayRole := u.String()
	config := writeFile(t, "walrelay.yaml", fmt.Sprintf(`databases:
  - name: a
    database-url: %s
    owner-url: %s
    slot: walrelay_a
  - name: b
    database-url: %s
    slot: walrelay_b
    tables:
      - table: ev1
      - table: ev2
`, relayRole, a, b))
	env := baseEnv("WALRELAY_CONFIG="+config, "WALRELAY_KAFKA_BROKERS="+strings.Join(testenv.Kafka(t).ListenAddrs(), ","))

	res := run(t, time.Minute, env, "migrate")
	if res.code != 0 || !strings.Contains(res.stdout, "database a\n") || !strings.Contains(res.stdout, "database b\n") {
		t.Fatalf("migrate of a databases list: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	conn := testenv.Connect(t, b)
	var published []string
	rows, err := conn.Query(context.Background(), "SELECT tablename FROM pg_publication_tables WHERE pubname = 'walrelay' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		published = append(published, name)
	}
	if !slices.Equal(published, []string{"ev1", "ev2"}) {
		t.Errorf("database b's publication holds %v, want both listed tables", published)
	}
	var outboxA bool
	if err := testenv.Connect(t, a).QueryRow(context.Background(),
		"SELECT to_regclass('public.outbox_events') IS NOT NULL AND to_regclass('public.walrelay_slots') IS NOT NULL").Scan(&outboxA); err != nil || !outboxA {
		t.Errorf("database a was not migrated through its owner-url: %v", err)
	}

	res = run(t, time.Minute, env, "dlq", "list")
	if res.code != 2 || !strings.Contains(res.stderr, "the configuration lists databases a, b: name one with --database") {
		t.Errorf("dlq list without --database: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, time.Minute, env, "dlq", "list", "--database", "b")
	if res.code != 0 || !strings.Contains(res.stdout, "0 dead letter(s)") {
		t.Errorf("dlq list --database b: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	execSQL(t, b, `INSERT INTO ev2 (aggregate_type, aggregate_id, event_type, payload) SELECT 'order', g::text, 'placed', '{}'
		FROM generate_series(1, 3) g`)
	res = run(t, time.Minute, env, "replay", "--database", "b", "--dry-run")
	if res.code != 0 || !strings.Contains(res.stdout, "would replay 3 event(s)") {
		t.Errorf("replay --database b --dry-run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, time.Minute, env, "replay", "--database", "c", "--dry-run")
	if res.code != 2 || !strings.Contains(res.stderr, "--database c: no such database in the file's databases list (a, b)") {
		t.Errorf("replay --database c: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
