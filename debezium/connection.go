package debezium

import (
	"net"
	"net/url"
)

// connection writes where walrelay reads: the database URL (without the password),
// the connector's slot and publication, which walrelay takes over with the position
// Debezium confirmed, the Kafka brokers, and on-publish progress.
func (c *conversion) connection() {
	host, _ := c.use("database.hostname")
	port, _ := c.use("database.port")
	user, _ := c.use("database.user")
	db, _ := c.use("database.dbname")
	sslmode, _ := c.use("database.sslmode")
	if _, ok := c.use("database.password"); ok {
		c.b.WriteString("# database.password=***: not copied; put the password in WALRELAY_DATABASE_URL or a pgpass file\n")
	} else {
		c.b.WriteString("# The password is not part of database-url: put it in WALRELAY_DATABASE_URL or a pgpass file.\n")
	}
	if host != "" {
		if port == "" {
			port = "5432"
		}
		u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, port), Path: "/" + db}
		if user != "" {
			u.User = url.User(user)
		}
		if sslmode != "" {
			u.RawQuery = url.Values{"sslmode": {sslmode}}.Encode()
		}
		line(&c.b, "database-url", u.String())
	} else {
		c.b.WriteString("# database.hostname is not set: write database-url yourself\n")
	}
	if c.props["plugin.name"] == "pgoutput" {
		c.used["plugin.name"] = true // walrelay's own decoder
	}
	// Debezium's own defaults, written out, so that walrelay takes over the connector's
	// slot, and with it the position Debezium had confirmed.
	if v, ok := c.use("slot.name"); ok {
		line(&c.b, "slot", v)
	} else {
		line(&c.b, "slot", "debezium")
	}
	if v, ok := c.use("publication.name"); ok {
		line(&c.b, "publication", v)
	} else {
		line(&c.b, "publication", "dbz_publication")
	}
	if c.props["debezium.sink.type"] == "kafka" {
		c.used["debezium.sink.type"] = true
		line(&c.b, "sink", "kafka")
	}
	if v, ok := c.use("bootstrap.servers"); ok {
		line(&c.b, "kafka-brokers", v)
	} else {
		c.b.WriteString("# kafka-brokers: not in the connector configuration; set the brokers of the Kafka Connect worker\n" +
			"# (its bootstrap.servers) here or in WALRELAY_KAFKA_BROKERS\n")
	}
	c.b.WriteString("# Like Debezium, progress writes nothing per published row; retention lets walrelay delete old ones.\n")
	line(&c.b, "on-publish", "progress")
}
