package deploycheck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// relayMetrics are the metric families the relay exports, with the labels each one
// carries (job and instance come from Prometheus). The relay's own tests assert that
// these same names are registered; keep the two lists in step.
var relayMetrics = map[string][]string{
	"outbox_events_published_total":                nil,
	"outbox_events_failed_total":                   {"event_type"},
	"walrelay_queued_events":                       nil,
	"outbox_events_pending":                        nil, // deprecated: walrelay_queued_events
	"walrelay_broker_up":                           nil,
	"walrelay_dead_lettered_events_total":          {"table"},
	"walrelay_oldest_inflight_age_seconds":         nil,
	"outbox_batch_duration_seconds":                nil,
	"walrelay_dead_letters":                        nil,
	"walrelay_slot_confirmed_lag_bytes":            {"slot"},
	"walrelay_slot_restart_lag_bytes":              {"slot"},
	"walrelay_slot_safe_wal_size_bytes":            {"slot"},
	"walrelay_slot_wal_status":                     {"slot", "status"},
	"walrelay_slot_active":                         {"slot"},
	"walrelay_commit_to_ack_seconds":               nil,
	"walrelay_inflight_events":                     nil,
	"walrelay_inflight_bytes":                      nil,
	"walrelay_confirmed_lsn":                       nil,
	"walrelay_last_confirm_timestamp_seconds":      nil,
	"walrelay_leader":                              nil,
	"walrelay_reconnects_total":                    nil,
	"walrelay_stalled":                             nil,
	"walrelay_paused":                              nil,
	"walrelay_published_horizon_timestamp_seconds": nil,
	"walrelay_events_confirmed_timestamp_seconds":  nil,
	"walrelay_build_info":                          {"version", "revision", "goversion"},
	// Only with a registry converter (key-converter or value-converter avro, protobuf, json-schema).
	"walrelay_schema_registry_up":          nil,
	"walrelay_schema_refused_events_total": {"subject"},
}

