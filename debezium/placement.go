package debezium

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/outbox"
)

// placeColumns converts the router's table.fields.additional.placement: columns
// placed as headers, in the envelope beside the payload, or as the partition.
func (c *conversion) placeColumns() {
	if v := c.opt("table.fields.additional.placement"); v != "" {
		headers, partition, notes, envelope := placement(v)
		for _, n := range notes {
			c.b.WriteString("# table.fields.additional.placement " + n + "\n")
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
			valueConv, valueSchemas := c.convs["value"], false
			for _, g := range c.globals {
				valueSchemas = valueSchemas || (g[0] == "value-converter-schemas-enable" && g[1] == "true")
			}
			// The registry converters register the envelope struct's schema, name and all.
			valueSchemas = valueSchemas || valueConv == "avro" || valueConv == "protobuf" || valueConv == "json-schema"
			// With schemas the envelope struct is named after the change event's value
			// schema, topic.prefix.schema.table.Value (EventRouterDelegate.getSchemaName);
			// database.server.name is topic.prefix before Debezium 2.
			prefixKey := "topic.prefix"
			if _, ok := c.props[prefixKey]; !ok {
				prefixKey = "database.server.name"
			}
			prefix, hasPrefix := c.props[prefixKey]
			switch {
			case valueConv == "bytearray":
				for _, e := range envelope {
					c.differs("transforms."+c.router+".table.fields.additional.placement", e,
						"walrelay writes an envelope with value-converter json or string; Connect's byte array converter refuses a struct")
				}
			case valueSchemas && !hasPrefix:
				for _, e := range envelope {
					c.differs("transforms."+c.router+".table.fields.additional.placement", e,
						"with value schemas the envelope's schema is named after topic.prefix, which the connector does not set")
				}
			default:
				if valueSchemas {
					c.used[prefixKey] = true
					c.globals = append(c.globals, [2]string{"topic-prefix", prefix})
				}
				c.fields = append(c.fields, [2]string{"column-envelope", outbox.FormatHeaderColumns(fieldsOf)})
			}
		}
		if headers != "" {
			c.fields = append(c.fields, [2]string{"column-headers", headers})
		}
		if partition != "" {
			c.fields = append(c.fields, [2]string{"column-partition", partition})
		}
	}
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
