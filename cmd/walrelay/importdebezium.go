package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

const (
	postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"
	outboxRouter      = "io.debezium.transforms.outbox.EventRouter"
)

// routerDefaults are the outbox event router's documented defaults, used for the
// options a configuration leaves out.
var routerDefaults = map[string]string{
	"table.field.event.id":       "id",
	"table.field.event.key":      "aggregateid",
	"table.field.event.payload":  "payload",
	"route.by.field":             "aggregatetype",
	"route.topic.replacement":    "outbox.event.${routedByValue}",
	"tracing.span.context.field": "tracingspancontext",
}

// routerColumns maps router options to walrelay's column settings, in output order.
var routerColumns = [][2]string{
	{"table.field.event.id", "column-id"},
	{"route.by.field", "column-aggregate-type"},
	{"table.field.event.key", "column-aggregate-id"},
	{"table.field.event.type", "column-event-type"},
	{"table.field.event.payload", "column-payload"},
	{"table.field.event.timestamp", "column-created-at"},
}

// unsupportedReasons says why a known Debezium option has no walrelay setting.
var unsupportedReasons = map[string]string{
	"tracing.operation.name":          "walrelay reads the trace context from the column and creates no span of its own for it",
	"tracing.with.context.field.only": "walrelay reads the trace context from the column and creates no span of its own for it",
	"snapshot.mode":                   "a new slot's catch-up pass publishes the rows not yet processed",
	"plugin.name":                     "walrelay decodes with pgoutput only",
	"topic.prefix":                    "only names topics of change events, which walrelay does not publish",
	"database.server.name":            "only names topics of change events, which walrelay does not publish",
	"tasks.max":                       "walrelay runs one relay per slot",
	"name":                            "the Kafka Connect connector name",
	"table.field.event.payload.id":    "removed from the router; the key is column-aggregate-id",
	"table.op.invalid.behavior":       "walrelay reads inserts only",
}

func importDebeziumCommand() *cobra.Command {
	var workerFile string
	var allowDifferences bool
	var databaseURL string
	cmd := &cobra.Command{
		Use:   "import-debezium FILE",
		Short: "Print the walrelay YAML equivalent of a Debezium PostgreSQL outbox connector configuration",
		Long: "import-debezium reads a Debezium PostgreSQL connector configuration, as JSON for Kafka Connect's\n" +
			"REST API, as a Debezium Server .properties file or as a Strimzi KafkaConnector resource (YAML), and\n" +
			"prints the walrelay configuration file that does the same on stdout. Converters are read from the\n" +
			"connector, else from the Kafka Connect worker's properties (--worker) or a Strimzi KafkaConnect in\n" +
			"the same YAML. Regular expressions in table.include.list are resolved against the tables of\n" +
			"--database-url. An option that changes the records and that walrelay cannot\n" +
			"reproduce makes it exit 2 naming the option, unless --allow-differences; options that change no\n" +
			"record and have no equivalent are printed as comments. Passwords are not copied.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read the Debezium configuration: %w", err)
			}
			var worker map[string]string
			if workerFile != "" {
				w, err := os.ReadFile(workerFile)
				if err != nil {
					return fmt.Errorf("read the Kafka Connect worker properties (--worker): %w", err)
				}
				worker = parseProperties(string(w))
			}
			var catalog []string
			if databaseURL != "" {
				if catalog, err = catalogTables(cmd.Context(), databaseURL); err != nil {
					return err
				}
			}
			out, diffs, err := importDebezium(filepath.Base(args[0]), data, worker, catalog)
			if err != nil {
				return err
			}
			if len(diffs) > 0 && !allowDifferences {
				return fmt.Errorf("%s: walrelay's records would differ from Debezium's:\n  %s\n"+
					"change or remove these options in the connector, or run with --allow-differences to write the YAML "+
					"anyway, each difference as a comment", filepath.Base(args[0]), strings.Join(diffs, "\n  "))
			}
			_, err = io.WriteString(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&workerFile, "worker", "", "the Kafka Connect worker's properties file (connect-distributed.properties), "+
		"where key.converter and value.converter are usually set")
	cmd.Flags().StringVar(&databaseURL, "database-url", "", "the outbox database, whose tables resolve the regular expressions "+
		"of table.include.list (without it such an entry is a difference)")
	cmd.Flags().BoolVar(&allowDifferences, "allow-differences", false, "write the YAML even where walrelay's records would differ "+
		"from Debezium's (each difference is a comment)")
	return cmd
}