// walStatuses are the values of walrelay_slot_wal_status's status label
// (pg_replication_slots.wal_status).
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// deployPath names a file under deploy/ from this package's directory.
func deployPath(elem ...string) string {
	return filepath.Join(append([]string{"..", "..", "deploy"}, elem...)...)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// decodeYAML decodes one YAML document strictly: a misspelt key is an error.
func decodeYAML(t *testing.T, path string, v any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, path)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

var (
	metricRef   = regexp.MustCompile(`\b(?:outbox|walrelay)_[a-z_]+\b`)
	selectorRef = regexp.MustCompile(`\b((?:outbox|walrelay)_[a-z_]+)\{([^}]*)\}`)
	matcher     = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*$`)
)

// checkMetrics reports every relay metric an expression names that the relay does not
// export, and every label selector on one that uses a label it does not carry.
func checkMetrics(t *testing.T, where, expr string) {
	t.Helper()
	for _, name := range metricRef.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok {
				if _, known := relayMetrics[b]; known {
					base = b
				}
			}
		}
		if _, ok := relayMetrics[base]; !ok {
			t.Errorf("%s: %q uses metric %s, which the relay does not export", where, expr, name)
		}
	}
	for _, m := range selectorRef.FindAllStringSubmatch(expr, -1) {
		name, base := m[1], strings.TrimSuffix(m[1], "_bucket")
		for _, part := range strings.Split(m[2], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			lm := matcher.FindStringSubmatch(part)
			if lm == nil {
				t.Errorf("%s: cannot read label matcher %q in %q", where, part, expr)
				continue
			}
			label, value := lm[1], lm[3]
			allowed := append([]string{"job", "instance"}, relayMetrics[base]...)
			if name != base {
				allowed = append(allowed, "le")
			}
			if !slices.Contains(allowed, label) {
				t.Errorf("%s: %q selects %s by label %q; it has %v", where, expr, name, label, allowed)
			}
			if base == "walrelay_slot_wal_status" && label == "status" && lm[2] == "=" && !slices.Contains(walStatuses, value) {
				t.Errorf("%s: %q: status %q is not one of %v", where, expr, value, walStatuses)
			}
		}
	}
}

// Prometheus durations: one or more <number><unit> with unit ms, s, m, h, d, w or y.
var (
	promDurationFull = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	promDurationPart = regexp.MustCompile(`([0-9]+)(ms|s|m|h|d|w|y)`)
	promUnits        = map[string]time.Duration{
		"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
		"d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "y": 365 * 24 * time.Hour,
	}
)

func parsePromDuration(s string) (time.Duration, error) {
	if !promDurationFull.MatchString(s) {
		return 0, fmt.Errorf("%q is not a Prometheus duration (like 30s, 2m, 1h30m)", s)
	}
	var d time.Duration
	for _, p := range promDurationPart.FindAllStringSubmatch(s, -1) {
		n, err := strconv.ParseInt(p[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		d += time.Duration(n) * promUnits[p[2]]
	}
	return d, nil
}

func TestParsePromDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"2m": 2 * time.Minute, "15m": 15 * time.Minute, "1h": time.Hour, "1h30m": 90 * time.Minute,
		"500ms": 500 * time.Millisecond, "1d": 24 * time.Hour, "0s": 0,
	} {
		if got, err := parsePromDuration(in); err != nil || got != want {
			t.Errorf("parsePromDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2", "m", "2 m", "1.5h", "-1m", "2min"} {
		if _, err := parsePromDuration(in); err == nil {
			t.Errorf("parsePromDuration(%q) succeeded; want an error", in)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) map[string]rule {
	t.Helper()
	var f ruleFile
	decodeYAML(t, deployPath("prometheus", "alerts.yml"), &f)
	rules := map[string]rule{}
	for _, g := range f.Groups {
		if g.Name == "" {
			t.Errorf("a rule group has no name")
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule has no alert name (expr %q)", g.Name, r.Expr)
				continue
			}
			if _, dup := rules[r.Alert]; dup {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			rules[r.Alert] = r
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no alert rules")
	}
	return rules
}

func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	severities := []string{"info", "warning", "critical"}
	for name, r := range rules {
		if strings.TrimSpace(r.Expr) == "" {
			t.Errorf("%s: no expr", name)
		}
		if !slices.Contains(severities, r.Labels["severity"]) {
			t.Errorf("%s: labels.severity is %q; want one of %v", name, r.Labels["severity"], severities)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: annotations.%s is missing", name, a)
			}
		}
		if r.For != "" {
			if _, err := parsePromDuration(r.For); err != nil {
				t.Errorf("%s: for: %v", name, err)
			}
		}
		checkMetrics(t, "alert "+name, r.Expr)
	}

	for _, name := range []string{
		"OutboxPendingHigh", "OutboxPendingGrowing", "OutboxDeadLetters", "OutboxBatchSlow",
		"WalrelaySlotLagHigh", "WalrelaySlotWalUnreserved", "WalrelaySlotLost",
		"WalrelayStalled", "WalrelayEventsNotConfirmed", "WalrelayPublishedHorizonStuck", "WalrelayDown",
	} {
		if _, ok := rules[name]; !ok {
			t.Errorf("alert %s is missing", name)
		}
	}
	if got := rules["WalrelaySlotLost"].Labels["severity"]; got != "critical" {
		t.Errorf("WalrelaySlotLost: severity %q, want critical", got)
	}
}

// TestArticleThresholds checks the four alert thresholds of the article walrelay started
// from, whatever the rules are called.
func TestArticleThresholds(t *testing.T) {
	rules := loadAlerts(t)
	space := regexp.MustCompile(`\s+`)
	cases := []struct {
		what    string
		expr    *regexp.Regexp
		minFor  time.Duration
		exactly bool
	}{
		// The article's outbox_events_pending is walrelay_queued_events now; the rules
		// read the old name too while it is a deprecated alias.
		{"queued events > 1000 for 2 minutes",
			regexp.MustCompile(`^\(walrelay_queued_events or outbox_events_pending\) ?> ?1000$`), 2 * time.Minute, true},
		{"queued events growing steadily",
			regexp.MustCompile(`\b(deriv|delta|increase|predict_linear)\(\(walrelay_queued_events or outbox_events_pending\)\[[0-9a-z]+:[0-9a-z]*\]\) ?> ?0\b`), 5 * time.Minute, false},
		{"dead letters non-zero",
			regexp.MustCompile(`^walrelay_dead_letters ?(> ?0|!= ?0|>= ?1)$`), 0, false},
		{"outbox_batch_duration_seconds p95 > 5s",
			regexp.MustCompile(`^histogram_quantile\(0\.95, ?sum by \([a-z_, ]*\ble\b[a-z_, ]*\) ?\(rate\(outbox_batch_duration_seconds_bucket\[[0-9a-z]+\]\)\)\) ?> ?5$`), 0, false},
	}
	for _, c := range cases {
		var found []string
		for name, r := range rules {
			if !c.expr.MatchString(space.ReplaceAllString(strings.TrimSpace(r.Expr), " ")) {
				continue
			}
			d, err := parsePromDuration(orDefault(r.For, "0s"))
			if err != nil {
				t.Errorf("%s: for: %v", name, err)
				continue
			}
			if d < c.minFor || (c.exactly && d != c.minFor) {
				t.Errorf("%s (%s): for %s; want %s%s", name, c.what, orDefault(r.For, "0s"), map[bool]string{true: "", false: "at least "}[c.exactly], c.minFor)
			}
			found = append(found, name)
		}
		if len(found) == 0 {
			t.Errorf("no alert rule for the article's threshold %q (pattern %s)", c.what, c.expr)
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type dashboardPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a row's collapsed panels
}

type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			Query   string `json:"query"`
			Current struct {
				Value string `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

func TestGrafanaDashboard(t *testing.T) {
	path := deployPath("grafana", "dashboards", "walrelay.json")
	b := readFile(t, path)
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", path)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
	}
	if len(d.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}

	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	var all []dashboardPanel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range all {
		if p.Type == "row" {
			continue
		}
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if ids[p.ID] {
			t.Errorf("%s: id %d is used twice", where, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("%s: no gridPos", where)
		}
		if p.Datasource != nil && strings.HasPrefix(p.Datasource.UID, "$") {
			name := strings.Trim(p.Datasource.UID, "${}")
			if vars[name] != "datasource" {
				t.Errorf("%s: datasource %s is not a datasource variable of the dashboard", where, p.Datasource.UID)
			}
		}
		exprs := 0
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				continue
			}
			exprs++
			checkMetrics(t, where, tg.Expr)
			for _, m := range metricRef.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(m, "_bucket")] = true
			}
		}
		if exprs == 0 {
			t.Errorf("%s: no target with an expr", where)
		}
	}
	// The panels the runbook relies on.
	for _, m := range []string{
		"walrelay_slot_confirmed_lag_bytes", "outbox_events_published_total", "walrelay_commit_to_ack_seconds",
		"walrelay_queued_events", "walrelay_dead_letters", "walrelay_inflight_events",
		"walrelay_reconnects_total", "walrelay_stalled", "walrelay_leader",
	} {
		if !used[m] {
			t.Errorf("no dashboard panel shows %s", m)
		}
	}
}

