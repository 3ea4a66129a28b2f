package debezium

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// registryConverters are Confluent's Schema Registry converters, by the value of
// walrelay's key-converter and value-converter that writes the same framing (a
// magic byte and a 4-byte schema id before the encoded record).
var registryConverters = map[string]string{
	"io.confluent.connect.avro.AvroConverter":         "avro",
	"io.confluent.connect.protobuf.ProtobufConverter": "protobuf",
	"io.confluent.connect.json.JsonSchemaConverter":   "json-schema",
}

// subjectStrategies are Confluent's subject name strategies walrelay has, by
// the value of its key- and value-subject-name-strategy
// (io.confluent.kafka.serializers.subject).
var subjectStrategies = map[string]string{
	"io.confluent.kafka.serializers.subject.TopicNameStrategy":       "topic",
	"io.confluent.kafka.serializers.subject.RecordNameStrategy":      "record",
	"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy": "topic-record",
}

// registrySettings are walrelay's registry settings in the order they are
// written; all but the subject strategies hold for both sides.
var registrySettings = []string{
	"schema-registry-url", "schema-registry-tls-ca-file", "schema-registry-tls-cert-file", "schema-registry-tls-key-file",
	"key-subject-name-strategy", "value-subject-name-strategy",
	"schema-registry-auto-register", "schema-registry-use-latest-version", "schema-registry-normalize",
}

// The environment variables the registry's secrets go in: settings are read from
// WALRELAY_NAME, so a secret need not be in the file.
const (
	basicAuthEnv = "WALRELAY_SCHEMA_REGISTRY_BASIC_AUTH"
	tokenEnv     = "WALRELAY_SCHEMA_REGISTRY_TOKEN"
)

// registryUnchanged are the registry client's options that change no record:
// caches, timeouts and retries, which walrelay's client has its own of
// (AbstractKafkaSchemaSerDeConfig, SchemaRegistryClientConfig, AbstractDataConfig).
var registryUnchanged = map[string]bool{
	"schemas.cache.config": true, "max.schemas.per.subject": true, "latest.cache.size": true, "latest.cache.ttl.sec": true,
	"http.connect.timeout.ms": true, "http.read.timeout.ms": true, "max.retries": true, "retries.wait.ms": true,
	"retries.max.wait.ms": true, "schema.registry.url.randomize": true, "url.randomize": true, "missing.cache.size": true,
	"missing.id.cache.ttl.sec": true, "missing.version.cache.ttl.sec": true, "missing.schema.cache.ttl.sec": true,
	"use.apache.http.client": true,
	// Apicurio's resolver (SchemaResolverConfig): how long and how often it asks.
	"apicurio.registry.check-period-ms": true, "apicurio.registry.retry-count": true, "apicurio.registry.retry-backoff-ms": true,
}

// registryDefaults are the converters' options that change the schema or the
// bytes, with the default walrelay writes as; set to another value they are a
// difference. Common to the three (AbstractKafkaSchemaSerDeConfig, AbstractDataConfig):
var registryDefaults = map[string]string{
	"use.schema.id":                "-1",
	"id.compatibility.strict":      "true",
	"latest.compatibility.strict":  "true",
	"key.schema.id.serializer":     "io.confluent.kafka.serializers.schema.id.PrefixSchemaIdSerializer",
	"value.schema.id.serializer":   "io.confluent.kafka.serializers.schema.id.PrefixSchemaIdSerializer",
	"context.name.strategy":        "io.confluent.kafka.serializers.context.NullContextNameStrategy",
	"propagate.schema.tags":        "false",
	"schema.reflection":            "false",
	"generalized.sum.type.support": "false",
	"ignore.default.for.nullables": "false",
}

