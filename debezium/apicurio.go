package debezium

import (
	"fmt"
	"net/url"
	"strings"
)

// apicurioConverters are Apicurio Registry's Kafka Connect converters walrelay
// writes as, when they are configured for the Confluent format (apicurioFraming).
// Apicurio's other converters (ExtJsonConverter: the schema id inside a JSON
// document) have no such mode.
var apicurioConverters = map[string]string{
	"io.apicurio.registry.utils.converter.AvroConverter":     "avro",
	"io.apicurio.registry.utils.converter.ProtobufConverter": "protobuf",
}

// apicurioFraming are the options that make Apicurio's serializers frame a
// record as Confluent's do: a magic byte and a 4-byte id of the schema's content
// before the record. By default Apicurio 2.x puts the id in a header
// (apicurio.registry.headers.enabled, true), writes 8-byte ids (DefaultIdHandler)
// and uses the global id (apicurio.registry.use-id, globalId); its
// Confluent-compatible API numbers schemas by content id. Each must be set
// explicitly, since the defaults differ between Apicurio's versions.
var apicurioFraming = []struct {
	key    string
	want   []string
	reason string
}{
	{"apicurio.registry.headers.enabled", []string{"false"},
		"Apicurio writes the schema id in a header unless it is false; walrelay frames the value as Confluent does: set it to false"},
	{"apicurio.registry.use-id", []string{"contentId"},
		"Apicurio's Confluent-compatible API, which walrelay asks, numbers schemas by content id: set it to contentId"},
}

// apicurioIDHandlers are the id handlers that write 4-byte ids: Apicurio 2.x's
// Legacy4ByteIdHandler (what apicurio.registry.as-confluent=true selects) and
// 3.x's Default4ByteIdHandler.
var apicurioIDHandlers = map[string]bool{
	"io.apicurio.registry.serde.Legacy4ByteIdHandler":  true,
	"io.apicurio.registry.serde.Default4ByteIdHandler": true,
}

// apicurioAPIs are Apicurio's native API paths and its Confluent-compatible
// API's beside them, which walrelay is given as schema-registry-url.
var apicurioAPIs = map[string]string{
	"/apis/registry/v2": "/apis/ccompat/v6",
	"/apis/registry/v3": "/apis/ccompat/v7",
}

// apicurioConverter maps Apicurio's AvroConverter or ProtobufConverter onto
// walrelay's converter and registry settings when its options frame records as
// Confluent's converters do; otherwise each option that frames them differently
// is a difference naming the setting to change.
func (c *conversion) apicurioConverter(side, conv, class string) string {
	r := c.newRegistry(side, conv, class)
	for _, f := range apicurioFraming {
		v, ok := r.get(f.key)
		if !ok || !containsFold(f.want, v) {
			r.unlessSet(f.key, f.reason)
		}
	}
	asConfluent, _ := r.get("apicurio.registry.as-confluent")
	handler, hasHandler := r.get("apicurio.registry.id-handler")
	switch {
	case hasHandler && !apicurioIDHandlers[handler]:
		r.differs("apicurio.registry.id-handler", "not a 4-byte id handler; walrelay writes Confluent's 4-byte ids: "+
			"set apicurio.registry.as-confluent=true (Apicurio 2.x) or this to io.apicurio.registry.serde.Default4ByteIdHandler (3.x)")
	case !hasHandler && !strings.EqualFold(asConfluent, "true"):
		r.unlessSet("apicurio.registry.as-confluent", "Apicurio 2.x writes 8-byte ids unless it is true (or "+
			"apicurio.registry.id-handler names a 4-byte handler); walrelay writes Confluent's 4-byte ids")
	}
	if v, ok := r.get("apicurio.registry.artifact-resolver-strategy"); ok && v != "io.apicurio.registry.serde.strategy.TopicIdStrategy" {
		r.differs("apicurio.registry.artifact-resolver-strategy", "walrelay names the subject TOPIC-key or TOPIC-value in "+
			"Apicurio's Confluent-compatible API, as TopicIdStrategy (the default) does, no other")
	}
	if v, ok := r.get("apicurio.registry.avro.encoding"); ok && !strings.EqualFold(v, "BINARY") {
		r.differs("apicurio.registry.avro.encoding", "walrelay writes Avro's binary encoding, as Confluent's converter does")
	}
	r.set(side+"-subject-name-strategy", "topic", "")
	if raw, ok := r.get("apicurio.registry.url"); ok && raw != "" {
		r.apicurioURL(raw)
	} else {
		fmt.Fprintf(&c.b, "# %s.converter.apicurio.registry.url: not set where %s is configured; set schema-registry-url "+
			"to Apicurio's Confluent-compatible API (…/apis/ccompat/v7)\n", side, class)
	}
	for _, k := range []string{"apicurio.auth.username", "apicurio.registry.auth.username"} {
		if _, ok := r.get(k); ok {
			fmt.Fprintf(&c.b, "# %s: not copied; put user:password (with %s's password) in %s\n", r.names[k],
				strings.Replace(k, "username", "password", 1), basicAuthEnv)
		}
	}
	for _, k := range []string{"apicurio.auth.password", "apicurio.registry.auth.password"} {
		if _, ok := r.get(k); ok {
			fmt.Fprintf(&c.b, "# %s=***: not copied; it goes in %s\n", r.names[k], basicAuthEnv)
		}
	}
	r.apicurioFlag("apicurio.registry.auto-register", "schema-registry-auto-register")
	r.apicurioFlag("apicurio.registry.find-latest", "schema-registry-use-latest-version")
	r.set("schema-registry-normalize", "false", "")
	r.rest(class)
	return conv
}

// unlessSet is a difference on an option that is not set as walrelay needs:
// its value as written, or "(not set)".
func (r *registry) unlessSet(k, reason string) {
	if _, ok := r.opts[k]; ok {
		r.differs(k, reason)
		return
	}
	r.c.differs(r.side+".converter."+k, "(not set)", reason)
}

// apicurioFlag maps Apicurio's boolean option (false unless set) onto setting.
func (r *registry) apicurioFlag(k, setting string) {
	v, ok := r.boolean(k, false)
	if !ok {
		return
	}
	from := ""
	if _, set := r.opts[k]; set {
		from = k
	}
	r.set(setting, fmt.Sprint(v), from)
}

// apicurioURL writes schema-registry-url as the Confluent-compatible API beside
// Apicurio's native API apicurio.registry.url names.
func (r *registry) apicurioURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		r.differs("apicurio.registry.url", "not a URL with a host")
		return
	}
	u.User = nil
	path := strings.TrimSuffix(u.Path, "/")
	for native, compat := range apicurioAPIs {
		if base, ok := strings.CutSuffix(path, native); ok {
			u.Path = base + compat
			fmt.Fprintf(&r.c.b, "# %s: Apicurio's native API; walrelay asks its Confluent-compatible API, %s\n",
				r.names["apicurio.registry.url"], u.String())
			r.set("schema-registry-url", u.String(), "apicurio.registry.url")
			return
		}
	}
	fmt.Fprintf(&r.c.b, "# %s: not an Apicurio API path walrelay knows (…/apis/registry/v2 or v3); set schema-registry-url "+
		"to its Confluent-compatible API (…/apis/ccompat/v7)\n", r.names["apicurio.registry.url"])
}

func containsFold(list []string, v string) bool {
	for _, w := range list {
		if strings.EqualFold(w, v) {
			return true
		}
	}
	return false
}
