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
	raw := ParseProperties(string(data))
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