// formatDefaults are each format's own (AvroDataConfig, ProtobufDataConfig,
// JsonSchemaDataConfig).
var formatDefaults = map[string]map[string]string{
	"avro": {"enhanced.avro.schema.support": "false", "scrub.invalid.names": "false", "connect.meta.data": "true",
		"allow.optional.map.keys": "false", "flatten.singleton.unions": "true", "discard.type.doc.default": "false"},
	"protobuf": {"enhanced.protobuf.schema.support": "false", "scrub.invalid.names": "false", "int.for.enums": "false",
		"optional.for.nullables": "false", "optional.for.proto2": "true", "wrapper.for.nullables": "false",
		"wrapper.for.raw.primitives": "true", "generate.struct.for.nulls": "false", "generate.index.for.unions": "true",
		"flatten.unions": "false"},
	"json-schema": {"object.additional.properties": "true", "use.optional.for.nonrequired": "false",
		"ignore.modern.dialects": "false", "decimal.format": "BASE64", "flatten.singleton.unions": "true",
		"preserve.additional.properties": "false"},
}

// converterOptions are the options side's converter is configured with, by
// name under side.converter., and the name each is shown under. Kafka Connect
// configures a converter with the options of the configuration that names its
// class (Plugins.newConverter): the connector's when it sets side.converter,
// else the worker's, whose platform defaults and --key-converter/--value-converter
// stand in for it. A connector option under the prefix that Connect therefore
// does not read is a comment saying so.
func (c *conversion) converterOptions(side string) (opts, names map[string]string) {
	prefix := side + ".converter."
	opts, names = map[string]string{}, map[string]string{}
	if _, ok := c.props[side+".converter"]; ok {
		for k, v := range c.props {
			if rest, ok := strings.CutPrefix(k, prefix); ok {
				c.used[k] = true
				opts[rest], names[rest] = v, k
			}
		}
		return opts, names
	}
	for i, w := range c.workers {
		if w.Props[side+".converter"] == "" {
			continue
		}
		for _, o := range c.workers[i:] {
			for k, v := range o.Props {
				if rest, ok := strings.CutPrefix(k, prefix); ok {
					if _, seen := opts[rest]; !seen {
						opts[rest], names[rest] = v, k+" ("+o.from(k)+")"
					}
				}
			}
		}
		break
	}
	var ignored []string
	for k := range c.props {
		if strings.HasPrefix(k, prefix) {
			ignored = append(ignored, k)
		}
	}
	sort.Strings(ignored)
	for _, k := range ignored {
		c.used[k] = true
		comment(&c.b, k, c.props[k], "Kafka Connect does not read it: the connector does not set "+side+
			".converter, so the worker's converter is configured with the worker's options")
	}
	return opts, names
}

// registry is one side's converter being mapped onto walrelay's registry
// settings: the options it is configured with, and which of them were read.
type registry struct {
	c     *conversion
	side  string
	conv  string
	class string
	opts  map[string]string
	names map[string]string
	read  map[string]bool
}

func (c *conversion) newRegistry(side, conv, class string) *registry {
	opts, names := c.converterOptions(side)
	return &registry{c: c, side: side, conv: conv, class: class, opts: opts, names: names, read: map[string]bool{}}
}

// get returns option k, marking it read.
func (r *registry) get(k string) (string, bool) {
	v, ok := r.opts[k]
	if ok {
		r.read[k] = true
	}
	return strings.TrimSpace(v), ok
}

// differs is a difference naming option k as it was written.
func (r *registry) differs(k, reason string) {
	r.read[k] = true
	r.c.differs(r.names[k], r.opts[k], reason)
}

// set records walrelay's setting name = value, read from option k ("" none: a
// default). The settings other than the subject strategies are shared by both
// sides: a side that needs another value than the other's is a difference.
func (r *registry) set(name, value, k string) {
	if prev, ok := r.c.registry[name]; ok {
		if prev != value {
			what := "its default, " + value
			if k != "" {
				what = value
			}
			reason := fmt.Sprintf("walrelay has one %s for both converters; the %s converter's is %s, the other's %s",
				name, r.side, what, prev)
			if k != "" {
				r.differs(k, reason)
			} else {
				r.c.differs(r.side+".converter", r.class, reason)
			}
		}
		return
	}
	r.c.registry[name] = value
}