// TestGrafanaProvisioning checks that the provisioned datasource is the dashboard's
// default and that the dashboard provider reads the directory compose mounts.
func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string         `yaml:"name"`
			UID       string         `yaml:"uid"`
			Type      string         `yaml:"type"`
			Access    string         `yaml:"access"`
			URL       string         `yaml:"url"`
			IsDefault bool           `yaml:"isDefault"`
			Editable  bool           `yaml:"editable"`
			JSONData  map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	decodeYAML(t, deployPath("grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("want one prometheus datasource at http://prometheus:9090, got %+v", ds.Datasources)
	}

	var d dashboard
	if err := json.Unmarshal(readFile(t, deployPath("grafana", "dashboards", "walrelay.json")), &d); err != nil {
		t.Fatal(err)
	}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Current.Value != ds.Datasources[0].UID {
			t.Errorf("dashboard variable %s defaults to %q; the provisioned datasource uid is %q", v.Name, v.Current.Value, ds.Datasources[0].UID)
		}
	}

	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			OrgID                 int    `yaml:"orgId"`
			Folder                string `yaml:"folder"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeYAML(t, deployPath("grafana", "provisioning", "dashboards", "walrelay.yml"), &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("want one file provider, got %+v", prov.Providers)
	}
	c := loadCompose(t)
	want := "./grafana/dashboards:" + prov.Providers[0].Options.Path
	if !slices.ContainsFunc(c.Services["grafana"].Volumes, func(v string) bool { return strings.HasPrefix(v, want) }) {
		t.Errorf("grafana provider reads %s, but compose does not mount ./grafana/dashboards there (volumes %v)",
			prov.Providers[0].Options.Path, c.Services["grafana"].Volumes)
	}
}

func TestPrometheusConfig(t *testing.T) {
	var cfg struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decodeYAML(t, deployPath("prometheus", "prometheus.yml"), &cfg)
	if !slices.Contains(cfg.RuleFiles, "alerts.yml") {
		t.Errorf("rule_files %v does not load alerts.yml", cfg.RuleFiles)
	}
	found := false
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName != "walrelay" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			found = found || slices.Contains(st.Targets, "walrelay:9731")
		}
	}
	if !found {
		t.Error(`no scrape job "walrelay" with target walrelay:9731 (WalrelayDown matches job="walrelay")`)
	}
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Ports       []string `yaml:"ports"`
	Volumes     []string `yaml:"volumes"`
	Restart     string   `yaml:"restart"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

