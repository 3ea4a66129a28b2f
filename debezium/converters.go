package debezium

import (
	"fmt"
	"strings"
)

// converterClasses are the Kafka Connect converters walrelay writes as Connect
// does, by the name of their setting (record.ParseConverter).
var converterClasses = map[string]string{
	"org.apache.kafka.connect.storage.StringConverter":       "string",
	"org.apache.kafka.connect.json.JsonConverter":            "json",
	"org.apache.kafka.connect.converters.ByteArrayConverter": "bytearray",
	"io.debezium.converters.BinaryDataConverter":             "bytearray",
}

// converters sets the record settings that come from the key and value converters.
// Debezium's router sets the id header alone; placed headers follow it.
func (c *conversion) converters() {
	c.globals = [][2]string{{"record-headers", "debezium"}}
	c.convs = map[string]string{}
	for _, side := range []string{"key", "value"} {
		conv, schemas := c.converter(side)
		c.convs[side] = conv
		c.globals = append(c.globals, [2]string{side + "-converter", conv})
		if schemas {
			c.globals = append(c.globals, [2]string{side + "-converter-schemas-enable", "true"})
		}
	}
}

// converter reads side's (key or value) converter from the connector, else from the
// worker's properties, and says which walrelay converter writes the same bytes and
// whether with schemas (JsonConverter's schemas.enable, true unless set false).
// A converter walrelay does not have is a difference, and string is written.
func (c *conversion) converter(side string) (conv string, schemas bool) {
	key := side + ".converter"
	lookup := func(k string) (string, string, bool) {
		if v, ok := c.props[k]; ok {
			c.used[k] = true
			return v, k, true
		}
		if v, ok := c.worker[k]; ok {
			return v, k + " (worker)", true
		}
		return "", k, false
	}
	class, from, ok := lookup(key)
	if !ok {
		fmt.Fprintf(&c.b, "# %s: set neither in the connector nor in a worker file (--worker); walrelay writes the %s as StringConverter does\n", key, side)
		return "string", false
	}
	conv, known := converterClasses[strings.TrimSpace(class)]
	if !known {
		c.differs(from, class, "walrelay writes "+side+"s as StringConverter, JsonConverter, ByteArrayConverter or BinaryDataConverter does, no other")
		return "string", false
	}
	if s, _, ok := lookup(key + ".schemas.enable"); conv == "json" && (!ok || strings.TrimSpace(s) != "false") {
		schemas = true
	}
	return conv, schemas
}

// expandJSON converts the router's table.expand.json.payload and its null and
// empty array behaviours into expand-json-payload settings.
func (c *conversion) expandJSON() {
	if v := c.opt("table.expand.json.payload"); strings.EqualFold(strings.TrimSpace(v), "true") {
		if c.convs["value"] == "bytearray" {
			c.differs("transforms."+c.router+".table.expand.json.payload", v, "walrelay expands the payload with "+
				"value-converter string or json; Connect's byte array converter refuses a struct")
		} else {
			c.globals = append(c.globals, [2]string{"expand-json-payload", "true"})
			// The expansion names fields through the connector's adjuster
			// (EventRouterDelegate: FieldNameAdjustmentMode); walrelay keeps the names.
			if m, ok := c.use("field.name.adjustment.mode"); ok && !strings.EqualFold(strings.TrimSpace(m), "none") {
				c.differs("field.name.adjustment.mode", m, "walrelay keeps the expanded payload's field names as they are")
			}
			for _, o := range []struct{ key, setting, keep string }{
				{"table.json.payload.null.behavior", "expand-json-payload-nulls", "optional_bytes"},
				{"table.json.payload.empty.array.behavior", "expand-json-payload-empty-arrays", "optional_string"},
			} {
				switch w := strings.ToLower(strings.TrimSpace(c.opt(o.key))); w {
				case "", "ignore":
				case o.keep:
					c.globals = append(c.globals, [2]string{o.setting, w})
				default:
					c.differs("transforms."+c.router+"."+o.key, c.opt(o.key), "not ignore or "+o.keep)
				}
			}
		}
	}
}

// recordOptions converts the router's tombstone and timestamp options.
func (c *conversion) recordOptions() {
	if v := c.opt("route.tombstone.on.empty.payload"); v == "true" {
		c.globals = append(c.globals, [2]string{"tombstone-on-empty-payload", "true"})
	}
	if c.opt("table.field.event.timestamp") != "" {
		c.globals = append(c.globals, [2]string{"record-timestamp", "created-at"})
	}
}