// boolean reads a Kafka Connect BOOLEAN option ("true" or "false", any case):
// ok false after a difference when it is neither, which Connect refuses.
func (r *registry) boolean(k string, def bool) (bool, bool) {
	v, set := r.get(k)
	if !set {
		return def, true
	}
	switch strings.ToLower(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	r.differs(k, "not true or false, which Kafka Connect refuses")
	return def, false
}

// registryConverter maps Confluent's AvroConverter, ProtobufConverter or
// JsonSchemaConverter with its options (AbstractKafkaSchemaSerDeConfig,
// SchemaRegistryClientConfig and the format's data config) onto walrelay's
// converter conv and its registry settings; what walrelay cannot reproduce is a
// difference naming the option.
func (c *conversion) registryConverter(side, conv, class string) string {
	r := c.newRegistry(side, conv, class)
	urls, ok := r.get("schema.registry.url")
	if !ok || len(splitList(urls)) == 0 {
		fmt.Fprintf(&c.b, "# %s.converter.schema.registry.url: not set where %s is configured (Kafka Connect requires it); "+
			"set schema-registry-url here or in WALRELAY_SCHEMA_REGISTRY_URL\n", side, class)
	} else {
		r.urls("schema.registry.url", urls)
	}
	r.auth()
	r.tls()
	r.strategy()
	r.flags("auto.register.schemas", "use.latest.version", "normalize.schemas")
	r.rest(class)
	return conv
}

// urls writes schema-registry-url from a comma-separated list of URLs, without
// the user and password any of them carries: those are the basic auth
// credentials when basic.auth.credentials.source is URL (Confluent's default).
func (r *registry) urls(k, list string) {
	var out []string
	userInfo := false
	for _, raw := range splitList(list) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			r.differs(k, "walrelay reaches a registry over http or https only, at a URL with a host")
			return
		}
		if u.User != nil {
			userInfo = true
			u.User = nil
		}
		out = append(out, u.String())
	}
	r.set("schema-registry-url", strings.Join(out, ","), k)
	if userInfo {
		source, _ := r.get("basic.auth.credentials.source")
		if source == "" || strings.EqualFold(source, "URL") {
			fmt.Fprintf(&r.c.b, "# %s: the user and password in it are not copied; put user:password in %s\n",
				r.names[k], basicAuthEnv)
		}
	}
}

// auth maps the basic.auth.* and bearer.auth.* options. Confluent's client
// (RestService.configure) takes basic.auth.credentials.source or
// bearer.auth.credentials.source, never both; walrelay sends a user and password
// from USER_INFO or the URL, or a static token. Secrets are not copied: they go
// in the environment.
func (r *registry) auth() {
	basic, hasBasic := r.get("basic.auth.credentials.source")
	bearer, hasBearer := r.get("bearer.auth.credentials.source")
	if hasBasic && hasBearer && basic != "" && bearer != "" {
		r.differs("bearer.auth.credentials.source", "set beside basic.auth.credentials.source, which Confluent's client refuses")
		return
	}
	for _, k := range []string{"basic.auth.user.info", "schema.registry.basic.auth.user.info"} {
		if _, ok := r.get(k); ok {
			if !strings.EqualFold(basic, "USER_INFO") {
				comment(&r.c.b, r.names[k], r.opts[k], "read only with basic.auth.credentials.source=USER_INFO")
				continue
			}
			fmt.Fprintf(&r.c.b, "# %s=***: not copied; put user:password in %s (schema-registry-basic-auth)\n", r.names[k], basicAuthEnv)
		}
	}
	switch {
	case hasBasic && basic != "" && !strings.EqualFold(basic, "URL") && !strings.EqualFold(basic, "USER_INFO"):
		r.differs("basic.auth.credentials.source", "walrelay sends basic auth from the URL or from user:password "+
			"(USER_INFO), no other source; set USER_INFO with basic.auth.user.info")
	case strings.EqualFold(basic, "USER_INFO"):
		_, a := r.opts["basic.auth.user.info"]
		_, b := r.opts["schema.registry.basic.auth.user.info"]
		if !a && !b {
			fmt.Fprintf(&r.c.b, "# %s: USER_INFO without basic.auth.user.info; put user:password in %s\n",
				r.names["basic.auth.credentials.source"], basicAuthEnv)
		}
	}
	var bearerKeys []string
	for k := range r.opts {
		if strings.HasPrefix(k, "bearer.auth.") && k != "bearer.auth.credentials.source" {
			bearerKeys = append(bearerKeys, k)
		}
	}
	sort.Strings(bearerKeys)
	if !hasBearer || bearer == "" {
		for _, k := range bearerKeys {
			r.read[k] = true
			comment(&r.c.b, r.names[k], r.opts[k], "read only with bearer.auth.credentials.source")
		}
		return
	}
	if !strings.EqualFold(bearer, "STATIC_TOKEN") {
		r.differs("bearer.auth.credentials.source", "walrelay sends a static token (STATIC_TOKEN with bearer.auth.token), "+
			"no other source")
		return
	}
	for _, k := range bearerKeys {
		if k == "bearer.auth.token" {
			r.read[k] = true
			fmt.Fprintf(&r.c.b, "# %s=***: not copied; put the token in %s (schema-registry-token)\n", r.names[k], tokenEnv)
			continue
		}
		r.differs(k, "walrelay sends the token alone, no other bearer.auth option")
	}
}