type composeFile struct {
	Name     string                    `yaml:"name"`
	Walrelay map[string]any            `yaml:"x-walrelay"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	decodeYAML(t, deployPath("docker-compose.yml"), &c)
	return c
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"postgres", "kafka", "walrelay-migrate", "walrelay", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("compose has no service %s", name)
		}
	}

	pg := c.Services["postgres"]
	if i := slices.Index(pg.Command, "wal_level=logical"); i < 1 || pg.Command[i-1] != "-c" {
		t.Errorf("postgres command %q does not set -c wal_level=logical", pg.Command)
	}
	for _, name := range []string{"postgres", "kafka"} {
		if hc := c.Services[name].Healthcheck; hc == nil || len(hc.Test) == 0 {
			t.Errorf("%s has no healthcheck (others wait for service_healthy)", name)
		}
	}

	dependsOn := func(svc, on, cond string) {
		t.Helper()
		if got := c.Services[svc].DependsOn[on].Condition; got != cond {
			t.Errorf("%s depends on %s with condition %q; want %q", svc, on, got, cond)
		}
	}
	dependsOn("walrelay-migrate", "postgres", "service_healthy")
	dependsOn("walrelay", "walrelay-migrate", "service_completed_successfully")
	dependsOn("walrelay", "kafka", "service_healthy")

	for name, cmd := range map[string][]string{"walrelay-migrate": {"migrate"}, "walrelay": {"run"}} {
		s := c.Services[name]
		if !slices.Equal(s.Command, cmd) {
			t.Errorf("%s command %q, want %q", name, s.Command, cmd)
		}
		if s.Build == nil {
			t.Errorf("%s has no build section", name)
		} else if df := filepath.Join(deployPath(), s.Build.Context, s.Build.Dockerfile); !fileExists(df) {
			t.Errorf("%s builds with %s (context %s), which does not exist", name, s.Build.Dockerfile, s.Build.Context)
		}
		if s.Environment["WALRELAY_DATABASE_URL"] == "" {
			t.Errorf("%s has no WALRELAY_DATABASE_URL", name)
		}
	}
	w := c.Services["walrelay"]
	if w.Environment["WALRELAY_KAFKA_BROKERS"] == "" {
		t.Error("walrelay has no WALRELAY_KAFKA_BROKERS")
	}
	if got := w.Environment["WALRELAY_METRICS_ADDR"]; got != "0.0.0.0:9731" {
		t.Errorf("walrelay WALRELAY_METRICS_ADDR = %q; want 0.0.0.0:9731 (the default listens on loopback only)", got)
	}
	if !slices.ContainsFunc(w.Ports, func(p string) bool { return strings.HasSuffix(p, ":9731") }) {
		t.Errorf("walrelay does not publish port 9731 (ports %v)", w.Ports)
	}
	// The relay's healthcheck is walrelay status, run without a shell (the image has none).
	if hc := w.Healthcheck; hc == nil || len(hc.Test) < 3 || !slices.Equal(hc.Test[:3], []string{"CMD", "/walrelay", "status"}) {
		t.Errorf("walrelay's healthcheck is %+v; want [CMD /walrelay status ...]", hc)
	}

	// Every file compose bind-mounts exists.
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") && !fileExists(filepath.Join(deployPath(), src)) {
				t.Errorf("%s mounts %s, which does not exist", name, src)
			}
		}
	}
	prom := strings.Join(c.Services["prometheus"].Volumes, " ")
	for _, f := range []string{"./prometheus/prometheus.yml:", "./prometheus/alerts.yml:"} {
		if !strings.Contains(prom, f) {
			t.Errorf("prometheus does not mount %s", strings.TrimSuffix(f, ":"))
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestDockerfile(t *testing.T) {
	df := string(readFile(t, deployPath("Dockerfile")))
	gomod := string(readFile(t, filepath.Join("..", "..", "go.mod")))
	m := regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+)`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	for _, want := range []string{
		"FROM golang:" + m[1] + "-", // the toolchain go.mod asks for
		"CGO_ENABLED=0",
		"-o /walrelay ./cmd/walrelay",
		"EXPOSE 9731",
		`ENTRYPOINT ["/walrelay"]`,
		`CMD ["run"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 {
		t.Fatalf("Dockerfile has %d stages; want a build stage and a final one", len(froms))
	}
	final := froms[len(froms)-1][1]
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(df)
	if !strings.HasSuffix(final, ":nonroot") && (user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0")) {
		t.Errorf("final stage %s does not run as a non-root user", final)
	}
	if !fileExists(filepath.Join("..", "..", "cmd", "walrelay")) {
		t.Error("./cmd/walrelay, which the Dockerfile builds, does not exist")
	}
}

// k8sObject is the part of a Kubernetes manifest these checks read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"`
	Spec       struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       int `yaml:"maxSurge"`
				MaxUnavailable int `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		MaxUnavailable int            `yaml:"maxUnavailable"`
		Selector       map[string]any `yaml:"selector"`
		Ports          []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
				} `yaml:"securityContext"`
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom         []k8sEnvFrom `yaml:"envFrom"`
	LivenessProbe   *k8sProbe    `yaml:"livenessProbe"`
	ReadinessProbe  *k8sProbe    `yaml:"readinessProbe"`
	SecurityContext struct {
		RunAsNonRoot           *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem *bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type k8sEnvFrom struct {
	ConfigMapRef *struct {
		Name string `yaml:"name"`
	} `yaml:"configMapRef"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a container port's name
	} `yaml:"httpGet"`
}

