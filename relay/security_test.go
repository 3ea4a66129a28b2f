package relay_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/sink/kafka"
)

const kafkaSecret = "k4fka-s3cret-pw"

// SASL PLAIN and SCRAM against a broker that requires them: the right credentials
// deliver, a wrong password is reported without ever showing a password in the logs.
func TestKafkaSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			dbURL := passwordURL(t, testenv.MigratedDatabase(t))
			broker := testenv.Kafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "relay", kafkaSecret))
			conn := testenv.Connect(t, dbURL)
			slot := "sasl_" + strings.ToLower(strings.ReplaceAll(mech, "-", "_"))

			wrong := start(t, dbURL, broker, slot, func(c *config) {
				c.Sinks.Kafka.Security = kafka.Security{SASLMechanism: mech, SASLUser: "relay", SASLPassword: "not-" + kafkaSecret}
			})
			if !wrong.waitLog(30*time.Second, "broker unreachable") {
				t.Fatal("a wrong SASL password was not reported")
			}
			wrong.stop()
			assertNoSecrets(t, wrong.logs.String())

			rn := start(t, dbURL, broker, slot, func(c *config) {
				c.Sinks.Kafka.Security = kafka.Security{SASLMechanism: mech, SASLUser: "relay", SASLPassword: kafkaSecret}
			})
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.SASL(mechanism(mech)))
			written := testenv.WriteTx(t, conn, []string{"s"}, "secure", 20, false)
			if !consumer.WaitDistinct(time.Minute, len(written)) {
				t.Fatalf("delivered %d of %d over SASL %s", consumer.Distinct(), len(written), mech)
			}
			rn.stop()
			assertNoSecrets(t, rn.logs.String())
		})
	}
}

func mechanism(name string) sasl.Mechanism {
	switch name {
	case "PLAIN":
		return plain.Auth{User: "relay", Pass: kafkaSecret}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: "relay", Pass: kafkaSecret}.AsSha256Mechanism()
	default:
		return scram.Auth{User: "relay", Pass: kafkaSecret}.AsSha512Mechanism()
	}
}

// TLS to a broker with a certificate from our own CA.
func TestKafkaTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverTLS, caFile := selfSignedTLS(t, dir)
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.TLS(serverTLS))
	conn := testenv.Connect(t, dbURL)
	start(t, dbURL, broker, "tls", func(c *config) {
		c.Sinks.Kafka.Security = kafka.Security{TLS: true, CAFile: caFile}
	})
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(caPEM)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`,
		kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	written := testenv.WriteTx(t, conn, []string{"t"}, "over.tls", 20, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d over TLS", consumer.Distinct(), len(written))
	}
}

// The relay runs as a role with REPLICATION and row privileges on its tables only:
// no superuser, no ownership, no CREATE.
func TestLeastPrivilegeRole(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	owner := testenv.Connect(t, dbURL)
	ctx := context.Background()
	role := "relay_min_" + strings.TrimPrefix(strings.ReplaceAll(t.Name(), "/", "_"), "Test")
	role = strings.ToLower(role)
	for _, stmt := range []string{
		"DROP ROLE IF EXISTS " + role,
		"CREATE ROLE " + role + " LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON outbox_events TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON walrelay_slots TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON walrelay_progress TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON walrelay_table_slots TO " + role,
		"GRANT SELECT, INSERT, UPDATE ON walrelay_confirmed TO " + role,
	} {
		if _, err := owner.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		c := testenv.Connect(t, dbURL)
		_, _ = c.Exec(context.Background(), "REASSIGN OWNED BY "+role+" TO postgres; DROP OWNED BY "+role)
	})
	before := testenv.WriteTx(t, owner, []string{"lp"}, "before.slot", 10, false)
	u, _ := url.Parse(dbURL)
	u.User = url.User(role)
	start(t, u.String(), broker, "leastpriv")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	after := testenv.WriteTx(t, owner, []string{"lp"}, "after.slot", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(before)+len(after)) {
		t.Fatalf("delivered %d of %d as a least-privilege role", consumer.Distinct(), len(before)+len(after))
	}
	waitFor(t, 30*time.Second, "rows published by the least-privilege role", func() bool {
		var pending int
		if err := owner.QueryRow(ctx, "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
}

// passwordURL adds a password to the URL: trust authentication ignores it, so the
// relay works, and the logs can be checked for it.
func passwordURL(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pg-s3cret-pw")
	return u.String()
}

func assertNoSecrets(t *testing.T, logs string) {
	t.Helper()
	for _, secret := range []string{kafkaSecret, "pg-s3cret-pw"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a secret appears in the logs:\n%s", logs)
		}
	}
}

// selfSignedTLS makes a CA and a server certificate for 127.0.0.1, returns the
// server's config and the CA's PEM file.
func selfSignedTLS(t *testing.T, dir string) (*tls.Config, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walrelay test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, caFile
}
