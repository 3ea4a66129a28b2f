package debezium

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Worker is where a connector that names no converter gets them from: the Kafka
// Connect worker that runs it, or the platform around it. Props are worker
// properties (key.converter, value.converter.schemas.enable, ...), the platform's
// defaults included; Source names them in comments and differences, and
// DefaultSource the defaults, Defaulted's keys.
type Worker struct {
	Props         map[string]string
	Source        string
	Defaulted     map[string]bool
	DefaultSource string
}

// from names where the worker's property k comes from.
func (w *Worker) from(k string) string {
	if w.Defaulted[k] {
		return w.DefaultSource
	}
	return w.Source
}

// The converter class a platform writes when the worker names none.
const jsonConverterClass = "org.apache.kafka.connect.json.JsonConverter"

// strimziDefaults are the worker properties Strimzi's operator adds to a
// KafkaConnect's spec.config where it sets none (strimzi/strimzi-kafka-operator
// cluster-operator/.../model/KafkaConnectConfiguration.java, DEFAULTS): both
// converters are JsonConverter, whose schemas.enable defaults to true.
var strimziDefaults = map[string]string{"key.converter": jsonConverterClass, "value.converter": jsonConverterClass}

// imageDefaults are the converters of Debezium's Kafka Connect image
// (quay.io/debezium/connect) when its environment sets none
// (debezium/container-images connect-base/*/docker-entrypoint.sh:
// ${KEY_CONVERTER:=org.apache.kafka.connect.json.JsonConverter}, likewise VALUE_CONVERTER).
var imageDefaults = map[string]string{"KEY_CONVERTER": jsonConverterClass, "VALUE_CONVERTER": jsonConverterClass}

// ReadWorker reads --worker FILE: a Strimzi KafkaConnect (YAML), an environment
// file of Debezium's connect image (KEY_CONVERTER, VALUE_CONVERTER, CONNECT_*
// variables), or a Kafka Connect worker's properties, which Kafka requires to name
// both converters (WorkerConfig defines key.converter and value.converter without
// a default).
func ReadWorker(name string, data []byte) (*Worker, error) {
	if bytes.Contains(data, []byte("kafka.strimzi.io/")) {
		if w, ok, err := strimziWorkerFile(data); ok || err != nil {
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if w == nil {
				return nil, fmt.Errorf("%s: Strimzi YAML without a KafkaConnect resource; give the KafkaConnect that runs the connector", name)
			}
			return w, nil
		}
	}
	if env, ok := imageEnvironment(data); ok {
		return imageWorker(env), nil
	}
	props := ParseProperties(string(data))
	var missing []string
	for _, k := range []string{"key.converter", "value.converter"} {
		if strings.TrimSpace(props[k]) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: a Kafka Connect worker's properties without %s, which Kafka Connect requires (it has no default); "+
			"give the properties file the worker runs with, a Strimzi KafkaConnect, or an environment file of Debezium's connect image",
			name, strings.Join(missing, " and "))
	}
	return &Worker{Props: props, Source: "the worker's properties"}, nil
}

// strimziWorker is a KafkaConnect's spec.config with Strimzi's defaults under it.
func strimziWorker(config map[string]string) *Worker {
	props, defaulted := map[string]string{}, map[string]bool{}
	for k, v := range strimziDefaults {
		props[k], defaulted[k] = v, true
	}
	for k, v := range config {
		props[k] = v
		delete(defaulted, k)
	}
	return &Worker{Props: props, Source: "the Strimzi KafkaConnect", Defaulted: defaulted,
		DefaultSource: "Strimzi's default for a KafkaConnect that sets none"}
}

var envName = regexp.MustCompile(`^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$`)

// imageEnvironment reads an environment file (NAME=value lines, # comments, an
// optional export and quotes); ok is false when a line is not one, or when no
// variable is one the connect image reads.
func imageEnvironment(data []byte) (map[string]string, bool) {
	env := map[string]string{}
	image := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		m := envName.FindStringSubmatch(line)
		if m == nil {
			return nil, false
		}
		v := strings.TrimSpace(m[2])
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		env[m[1]] = v
		image = image || strings.HasPrefix(m[1], "CONNECT_") || imageDefaults[m[1]] != ""
	}
	return env, image
}

// imageWorker is the worker properties Debezium's connect image writes from its
// environment (docker-entrypoint.sh): KEY_CONVERTER and VALUE_CONVERTER, with
// their defaults, become CONNECT_KEY_CONVERTER and CONNECT_VALUE_CONVERTER, and
// each CONNECT_NAME becomes the property name, lower case, _ read as '.'.
func imageWorker(env map[string]string) *Worker {
	defaulted := map[string]bool{}
	for k, v := range imageDefaults {
		if env[k] == "" {
			env[k] = v
			defaulted[strings.ToLower(strings.ReplaceAll(k, "_", "."))] = true
		}
	}
	props := map[string]string{}
	for k, v := range env {
		if rest, ok := strings.CutPrefix(k, "CONNECT_"); ok {
			props[strings.ReplaceAll(strings.ToLower(rest), "_", ".")] = v
		}
	}
	// The entrypoint exports CONNECT_KEY_CONVERTER=$KEY_CONVERTER over any set.
	props["key.converter"] = env["KEY_CONVERTER"]
	props["value.converter"] = env["VALUE_CONVERTER"]
	return &Worker{Props: props, Source: "the environment of Debezium's connect image", Defaulted: defaulted,
		DefaultSource: "the default of Debezium's connect image, whose environment sets none"}
}

// walrelayConverterClasses are the Connect converters walrelay's converter
// settings write as (record.ParseConverter's names).
var walrelayConverterClasses = map[string]string{
	"string":      "org.apache.kafka.connect.storage.StringConverter",
	"json":        jsonConverterClass,
	"bytearray":   "org.apache.kafka.connect.converters.ByteArrayConverter",
	"avro":        "io.confluent.connect.avro.AvroConverter",
	"protobuf":    "io.confluent.connect.protobuf.ProtobufConverter",
	"json-schema": "io.confluent.connect.json.JsonSchemaConverter",
}

// ConverterFlags is the worker --key-converter, --value-converter and their
// schemas-enable flags describe: values are walrelay's converter names (string,
// json, bytearray, and Confluent's avro, protobuf and json-schema, whose registry
// options are then the worker's, if --worker is given); schemas nil where the
// flag is not given. nil when no flag is.
func ConverterFlags(key, value string, keySchemas, valueSchemas *bool) (*Worker, error) {
	props := map[string]string{}
	for _, f := range []struct {
		side, name string
		schemas    *bool
	}{{"key", key, keySchemas}, {"value", value, valueSchemas}} {
		if f.name != "" {
			class, ok := walrelayConverterClasses[f.name]
			if !ok {
				return nil, fmt.Errorf("--%s-converter %q: want string, json, bytearray, avro, protobuf or json-schema", f.side, f.name)
			}
			props[f.side+".converter"] = class
		}
		if f.schemas != nil {
			props[f.side+".converter.schemas.enable"] = strconv.FormatBool(*f.schemas)
		}
	}
	if len(props) == 0 {
		return nil, nil
	}
	return &Worker{Props: props, Source: "--key-converter/--value-converter"}, nil
}