// loadManifests parses every YAML file in deploy/kubernetes, several documents per file
// allowed, and returns the objects by file.
func loadManifests(t *testing.T) map[string][]k8sObject {
	t.Helper()
	paths, err := filepath.Glob(deployPath("kubernetes", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	out := map[string][]k8sObject{}
	for _, path := range paths {
		dec := yaml.NewDecoder(bytes.NewReader(readFile(t, path)))
		for {
			var obj k8sObject
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			if obj.Kind == "" {
				continue // an empty document
			}
			out[filepath.Base(path)] = append(out[filepath.Base(path)], obj)
		}
	}
	return out
}

func TestKubernetesManifests(t *testing.T) {
	files := loadManifests(t)
	byKind := map[string]k8sObject{}
	for file, objs := range files {
		for _, o := range objs {
			if o.APIVersion == "" || (o.Kind != "Kustomization" && o.Metadata.Name == "") {
				t.Errorf("%s: %s without apiVersion or metadata.name", file, o.Kind)
			}
			if file != "secret.example.yaml" {
				byKind[o.Kind] = o
			}
		}
	}

	dep, ok := byKind["Deployment"]
	if !ok {
		t.Fatal("no Deployment")
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %v; want 2: one streams, one stands by", dep.Spec.Replicas)
	}
	if dep.Spec.Strategy.Type != "RollingUpdate" || dep.Spec.Strategy.RollingUpdate.MaxUnavailable != 0 || dep.Spec.Strategy.RollingUpdate.MaxSurge != 1 {
		t.Errorf("Deployment strategy = %+v; want RollingUpdate, maxSurge 1, maxUnavailable 0", dep.Spec.Strategy)
	}
	if pdb, ok := byKind["PodDisruptionBudget"]; !ok || pdb.Spec.MaxUnavailable != 1 {
		t.Errorf("PodDisruptionBudget %+v; want one with maxUnavailable 1", pdb.Spec)
	}
	pod := dep.Spec.Template.Spec
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("Deployment has %d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if ro := c.SecurityContext.ReadOnlyRootFilesystem; ro == nil || !*ro {
		t.Error("container securityContext.readOnlyRootFilesystem is not true")
	}
	if len(c.Args) > 0 && !slices.Equal(c.Args, []string{"run"}) {
		t.Errorf("container args %q; want [run]", c.Args)
	}
	portOf := func(p any) int {
		switch v := p.(type) {
		case int:
			return v
		case string:
			for _, cp := range c.Ports {
				if cp.Name == v {
					return cp.ContainerPort
				}
			}
		}
		return 0
	}
	for _, pr := range []struct {
		kind  string
		probe *k8sProbe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", pr.kind)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.path || portOf(pr.probe.HTTPGet.Port) != 9731 {
			t.Errorf("%s probe: GET %s on port %v; want %s on 9731", pr.kind, pr.probe.HTTPGet.Path, pr.probe.HTTPGet.Port, pr.path)
		}
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" || c.Resources.Limits["memory"] == "" {
			t.Errorf("container resources lack requests.%s or limits.memory", r)
		}
	}

	var dbURL bool
	for _, e := range c.Env {
		if e.Name == "WALRELAY_DATABASE_URL" {
			ref := e.ValueFrom
			dbURL = e.Value == "" && ref != nil && ref.SecretKeyRef != nil &&
				ref.SecretKeyRef.Name == "walrelay-secrets" && ref.SecretKeyRef.Key == "database-url"
		}
	}
	if !dbURL {
		t.Error("WALRELAY_DATABASE_URL does not come from secret walrelay-secrets, key database-url")
	}

	cm, ok := byKind["ConfigMap"]
	if !ok {
		t.Fatal("no ConfigMap")
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e k8sEnvFrom) bool {
		return e.ConfigMapRef != nil && e.ConfigMapRef.Name == cm.Metadata.Name
	}) {
		t.Errorf("container does not take its environment from ConfigMap %s", cm.Metadata.Name)
	}
	for k, want := range map[string]string{"WALRELAY_METRICS_ADDR": "0.0.0.0:9731", "WALRELAY_LOG_FORMAT": "json"} {
		if cm.Data[k] != want {
			t.Errorf("ConfigMap %s = %q; want %q", k, cm.Data[k], want)
		}
	}
	if cm.Data["WALRELAY_KAFKA_BROKERS"] == "" {
		t.Error("ConfigMap has no WALRELAY_KAFKA_BROKERS")
	}
	if _, ok := cm.Data["WALRELAY_DATABASE_URL"]; ok {
		t.Error("the ConfigMap holds WALRELAY_DATABASE_URL; it carries a password and belongs in the Secret")
	}

	svc, ok := byKind["Service"]
	if !ok {
		t.Fatal("no Service")
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != 9731 || portOf(svc.Spec.Ports[0].TargetPort) != 9731 {
		t.Errorf("Service ports %+v; want 9731 to the container's 9731", svc.Spec.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service selects %s=%v, which the pod template does not carry", k, v)
		}
	}

	// The Secret is a template: a placeholder, and not applied by kustomize.
	secret := files["secret.example.yaml"]
	if len(secret) != 1 || secret[0].Kind != "Secret" || secret[0].Metadata.Name != "walrelay-secrets" ||
		!strings.Contains(secret[0].StringData["database-url"], "REPLACE_ME") {
		t.Errorf("secret.example.yaml should be one Secret walrelay-secrets with a REPLACE_ME placeholder in database-url")
	}
	kust, ok := byKind["Kustomization"]
	if !ok {
		t.Fatal("no kustomization.yaml")
	}
	for file := range files {
		listed := slices.Contains(kust.Resources, file)
		switch file {
		case "kustomization.yaml":
		case "secret.example.yaml":
			if listed {
				t.Error("kustomization.yaml applies secret.example.yaml, a template")
			}
		default:
			if !listed {
				t.Errorf("kustomization.yaml does not list %s", file)
			}
		}
	}
	for _, r := range kust.Resources {
		if !fileExists(deployPath("kubernetes", r)) {
			t.Errorf("kustomization.yaml lists %s, which does not exist", r)
		}
	}
}

