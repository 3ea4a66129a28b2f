package debezium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// debeziumProperties reads Kafka Connect JSON (with or without the name/config
// envelope) or Debezium Server properties into connector keys: debezium.source. and
// debezium. are stripped, so both forms give connector.class, transforms.NAME.type, ...
// Debezium Server's debezium.format.* options become its worker (serverWorker);
// worker is nil for Kafka Connect's forms.
func debeziumProperties(data []byte) (props map[string]string, worker *Worker, err error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var doc map[string]any
		if err := json.Unmarshal(trimmed, &doc); err != nil {
			return nil, nil, fmt.Errorf("not valid JSON (%v); give Kafka Connect's connector JSON or a Debezium Server .properties file", err)
		}
		props = map[string]string{}
		if cfg, ok := doc["config"].(map[string]any); ok {
			for k, v := range cfg {
				props[k] = jsonText(v)
			}
			if n, ok := doc["name"]; ok {
				props["name"] = jsonText(n)
			}
			return props, nil, nil
		}
		for k, v := range doc {
			props[k] = jsonText(v)
		}
		return props, nil, nil
	}
	raw := ParseProperties(string(data))
	if _, server := raw["debezium.source.connector.class"]; !server {
		return raw, nil, nil // a Kafka Connect worker-style properties file
	}
	props = map[string]string{}
	for k, v := range raw {
		switch {
		case strings.HasPrefix(k, "debezium.source."):
			props[strings.TrimPrefix(k, "debezium.source.")] = v
		case k == "debezium.sink.kafka.producer.bootstrap.servers":
			props["bootstrap.servers"] = v
		case k == "debezium.transforms" || strings.HasPrefix(k, "debezium.transforms."):
			props[strings.TrimPrefix(k, "debezium.")] = v
		case k == "debezium.format.header" || strings.HasPrefix(k, "debezium.format.header."):
			props[k] = v // the headers' format: serverHeaders'
		case k == "debezium.format" || strings.HasPrefix(k, "debezium.format."):
			// the converters: serverWorker's
		default:
			props[k] = v // kept whole, so its comment names the key as written
		}
	}
	return props, serverWorker(raw), nil
}

// serverFormats are the converters Debezium Server's formats write the key and
// value with (debezium-embedded ConvertingEngineBuilder.createConverter); a
// format not here is written by none of Kafka Connect's converters.
var serverFormats = map[string]string{
	"json":          jsonConverterClass,
	"jsonbytearray": jsonConverterClass,
	"cloudevents":   "io.debezium.converters.CloudEventsConverter",
	"avro":          "io.confluent.connect.avro.AvroConverter",
	"protobuf":      "io.confluent.connect.protobuf.ProtobufConverter",
}

// serverApicurio are the converters Debezium Server's formats write with when
// their options set apicurio.registry.url (ConvertingEngineBuilder.createConverter):
// Apicurio's, in place of Confluent's and Kafka's. Debezium Server has no JSON
// Schema format: debezium.format.value=jsonschema is an unknown format, which it
// refuses (DebeziumSerializationProducer.getFormat).
var serverApicurio = map[string]string{
	"avro":          "io.apicurio.registry.utils.converter.AvroConverter",
	"json":          "io.apicurio.registry.utils.converter.ExtJsonConverter",
	"jsonbytearray": "io.apicurio.registry.utils.converter.ExtJsonConverter",
}

// serverWorker is what Debezium Server's debezium.format.* options make of the
// converters (debezium-server DebeziumServer: getFormat, populateEngineProperties):
// debezium.format.key and .value choose the format, json unless set;
// debezium.format.key.NAME and .value.NAME are the converter's option NAME, and
// debezium.format.NAME is both sides' where the side sets none.
func serverWorker(raw map[string]string) *Worker {
	props := map[string]string{}
	for k, v := range raw {
		rest, ok := strings.CutPrefix(k, "debezium.format.")
		if !ok || rest == "key" || rest == "value" || rest == "header" {
			continue
		}
		if side, opt, ok := strings.Cut(rest, "."); ok && (side == "key" || side == "value") {
			props[side+".converter."+opt] = v
			continue
		}
		for _, side := range []string{"key", "value"} {
			if _, set := raw["debezium.format."+side+"."+rest]; !set {
				props[side+".converter."+rest] = v
			}
		}
	}
	defaulted := map[string]bool{}
	for _, side := range []string{"key", "value"} {
		format := strings.TrimSpace(raw["debezium.format."+side])
		if format == "" {
			format = "json"
			defaulted[side+".converter"] = true
		}
		class, ok := serverFormats[format]
		if !ok {
			class = "debezium.format." + side + "=" + format
		}
		if apicurio, set := serverApicurio[format]; set && props[side+".converter.apicurio.registry.url"] != "" {
			class = apicurio // Debezium's choice when the format's options name an Apicurio registry
		}
		if c := props[side+".converter.class"]; c != "" && ok {
			class = c // the format's converter, named by its class option
		}
		delete(props, side+".converter.class")
		props[side+".converter"] = class
	}
	return &Worker{Props: props, Source: "Debezium Server's debezium.format.key and .value", Defaulted: defaulted,
		DefaultSource: "Debezium Server's default format, json, where debezium.format.key or .value is not set"}
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ParseProperties reads Java properties (a Kafka Connect worker's file): key=value or key: value, # and ! comments,
// a trailing backslash continues the line.
func ParseProperties(text string) map[string]string {
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
