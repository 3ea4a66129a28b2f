package debezium

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// conversion is one connector configuration being written as walrelay YAML: the
// steps below (connection.go, converters.go, routing.go, columns.go, placement.go,
// tracing.go, tables.go) each read the options of their concern, mark them used and
// add lines, settings or differences; what no step used is written as comments.
type conversion struct {
	props map[string]string
	// workers are where a converter the connector does not name is read, in
	// order: --key-converter and the like, then the worker or its platform.
	workers []*Worker
	// catalog is the database's tables and columns (ReadCatalog), which
	// table.include.list regular expressions are resolved against; nil: none,
	// and a regular expression is a difference.
	catalog *Catalog

	b     strings.Builder
	used  map[string]bool
	diffs []string
	// router is the outbox event router's name in transforms ("": none, its
	// defaults are used).
	router string
	// convs are the key and value converters chosen, by side.
	convs map[string]string
	// registry are the Schema Registry settings the converters need
	// (registry.go), written after them.
	registry map[string]string
	// globals are the record settings, written ahead of the tables: they are not
	// per table.
	globals [][2]string
	// fields are each table's settings: its columns, placement and topic.
	fields [][2]string
}

// convert writes the walrelay YAML for a PostgreSQL connector's properties.
func convert(props map[string]string, workers []*Worker, catalog *Catalog) (string, []string) {
	c := &conversion{props: props, workers: workers, catalog: catalog, used: map[string]bool{"connector.class": true}}
	c.b.WriteString("# walrelay configuration converted from a Debezium PostgreSQL connector by `walrelay import-debezium`.\n")
	c.b.WriteString("# Before `walrelay run --config FILE`: add walrelay's bookkeeping columns to the outbox table\n")
	c.b.WriteString("# (docs/operations.md, \"Bringing your own outbox table\") and run `walrelay migrate`. One slot has\n")
	c.b.WriteString("# one reader: stop the Debezium connector before walrelay runs on its slot.\n")

	c.connection()
	c.findRouter()
	c.converters()
	c.columns()
	c.placeColumns()
	c.tracing()
	c.expandJSON()
	c.recordOptions()
	for _, g := range c.globals {
		line(&c.b, g[0], g[1])
	}
	c.fields = append(c.fields, c.topicFields()...)
	c.tables()
	c.rest()
	return c.b.String(), c.diffs
}

// differs writes key=value as a difference from Debezium's records, and notes it.
func (c *conversion) differs(key, value, reason string) {
	value = printable(key, value)
	fmt.Fprintf(&c.b, "# %s=%s: differs from Debezium (%s)\n", key, value, reason)
	c.diffs = append(c.diffs, key+"="+value+": "+reason)
}

// use returns the connector option k, marking it used.
func (c *conversion) use(k string) (string, bool) {
	v, ok := c.props[k]
	if ok {
		c.used[k] = true
	}
	return v, ok
}

// rest writes everything no step used, as comments: a difference where the option
// changes Debezium's records, else why walrelay has no equivalent.
func (c *conversion) rest() {
	var rest []string
	for k := range c.props {
		if !c.used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		if reason := headerValueDifference(k, c.props[k], c.fields); reason != "" {
			c.differs(k, c.props[k], reason)
			continue
		}
		if reason := recordDifference(k, c.props[k], c.router); reason != "" {
			c.differs(k, c.props[k], reason)
			continue
		}
		comment(&c.b, k, c.props[k], unsupportedReason(k, c.router))
	}
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

// printable is key's value as a comment shows it: *** for a secret, a URL
// without its user and password, on one line.
func printable(key, value string) string {
	if isSecret(key) {
		return "***"
	}
	if strings.Contains(strings.ToLower(key), "registry.url") {
		var urls []string
		for _, raw := range strings.Split(value, ",") {
			if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
				u.User = nil
				raw = strings.Replace(u.String(), "//", "//***@", 1)
			}
			urls = append(urls, raw)
		}
		value = strings.Join(urls, ",")
	}
	return strings.Join(strings.Fields(value), " ")
}

// isSecret says whether a key's value must not be printed.
func isSecret(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "token", "sasl.jaas.config", "user.info"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func comment(b *strings.Builder, key, value, reason string) {
	value = printable(key, value)
	fmt.Fprintf(b, "# %s=%s: no walrelay equivalent (%s)\n", key, value, reason)
}

// note writes key=value with what the import made of it, where it is neither a
// setting nor without an equivalent.
func note(b *strings.Builder, key, value, text string) {
	fmt.Fprintf(b, "# %s=%s: %s\n", key, printable(key, value), text)
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
