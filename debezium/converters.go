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
}

// converters sets the record settings that come from the key and value converters.
// Debezium's router sets the id header alone; placed headers follow it.
func (c *conversion) converters() {
	c.globals = [][2]string{{"record-headers", "debezium"}}
	c.convs = map[string]string{}
	c.registry = map[string]string{}
	for _, side := range []string{"key", "value"} {
		conv, schemas := c.converter(side)
		c.convs[side] = conv
		c.globals = append(c.globals, [2]string{side + "-converter", conv})
		if schemas {
			c.globals = append(c.globals, [2]string{side + "-converter-schemas-enable", "true"})
		}
	}
	c.writeRegistry()
	c.serverHeaders()
}

// serverHeaders notes that Debezium Server converts each header with its header
// format (debezium.format.header, json unless set: JsonConverter, with schemas
// unless debezium.format.header.schemas.enable=false; debezium-embedded
// ConvertingEngineBuilder.createHeaderConverter) before its sink sends it, so the
// router's id header is a JSON document where walrelay writes the id's text, as
// Kafka Connect's SimpleHeaderConverter does.
func (c *conversion) serverHeaders() {
	if _, server := c.props["debezium.sink.type"]; !server {
		return
	}
	format, ok := c.use("debezium.format.header")
	if !ok {
		format = "json (the default)"
	}
	for k := range c.props {
		if strings.HasPrefix(k, "debezium.format.header.") {
			c.used[k] = true
		}
	}
	c.differs("debezium.format.header", format, "Debezium Server writes each header, the router's id too, with its header format's "+
		"converter (JSON); walrelay writes the id's text, as Kafka Connect's SimpleHeaderConverter does")
}

// converter reads side's (key or value) converter from the connector, else from the
// workers in order, and says which walrelay converter writes the same bytes and
// whether with schemas (JsonConverter's schemas.enable, true unless set false). A
// converter from a worker is a comment naming where it came from. A converter
// walrelay does not have is a difference, and string is written.
func (c *conversion) converter(side string) (conv string, schemas bool) {
	key := side + ".converter"
	var lookup settingLookup = func(k string) (string, string, bool) {
		if v, ok := c.props[k]; ok {
			c.used[k] = true
			return v, k, true
		}
		for _, w := range c.workers {
			if v, ok := w.Props[k]; ok {
				return v, k + " (" + w.from(k) + ")", true
			}
		}
		return "", k, false
	}
	class, from, ok := lookup(key)
	if !ok {
		// namesConverters refused a configuration without it; a worker that
		// names one side only is --key-converter or --value-converter alone.
		fmt.Fprintf(&c.b, "# %s: set neither in the connector nor by the worker; walrelay writes the %s as StringConverter does\n", key, side)
		return "string", false
	}
	if from != key {
		fmt.Fprintf(&c.b, "# %s=%s: from %s\n", key, strings.TrimSpace(class), strings.TrimSuffix(strings.TrimPrefix(from, key+" ("), ")"))
	}
	if binaryConverters[strings.TrimSpace(class)] {
		return c.binaryConverter(side, from, strings.TrimSpace(class), lookup)
	}
	if conv, ok := registryConverters[strings.TrimSpace(class)]; ok {
		return c.registryConverter(side, conv, strings.TrimSpace(class)), false
	}
	if conv, ok := apicurioConverters[strings.TrimSpace(class)]; ok {
		return c.apicurioConverter(side, conv, strings.TrimSpace(class)), false
	}
	conv, known := converterClasses[strings.TrimSpace(class)]
	if !known {
		c.differs(from, class, "walrelay writes "+side+"s as StringConverter, JsonConverter, ByteArrayConverter, "+
			"ByteBufferConverter, BinaryDataConverter, Confluent's AvroConverter, ProtobufConverter and JsonSchemaConverter, "+
			"and Apicurio's AvroConverter and ProtobufConverter in the Confluent format do, no other")
		return "string", false
	}
	return conv, jsonSchemas(conv, key, lookup)
}

// settingLookup finds a converter option in the connector, else the workers:
// its value, the name it is shown under, and whether it is set.
type settingLookup func(k string) (value, from string, ok bool)

// jsonSchemas is JsonConverter's schemas.enable under prefix (key.converter, ...):
// true unless set false (Kafka's JsonConverterConfig).
func jsonSchemas(conv, prefix string, lookup settingLookup) bool {
	s, _, ok := lookup(prefix + ".schemas.enable")
	return conv == "json" && (!ok || strings.TrimSpace(s) != "false")
}

// namesConverters refuses a connector that names no converter where nothing says
// which worker runs it: its records are written by the worker's converters, which
// the connector's file does not show.
func namesConverters(name string, props map[string]string, workers []*Worker) error {
	var missing []string
	for _, k := range []string{"key.converter", "value.converter"} {
		named := props[k] != ""
		for _, w := range workers {
			named = named || w.Props[k] != ""
		}
		if !named {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s names no %s, so the Kafka Connect worker's converters write its records, and nothing says which "+
		"they are: give --worker FILE (the worker's properties, a Strimzi KafkaConnect, or an environment file of Debezium's "+
		"connect image with its KEY_CONVERTER, VALUE_CONVERTER and CONNECT_* variables), or --key-converter and --value-converter "+
		"(string, json, bytearray, avro, protobuf or json-schema) with --key-converter-schemas-enable and --value-converter-schemas-enable for json",
		name, strings.Join(missing, " and "))
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
		if _, server := c.props["debezium.sink.type"]; server {
			// Debezium Server's Kafka sink sends each record without a timestamp
			// (debezium-server KafkaChangeConsumer: new ProducerRecord(topic, null,
			// null, ...)), so the producer stamps it when it sends, as publish does.
			c.b.WriteString("# table.field.event.timestamp: Debezium Server's Kafka sink leaves the record timestamp to the producer, " +
				"as record-timestamp publish (the default) does\n")
			return
		}
		c.globals = append(c.globals, [2]string{"record-timestamp", "created-at"})
	}
}
