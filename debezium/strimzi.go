package debezium

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// strimziResource is the part of a Strimzi custom resource import-debezium reads:
// a KafkaConnector's spec.class and spec.config (the connector's configuration), a
// KafkaConnect's spec.config (the worker's, where the converters usually are) and
// spec.bootstrapServers.
type strimziResource struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Class            string         `yaml:"class"`
		BootstrapServers string         `yaml:"bootstrapServers"`
		TasksMax         any            `yaml:"tasksMax"`
		Config           map[string]any `yaml:"config"`
	} `yaml:"spec"`
}

// strimziProperties reads Strimzi YAML (apiVersion kafka.strimzi.io/…): the one
// KafkaConnector's configuration as connector properties, and a KafkaConnect in
// the same file as its worker, with Strimzi's defaults (strimziWorker; nil without
// one). ok is false when data is not Strimzi YAML.
func strimziProperties(data []byte) (props map[string]string, worker *Worker, ok bool, err error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] == '{' || !bytes.Contains(data, []byte("kafka.strimzi.io/")) {
		return nil, nil, false, nil
	}
	var connectors []strimziResource
	var brokers string
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var r strimziResource
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			if connectors == nil && worker == nil {
				return nil, nil, false, nil // not YAML: a properties file that mentions Strimzi
			}
			return nil, nil, true, fmt.Errorf("not valid YAML (%v); give the KafkaConnector resource as Strimzi takes it", err)
		}
		if !strings.HasPrefix(r.APIVersion, "kafka.strimzi.io/") {
			continue
		}
		switch r.Kind {
		case "KafkaConnector":
			connectors = append(connectors, r)
		case "KafkaConnect":
			config := map[string]string{}
			brokers = r.Spec.BootstrapServers
			for k, v := range r.Spec.Config {
				config[k] = yamlText(v)
			}
			worker = strimziWorker(config)
		}
	}
	switch len(connectors) {
	case 0:
		if worker == nil {
			return nil, nil, false, nil
		}
		return nil, nil, true, errors.New("Strimzi YAML without a KafkaConnector resource; give the file with the " +
			"KafkaConnector of the outbox connector (kind: KafkaConnector, its configuration under spec.config)")
	case 1:
	default:
		names := make([]string, len(connectors))
		for i, c := range connectors {
			names[i] = c.Metadata.Name
		}
		return nil, nil, true, fmt.Errorf("Strimzi YAML with %d KafkaConnector resources (%s); give a file with the outbox "+
			"connector's alone", len(connectors), strings.Join(names, ", "))
	}
	c := connectors[0]
	props = map[string]string{}
	for k, v := range c.Spec.Config {
		props[k] = yamlText(v)
	}
	// Strimzi keeps the class and the task count out of spec.config.
	if c.Spec.Class != "" {
		props["connector.class"] = c.Spec.Class
	}
	if c.Spec.TasksMax != nil {
		props["tasks.max"] = yamlText(c.Spec.TasksMax)
	}
	if _, set := props["bootstrap.servers"]; !set && brokers != "" {
		props["bootstrap.servers"] = brokers // the KafkaConnect cluster's, where the router's records go
	}
	if c.Metadata.Name != "" {
		props["name"] = c.Metadata.Name
	}
	return props, worker, true, nil
}

// yamlText is a YAML scalar as Kafka Connect reads the value: its text.
func yamlText(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// strimziWorkerFile reads the KafkaConnect of Strimzi YAML given as --worker: its
// spec.config with Strimzi's defaults (nil without one). ok is false when data is
// not Strimzi YAML.
func strimziWorkerFile(data []byte) (w *Worker, ok bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var r strimziResource
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			return w, ok, nil
		} else if err != nil {
			if !ok {
				return nil, false, nil // not YAML: a properties file that mentions Strimzi
			}
			return nil, true, fmt.Errorf("not valid YAML (%v); give the KafkaConnect resource as Strimzi takes it", err)
		}
		if !strings.HasPrefix(r.APIVersion, "kafka.strimzi.io/") {
			continue
		}
		ok = true
		if r.Kind == "KafkaConnect" {
			config := map[string]string{}
			for k, v := range r.Spec.Config {
				config[k] = yamlText(v)
			}
			w = strimziWorker(config)
		}
	}
}