// TestKustomizeBuild renders the manifests with kubectl's built-in kustomize, which
// works without a cluster. It is skipped where kubectl is not installed, except under
// CI, where it must run (make setup installs Debian's kubernetes-client).
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		msg := fmt.Sprintf("kubectl not on PATH (%v); install the Debian package kubernetes-client", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set, so this check may not be skipped)")
		}
		t.Skip(msg)
	}
	out, err := exec.Command(kubectl, "kustomize", deployPath("kubernetes")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/kubernetes: %v\n%s", err, out)
	}
	for _, kind := range []string{"kind: ConfigMap", "kind: Service", "kind: Deployment"} {
		if !bytes.Contains(out, []byte(kind)) {
			t.Errorf("kustomize output has no %s", kind)
		}
	}
	if bytes.Contains(out, []byte("kind: Secret")) {
		t.Error("kustomize output contains a Secret; the example secret must not be applied")
	}
}

// TestPromtool runs Prometheus's own checks on the rules and the config. promtool comes
// with the Debian package prometheus; without it the test is skipped, except under CI,
// where it must run.
func TestPromtool(t *testing.T) {
	promtool := needPromtool(t)
	for _, args := range [][]string{
		{"check", "rules", deployPath("prometheus", "alerts.yml")},
		{"check", "config", deployPath("prometheus", "prometheus.yml")},
	} {
		t.Run(strings.Join(args[:2], "_"), func(t *testing.T) {
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		})
	}
}