// tls maps schema.registry.ssl.*: walrelay reads PEM files, so a trust store or
// key store of type PEM at a location becomes the CA file, or the certificate
// and key files (the one file holds both); any other store, or PEM given inline,
// is a difference saying to convert it.
func (r *registry) tls() {
	const p = "schema.registry.ssl."
	if loc, ok := r.get(p + "truststore.location"); ok && loc != "" {
		typ, _ := r.get(p + "truststore.type")
		if strings.EqualFold(typ, "PEM") {
			r.set("schema-registry-tls-ca-file", loc, p+"truststore.location")
		} else {
			r.differs(p+"truststore.location", "a trust store of type "+orDefault(typ, "JKS")+"; walrelay reads PEM: "+
				"export its certificates to a PEM file and set schema-registry-tls-ca-file")
		}
	}
	if loc, ok := r.get(p + "keystore.location"); ok && loc != "" {
		typ, _ := r.get(p + "keystore.type")
		if strings.EqualFold(typ, "PEM") {
			r.set("schema-registry-tls-cert-file", loc, p+"keystore.location")
			r.set("schema-registry-tls-key-file", loc, p+"keystore.location")
			if _, ok := r.get(p + "key.password"); ok {
				r.differs(p+"key.password", "an encrypted private key; walrelay reads an unencrypted PEM key: decrypt it "+
					"(openssl pkey) and set schema-registry-tls-key-file")
			}
		} else {
			r.differs(p+"keystore.location", "a key store of type "+orDefault(typ, "JKS")+"; walrelay reads PEM: export "+
				"the certificate and key to PEM files and set schema-registry-tls-cert-file and schema-registry-tls-key-file")
		}
	}
	for _, k := range []string{"truststore.certificates", "keystore.certificate.chain", "keystore.key"} {
		if _, ok := r.get(p + k); ok {
			r.differs(p+k, "PEM given inline; walrelay reads files: write it to one and set the schema-registry-tls-* setting")
		}
	}
	if v, ok := r.get(p + "endpoint.identification.algorithm"); ok && v == "" {
		r.differs(p+"endpoint.identification.algorithm", "turns off host name verification, which walrelay always does")
	}
	for k := range r.opts {
		if strings.HasPrefix(k, p) && !r.read[k] {
			r.read[k] = true
			comment(&r.c.b, r.names[k], r.opts[k], "walrelay's TLS uses Go's defaults and the schema-registry-tls-* files")
		}
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def + " (the default)"
	}
	return v
}