// importDebezium converts one configuration file's content; name is only for
// messages, worker is the Kafka Connect worker's properties (nil: none), catalog
// the database's tables (nil: not known). diffs are
// the options whose records walrelay would not reproduce, as option=value: reason.
func importDebezium(name string, data []byte, worker map[string]string, catalog []string) (out string, diffs []string, err error) {
	props, strimziWorker, isStrimzi, err := strimziProperties(data)
	if !isStrimzi {
		props, err = debeziumProperties(data)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	if worker == nil {
		worker = strimziWorker
	}
	if props["connector.class"] != postgresConnector {
		return "", nil, fmt.Errorf("%s is not a Debezium PostgreSQL connector configuration: want connector.class "+
			"(debezium.source.connector.class in Debezium Server, spec.class in a Strimzi KafkaConnector) = %s; give the file the connector was "+
			"created with", name, postgresConnector)
	}
	out, diffs = convertDebezium(props, worker, catalog)
	return out, diffs, nil
}

// debeziumProperties reads Kafka Connect JSON (with or without the name/config
// envelope) or Debezium Server properties into connector keys: debezium.source. and
// debezium. are stripped, so both forms give connector.class, transforms.NAME.type, ...
func debeziumProperties(data []byte) (map[string]string, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var doc map[string]any
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return nil, fmt.Errorf("not valid JSON (%v); give Kafka Connect's connector JSON or a Debezium Server .properties file", err)
		}
		props := map[string]string{}
		if cfg, ok := doc["config"].(map[string]any); ok {
			for k, v := range cfg {
				props[k] = jsonText(v)
			}
			if n, ok := doc["name"]; ok {
				props["name"] = jsonText(n)
			}
			return props, nil
		}
		for k, v := range doc {
			props[k] = jsonText(v)
		}
		return props, nil
	}
	raw := parseProperties(string(data))
	if _, server := raw["debezium.source.connector.class"]; !server {
		return raw, nil // a Kafka Connect worker-style properties file
	}
	props := map[string]string{}
	for k, v := range raw {
		switch {
		case strings.HasPrefix(k, "debezium.source."):
			props[strings.TrimPrefix(k, "debezium.source.")] = v
		case k == "debezium.sink.kafka.producer.bootstrap.servers":
			props["bootstrap.servers"] = v
		case k == "debezium.transforms" || strings.HasPrefix(k, "debezium.transforms."):
			props[strings.TrimPrefix(k, "debezium.")] = v
		default:
			props[k] = v // kept whole, so its comment names the key as written
		}
	}
	return props, nil
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// parseProperties reads Java properties: key=value or key: value, # and ! comments,
// a trailing backslash continues the line.
func parseProperties(text string) map[string]string {
	props := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	var logical string
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			logical += strings.TrimSuffix(line, `\`)
			continue
		}
		logical += line
		if i := strings.IndexAny(logical, "=:"); i >= 0 {
			props[strings.TrimSpace(logical[:i])] = strings.TrimSpace(logical[i+1:])
		} else {
			props[strings.TrimSpace(logical)] = ""
		}
		logical = ""
	}
	return props
}

// convertDebezium writes the walrelay YAML for a PostgreSQL connector's properties.
//
// catalog is the database's tables (catalogTables), which table.include.list
// regular expressions are resolved against; nil: none, and a regular expression is
// a difference.
func convertDebezium(props, worker map[string]string, catalog []string) (string, []string) {
	used := map[string]bool{"connector.class": true}
	var diffs []string
	differs := func(b *strings.Builder, key, value, reason string) {
		if isSecret(key) {
			value = "***"
		}
		value = strings.Join(strings.Fields(value), " ")
		fmt.Fprintf(b, "# %s=%s: differs from Debezium (%s)\n", key, value, reason)
		diffs = append(diffs, key+"="+value+": "+reason)
	}
	use := func(k string) (string, bool) {
		v, ok := props[k]
		if ok {
			used[k] = true
		}
		return v, ok
	}
	var b strings.Builder
	b.WriteString("# walrelay configuration converted from a Debezium PostgreSQL connector by `walrelay import-debezium`.\n")
	b.WriteString("# Before `walrelay run --config FILE`: add walrelay's bookkeeping columns to the outbox table\n")
	b.WriteString("# (docs/operations.md, \"Bringing your own outbox table\") and run `walrelay migrate`. One slot has\n")
	b.WriteString("# one reader: stop the Debezium connector before walrelay runs on its slot.\n")

	// Database.
	host, _ := use("database.hostname")
	port, _ := use("database.port")
	user, _ := use("database.user")
	db, _ := use("database.dbname")
	sslmode, _ := use("database.sslmode")
	if _, ok := use("database.password"); ok {
		b.WriteString("# database.password=***: not copied; put the password in WALRELAY_DATABASE_URL or a pgpass file\n")
	} else {
		b.WriteString("# The password is not part of database-url: put it in WALRELAY_DATABASE_URL or a pgpass file.\n")
	}
	if host != "" {
		if port == "" {
			port = "5432"
		}
		u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, port), Path: "/" + db}
		if user != "" {
			u.User = url.User(user)
		}
		if sslmode != "" {
			u.RawQuery = url.Values{"sslmode": {sslmode}}.Encode()
		}
		line(&b, "database-url", u.String())
	} else {
		b.WriteString("# database.hostname is not set: write database-url yourself\n")
	}
	if props["plugin.name"] == "pgoutput" {
		used["plugin.name"] = true // walrelay's own decoder
	}
	// Debezium's own defaults, written out, so that walrelay takes over the connector's
	// slot, and with it the position Debezium had confirmed.
	if v, ok := use("slot.name"); ok {
		line(&b, "slot", v)
	} else {
		line(&b, "slot", "debezium")
	}
	if v, ok := use("publication.name"); ok {
		line(&b, "publication", v)
	} else {
		line(&b, "publication", "dbz_publication")
	}
	if props["debezium.sink.type"] == "kafka" {
		used["debezium.sink.type"] = true
		line(&b, "sink", "kafka")
	}
	if v, ok := use("bootstrap.servers"); ok {
		line(&b, "kafka-brokers", v)
	} else {
		b.WriteString("# kafka-brokers: not in the connector configuration; set the brokers of the Kafka Connect worker\n" +
			"# (its bootstrap.servers) here or in WALRELAY_KAFKA_BROKERS\n")
	}
	b.WriteString("# Like Debezium, progress writes nothing per published row; retention lets walrelay delete old ones.\n")
	line(&b, "on-publish", "progress")
	// Record settings, written ahead of the tables: they are not per table.
	// Debezium's router sets the id header alone; placed headers follow it.
	globals := [][2]string{{"record-headers", "debezium"}}
	convs := map[string]string{}
	for _, side := range []string{"key", "value"} {
		conv, schemas := converter(&b, side, props, worker, used, differs)
		convs[side] = conv
		globals = append(globals, [2]string{side + "-converter", conv})
		if schemas {
			globals = append(globals, [2]string{side + "-converter-schemas-enable", "true"})
		}
	}

	// Outbox router.
	router := ""
	if list, ok := use("transforms"); ok {
		for _, n := range splitList(list) {
			if props["transforms."+n+".type"] == outboxRouter {
				router = n
				used["transforms."+n+".type"] = true
				break
			}
		}
	}
	opt := func(k string) string {
		if router != "" {
			if v, ok := use("transforms." + router + "." + k); ok {
				return v
			}
		}
		return routerDefaults[k]
	}
	if router == "" {
		b.WriteString("# No outbox event router (" + outboxRouter + ") in transforms: its defaults are used.\n")
	}
	var fields [][2]string
	for _, rc := range routerColumns {
		v := opt(rc[0])
		if rc[0] == "table.field.event.type" {
			// The router never reads the type column (EventRouterDelegate), so a table
			// may lack it; walrelay reads one only where the connector names it.
			if _, set := props["transforms."+router+".table.field.event.type"]; !set || router == "" {
				b.WriteString("# table.field.event.type: not set, and Debezium reads no type column; set column-event-type to one\n" +
					"# for walrelay's event_type header, metrics label and {event_type}\n")
				v = ""
			}
		}
		fields = append(fields, [2]string{rc[1], v})
	}
	if v := opt("table.fields.additional.placement"); v != "" {
		headers, partition, notes, envelope := placement(v)
		for _, n := range notes {
			b.WriteString("# table.fields.additional.placement " + n + "\n")
		}
		var fieldsOf []outbox.HeaderColumn
		for _, e := range envelope {
			parts := strings.Split(e, ":")
			f := outbox.HeaderColumn{Column: strings.TrimSpace(parts[0])}
			if len(parts) == 3 {
				f.Header = strings.TrimSpace(parts[2])
			}
			fieldsOf = append(fieldsOf, f)
		}
		if len(fieldsOf) > 0 {
			valueConv, valueSchemas := convs["value"], false
			for _, g := range globals {
				valueSchemas = valueSchemas || (g[0] == "value-converter-schemas-enable" && g[1] == "true")
			}
			// With schemas the envelope struct is named after the change event's value
			// schema, topic.prefix.schema.table.Value (EventRouterDelegate.getSchemaName);
			// database.server.name is topic.prefix before Debezium 2.
			prefixKey := "topic.prefix"
			if _, ok := props[prefixKey]; !ok {
				prefixKey = "database.server.name"
			}
			prefix, hasPrefix := props[prefixKey]
			switch {
			case valueConv == "bytearray":
				for _, e := range envelope {
					differs(&b, "transforms."+router+".table.fields.additional.placement", e,
						"walrelay writes an envelope with value-converter json or string; Connect's byte array converter refuses a struct")
				}
			case valueSchemas && !hasPrefix:
				for _, e := range envelope {
					differs(&b, "transforms."+router+".table.fields.additional.placement", e,
						"with value schemas the envelope's schema is named after topic.prefix, which the connector does not set")
				}
			default:
				if valueSchemas {
					used[prefixKey] = true
					globals = append(globals, [2]string{"topic-prefix", prefix})
				}
				fields = append(fields, [2]string{"column-envelope", outbox.FormatHeaderColumns(fieldsOf)})
			}
		}
		if headers != "" {
			fields = append(fields, [2]string{"column-headers", headers})
		}
		if partition != "" {
			fields = append(fields, [2]string{"column-partition", partition})
		}
	}
	fields = append(fields, [2]string{"column-trace", opt("tracing.span.context.field")})
	if v := opt("table.expand.json.payload"); strings.EqualFold(strings.TrimSpace(v), "true") {
		if convs["value"] == "bytearray" {
			differs(&b, "transforms."+router+".table.expand.json.payload", v, "walrelay expands the payload with "+
				"value-converter string or json; Connect's byte array converter refuses a struct")
		} else {
			globals = append(globals, [2]string{"expand-json-payload", "true"})
			// The expansion names fields through the connector's adjuster
			// (EventRouterDelegate: FieldNameAdjustmentMode); walrelay keeps the names.
			if m, ok := use("field.name.adjustment.mode"); ok && !strings.EqualFold(strings.TrimSpace(m), "none") {
				differs(&b, "field.name.adjustment.mode", m, "walrelay keeps the expanded payload's field names as they are")
			}
			for _, o := range []struct{ key, setting, keep string }{
				{"table.json.payload.null.behavior", "expand-json-payload-nulls", "optional_bytes"},
				{"table.json.payload.empty.array.behavior", "expand-json-payload-empty-arrays", "optional_string"},
			} {
				switch w := strings.ToLower(strings.TrimSpace(opt(o.key))); w {
				case "", "ignore":
				case o.keep:
					globals = append(globals, [2]string{o.setting, w})
				default:
					differs(&b, "transforms."+router+"."+o.key, opt(o.key), "not ignore or "+o.keep)
				}
			}
		}
	}
	if v := opt("route.tombstone.on.empty.payload"); v == "true" {
		globals = append(globals, [2]string{"tombstone-on-empty-payload", "true"})
	}
	if opt("table.field.event.timestamp") != "" {
		globals = append(globals, [2]string{"record-timestamp", "created-at"})
	}
	for _, g := range globals {
		line(&b, g[0], g[1])
	}
	fields = append(fields, topicFields(&b, router, opt, differs)...)

	// Tables.
	var tables []string
	if list, ok := use("table.include.list"); ok {
		seen := map[string]bool{}
		for _, entry := range splitList(list) {
			resolved, reason := includedTables(entry, catalog)
			if reason != "" {
				differs(&b, "table.include.list", entry, reason)
				continue
			}
			if len(resolved) != 1 || resolved[0] != strings.ReplaceAll(entry, `\.`, ".") {
				b.WriteString("# table.include.list " + entry + ": the database's tables it matches: " + strings.Join(resolved, ", ") + "\n")
			}
			for _, t := range resolved {
				if !seen[t] {
					seen[t] = true
					tables = append(tables, t)
				}
			}
		}
	}
	switch {
	case len(tables) <= 1:
		if len(tables) == 1 {
			line(&b, "table", tables[0])
		} else {
			b.WriteString("# table.include.list names no table: set table to the outbox table\n")
		}
		for _, f := range fields {
			line(&b, f[0], f[1])
		}
	default:
		b.WriteString("tables:\n")
		for _, t := range tables {
			b.WriteString("  - table: " + yamlScalar(t) + "\n")
			for _, f := range fields {
				b.WriteString("    " + f[0] + ": " + yamlScalar(f[1]) + "\n")
			}
		}
	}

	// Everything else, as comments.
	var rest []string
	for k := range props {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		if reason := headerValueDifference(k, props[k], fields); reason != "" {
			differs(&b, k, props[k], reason)
			continue
		}
		if reason := recordDifference(k, props[k], router); reason != "" {
			differs(&b, k, props[k], reason)
			continue
		}
		comment(&b, k, props[k], unsupportedReason(k, router))
	}
	return b.String(), diffs
}

// placement converts the router's table.fields.additional.placement (comma-separated
// column:placement[:alias]) into column-headers and column-partition; notes are
// what cannot be converted, as comments.
func placement(v string) (headers, partition string, notes, envelope []string) {
	var hs []outbox.HeaderColumn
	for _, entry := range splitList(v) {
		parts := strings.Split(entry, ":")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			notes = append(notes, fmt.Sprintf("%q: not column:placement[:alias]; not converted", entry))
			continue
		}
		alias := parts[0]
		if len(parts) == 3 && parts[2] != "" {
			alias = parts[2]
		}
		switch parts[1] {
		case "header":
			hs = append(hs, outbox.HeaderColumn{Column: parts[0], Header: alias})
		case "partition":
			if partition != "" {
				notes = append(notes, fmt.Sprintf("%q: a second partition column; %s is used", entry, partition))
				continue
			}
			partition = parts[0]
		case "envelope":
			envelope = append(envelope, entry)
		default:
			notes = append(notes, fmt.Sprintf("%q: placement %q is not header, envelope or partition; not converted", entry, parts[1]))
		}
	}
	return outbox.FormatHeaderColumns(hs), partition, notes, envelope
}

func unsupportedReason(key, router string) string {
	if router != "" && strings.HasPrefix(key, "transforms."+router+".") {
		if r, ok := unsupportedReasons[strings.TrimPrefix(key, "transforms."+router+".")]; ok {
			return r
		}
		return "an outbox router option walrelay does not have"
	}
	if r, ok := unsupportedReasons[key]; ok {
		return r
	}
	switch {
	case strings.HasPrefix(key, "transforms.") || strings.HasPrefix(key, "predicates"):
		return "a Kafka Connect transform; walrelay publishes the rows as they are"
	case strings.Contains(key, "converter"):
		return "walrelay publishes the payload column's bytes, no converter"
	case strings.HasPrefix(key, "offset.") || strings.HasPrefix(key, "debezium.source.offset."):
		return "walrelay keeps its position in the slot"
	case strings.HasPrefix(key, "debezium.sink."):
		return "a Debezium Server sink option; see the kafka-* settings"
	case strings.HasPrefix(key, "debezium."):
		return "a Debezium Server option"
	}
	return "a Debezium connector option"
}

// isSecret says whether a key's value must not be printed.
func isSecret(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "token", "sasl.jaas.config"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func comment(b *strings.Builder, key, value, reason string) {
	if isSecret(key) {
		value = "***"
	}
	value = strings.Join(strings.Fields(value), " ")
	fmt.Fprintf(b, "# %s=%s: no walrelay equivalent (%s)\n", key, value, reason)
}

func line(b *strings.Builder, key, value string) {
	b.WriteString(key + ": " + yamlScalar(value) + "\n")
}

// yamlScalar quotes a value where YAML needs it.
func yamlScalar(v string) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", v)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// converterClasses are the Kafka Connect converters walrelay writes as Connect
// does, by the name of their setting (record.ParseConverter).
var converterClasses = map[string]string{
	"org.apache.kafka.connect.storage.StringConverter":       "string",
	"org.apache.kafka.connect.json.JsonConverter":            "json",
	"org.apache.kafka.connect.converters.ByteArrayConverter": "bytearray",
	"io.debezium.converters.BinaryDataConverter":             "bytearray",
}

// converter reads side's (key or value) converter from the connector, else from the
// worker's properties, and says which walrelay converter writes the same bytes and
// whether with schemas (JsonConverter's schemas.enable, true unless set false).
// A converter walrelay does not have is a difference, and string is written.
func converter(b *strings.Builder, side string, props, worker map[string]string, used map[string]bool,
	differs func(b *strings.Builder, key, value, reason string)) (conv string, schemas bool) {
	key := side + ".converter"
	lookup := func(k string) (string, string, bool) {
		if v, ok := props[k]; ok {
			used[k] = true
			return v, k, true
		}
		if v, ok := worker[k]; ok {
			return v, k + " (worker)", true
		}
		return "", k, false
	}
	class, from, ok := lookup(key)
	if !ok {
		fmt.Fprintf(b, "# %s: set neither in the connector nor in a worker file (--worker); walrelay writes the %s as StringConverter does\n", key, side)
		return "string", false
	}
	conv, known := converterClasses[strings.TrimSpace(class)]
	if !known {
		differs(b, from, class, "walrelay writes "+side+"s as StringConverter, JsonConverter, ByteArrayConverter or BinaryDataConverter does, no other")
		return "string", false
	}
	if s, _, ok := lookup(key + ".schemas.enable"); conv == "json" && (!ok || strings.TrimSpace(s) != "false") {
		schemas = true
	}
	return conv, schemas
}

// recordDifference says how an option the conversion did not use changes Debezium's
// records where walrelay's would not change: "" when it changes none.
func recordDifference(key, value, router string) string {
	if router != "" && strings.HasPrefix(key, "transforms."+router+".") {
		switch strings.TrimPrefix(key, "transforms."+router+".") {
		case "table.field.event.schema.version":
			return "walrelay writes no schema version"
		case "table.json.payload.null.behavior", "table.json.payload.empty.array.behavior":
			return "" // without table.expand.json.payload they change nothing
		case "table.fields.additional.error.on.missing":
			return ""
		}
		return ""
	}
	switch {
	case strings.HasPrefix(key, "transforms.") && strings.HasSuffix(key, ".type"):
		return "a Kafka Connect transform walrelay does not apply"
	case key == "header.converter" && value != "org.apache.kafka.connect.storage.SimpleHeaderConverter":
		return "walrelay writes headers as their text"
	case strings.HasPrefix(key, "key.converter.") || strings.HasPrefix(key, "value.converter."):
		if strings.HasSuffix(key, ".schemas.enable") || strings.Contains(key, ".delegate.converter.") {
			return "" // BinaryDataConverter's delegate writes only what is not a payload's bytes
		}
		return "a converter option walrelay does not have"
	}
	return ""
}

// defaultTopicRegex is the router's route.topic.regex: the whole routed value.
const defaultTopicRegex = "(?<routedByValue>.*)"

// topicFields converts route.topic.regex and route.topic.replacement: a
// topic-template where the default regex's replacement has no other group or
// escape, topic-regex and topic-replacement otherwise, and a difference where Go's
// RE2 cannot read the expression as Java does.
func topicFields(b *strings.Builder, router string, opt func(string) string,
	differs func(*strings.Builder, string, string, string)) [][2]string {
	regex, repl := opt("route.topic.regex"), opt("route.topic.replacement")
	if regex == "" {
		regex = defaultTopicRegex
	}
	if tmpl := strings.ReplaceAll(repl, "${routedByValue}", "{aggregate_type}"); regex == defaultTopicRegex &&
		!strings.ContainsAny(strings.ReplaceAll(tmpl, "{aggregate_type}", ""), `${}\`) {
		return [][2]string{{"topic-template", tmpl}}
	}
	if _, err := record.ParseRoute(regex, repl); err != nil {
		differs(b, "transforms."+router+".route.topic.regex", regex, err.Error())
		return nil
	}
	return [][2]string{{"topic-regex", regex}, {"topic-replacement", repl}}
}

// headerValueDifference says how a connector option changes the header values of
// placed columns from what record-headers debezium writes (time.precision.mode
// adaptive, decimal.handling.mode precise or string): "" when it changes none, or
// when no column is placed as a header.
func headerValueDifference(key, value string, fields [][2]string) string {
	headers := false
	for _, f := range fields {
		headers = headers || (f[0] == "column-headers" && f[1] != "")
	}
	if !headers {
		return ""
	}
	switch {
	case key == "time.precision.mode" && value != "adaptive" && value != "adaptive_time_microseconds":
		return "walrelay writes timestamp and date headers as time.precision.mode adaptive does"
	case key == "decimal.handling.mode" && value == "double":
		return "walrelay writes numeric headers as their text, as decimal.handling.mode precise and string do"
	}
	return ""
}

// splitList reads a comma-separated list, leaving out blank entries.
func splitList(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