func needPromtool(t *testing.T) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		msg := fmt.Sprintf("promtool not on PATH (%v); install the Debian package prometheus: apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set, so this check may not be skipped)")
		}
		t.Skip(msg)
	}
	return promtool
}

// TestHorizonAlert evaluates WalrelayPublishedHorizonStuck with promtool's rule tests on
// series of five relays. It fires for the leader that publishes while its horizon
// stands still, after the threshold and not before. It stays quiet for an idle
// database, a standby, a relay in another mode and a horizon that moves.
func TestHorizonAlert(t *testing.T) {
	// Minute samples over 40 minutes: leader, horizon timestamp (s), published total.
	relays := []struct{ instance, leader, horizon, published string }{
		{"stuck", "1x40", "60x40", "0+100x40"},
		{"idle", "1x40", "60x40", "500x40"},
		{"standby", "0x40", "60x40", "0+100x40"},
		{"other-mode", "1x40", "0x40", "0+100x40"},
		{"moving", "1x40", "60+60x40", "0+100x40"},
	}
	var series []map[string]string
	for _, r := range relays {
		series = append(series, relaySeries(r.instance, map[string]string{"walrelay_leader": r.leader,
			"walrelay_published_horizon_timestamp_seconds": r.horizon, "outbox_events_published_total": r.published})...)
	}
	alertTest(t, "WalrelayPublishedHorizonStuck", series, "20m", "25m")
}