// strategy maps the side's subject name strategy: the converter reads
// key.subject.name.strategy for keys and value.subject.name.strategy for values
// (AbstractKafkaSchemaSerDe), the other is not read.
func (r *registry) strategy() {
	other := map[string]string{"key": "value", "value": "key"}[r.side]
	if _, ok := r.get(other + ".subject.name.strategy"); ok {
		comment(&r.c.b, r.names[other+".subject.name.strategy"], r.opts[other+".subject.name.strategy"],
			"the "+r.side+" converter reads "+r.side+".subject.name.strategy only")
	}
	k := r.side + ".subject.name.strategy"
	v, ok := r.get(k)
	if !ok || v == "" {
		// The newest serializers' default, AssociatedNameStrategy, falls back to TopicNameStrategy
		// where the registry associates no subject with the topic.
		r.set(r.side+"-subject-name-strategy", "topic", "")
		return
	}
	s, known := subjectStrategies[v]
	if !known {
		r.differs(k, "walrelay names subjects by TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy, no other")
		return
	}
	// Confluent's record-based strategies name the subject after the schema's
	// record (RecordNameStrategy.getRecordName) and throw for a schema without one:
	// Avro's and JSON Schema's only for the router's envelope struct, as walrelay
	// refuses at start (docs/configuration.md, "Schema registry").
	if s != "topic" && r.conv != "protobuf" && !r.recordNamed() {
		r.differs(k, "Confluent's serializer names that subject after the "+r.side+"'s record and throws for a "+r.side+
			" without one (\"the message "+r.side+" must only be a record schema\"), and this "+r.side+" is "+
			map[string]string{"key": "the aggregate id, a string", "value": "the payload, which has none (only the router's envelope struct does)"}[r.side]+
			"; walrelay refuses it at start: use TopicNameStrategy")
		return
	}
	r.set(r.side+"-subject-name-strategy", s, k)
}

// recordNamed says whether the side's schema is a record for Avro and JSON Schema:
// the value when the router places fields in its envelope, never the key.
func (r *registry) recordNamed() bool {
	return r.side == "value" && strings.Contains(r.c.opt("table.fields.additional.placement"), ":envelope")
}

// flags maps the boolean options onto walrelay's settings of the same meaning,
// written with Confluent's defaults where unset.
func (r *registry) flags(keys ...string) {
	setting := map[string]string{"auto.register.schemas": "schema-registry-auto-register",
		"use.latest.version": "schema-registry-use-latest-version", "normalize.schemas": "schema-registry-normalize"}
	def := map[string]bool{"auto.register.schemas": true}
	for _, k := range keys {
		v, ok := r.boolean(k, def[k])
		if !ok {
			continue
		}
		from := ""
		if _, set := r.opts[k]; set {
			from = k
		}
		r.set(setting[k], fmt.Sprint(v), from)
	}
}

// rest reports the options no step read: a comment where they change no
// record or hold their default, else a difference.
func (r *registry) rest(class string) {
	var keys []string
	for k := range r.opts {
		if !r.read[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(r.opts[k])
		def, hasDefault := registryDefaults[k]
		if !hasDefault {
			def, hasDefault = formatDefaults[r.conv][k]
		}
		switch {
		case registryUnchanged[k]:
			note(&r.c.b, r.names[k], r.opts[k], "changes no record; walrelay's registry client has its own caches, timeouts and retries")
		case hasDefault && strings.EqualFold(v, def):
			note(&r.c.b, r.names[k], r.opts[k], "the converter's default, which walrelay writes as")
		case hasDefault:
			r.differs(k, "walrelay writes as "+class+" does with its default, "+def)
		default:
			r.differs(k, "an option of "+class+" walrelay does not have")
		}
	}
}

// writeRegistry adds the registry settings the converters chose to the record
// settings, in registrySettings' order.
func (c *conversion) writeRegistry() {
	for _, name := range registrySettings {
		if v, ok := c.registry[name]; ok {
			c.globals = append(c.globals, [2]string{name, v})
		}
	}
}