// TestEventsNotConfirmedAlert evaluates WalrelayEventsNotConfirmed: it fires for the
// leader whose events stay in flight while none is confirmed, also one that has
// confirmed none since it started, and stays quiet for a relay whose confirmations
// move, an idle one and a standby.
func TestEventsNotConfirmedAlert(t *testing.T) {
	// Minute samples over 10 minutes: leader, events in flight, events confirmed at (s).
	relays := []struct{ instance, leader, inflight, confirmed string }{
		{"stuck", "1x10", "5x10", "60x10"},
		{"never-confirmed", "1x10", "5x10", "0x10"},
		{"flowing", "1x10", "5x10", "60+60x10"},
		{"idle", "1x10", "0x10", "60x10"},
		{"standby", "0x10", "5x10", "60x10"},
	}
	var series []map[string]string
	for _, r := range relays {
		series = append(series, relaySeries(r.instance, map[string]string{"walrelay_leader": r.leader,
			"walrelay_inflight_events": r.inflight, "walrelay_events_confirmed_timestamp_seconds": r.confirmed})...)
	}
	alertTest(t, "WalrelayEventsNotConfirmed", series, "2m", "4m", "stuck", "never-confirmed")
}

// relaySeries are promtool input series of one relay instance.
func relaySeries(instance string, values map[string]string) []map[string]string {
	var series []map[string]string
	for _, metric := range slices.Sorted(maps.Keys(values)) {
		series = append(series, map[string]string{
			"series": fmt.Sprintf(`%s{job="walrelay",instance=%q}`, metric, instance), "values": values[metric]})
	}
	return series
}

// alertTest runs promtool's rule test for alert over minute samples of series: not
// firing at quietAt (pending or not at all), firing at firingAt for the instances
// named (default "stuck") and no other.
func alertTest(t *testing.T, alert string, series []map[string]string, quietAt, firingAt string, instances ...string) {
	t.Helper()
	promtool := needPromtool(t)
	rule, ok := loadAlerts(t)[alert]
	if !ok {
		t.Fatalf("alert %s is missing", alert)
	}
	if len(instances) == 0 {
		instances = []string{"stuck"}
	}
	rules, err := filepath.Abs(deployPath("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var firing []map[string]any
	for _, instance := range instances {
		annotations := map[string]string{}
		for k, v := range rule.Annotations {
			v = strings.ReplaceAll(v, "{{ $labels.instance }}", instance)
			if strings.Contains(v, "{{") {
				t.Fatalf("annotation %s uses a template this test does not expand: %s", k, v)
			}
			annotations[k] = v
		}
		firing = append(firing, map[string]any{
			"exp_labels":      map[string]string{"severity": rule.Labels["severity"], "job": "walrelay", "instance": instance},
			"exp_annotations": annotations,
		})
	}
	tests := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":     "1m",
			"input_series": series,
			"alert_rule_test": []map[string]any{
				{"eval_time": quietAt, "alertname": alert, "exp_alerts": []any{}},
				{"eval_time": firingAt, "alertname": alert, "exp_alerts": firing},
			},
		}},
	}
	out, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alert_test.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command(promtool, "test", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s\ntests:\n%s", err, res, out)
	}
}
