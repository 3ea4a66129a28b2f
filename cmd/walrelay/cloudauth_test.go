package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
	"github.com/walrelay/walrelay/sink/kafka"
)

const (
	testAccessKey = "AKIAWALRELAYTEST0002"
	testSecretKey = "walrelay/SECRET/access/key/never/sent"
)

// staticAWSEnv is an AWS environment with static credentials and no files or
// instance metadata to fall back on, so nothing leaves the machine.
func staticAWSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// loadArgs loads the settings the run command registers from args.
func loadArgs(t *testing.T, args ...string) (*settings.Settings, error) {
	t.Helper()
	s := newSettings()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return s, s.Load(fs)
}

// --database-auth aws-iam: each connection's password is a fresh RDS IAM token, a
// SigV4-presigned connect request for the URL's host, port and user in the
// environment's region, signed with the environment's credentials and carrying the
// access key id, never the secret. Whether RDS accepts it is not testable here.
func TestDatabaseAuthAWSIAM(t *testing.T) {
	staticAWSEnv(t)
	s, err := loadArgs(t, "--database-url", "postgres://walrelay_iam@db.example.internal:5432/app?sslmode=require",
		"--database-auth", "aws-iam")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if s.Relay.DatabasePassword == nil {
		t.Fatal("--database-auth aws-iam set no password provider")
	}
	token, err := s.Relay.DatabasePassword(context.Background())
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	u, err := url.Parse("https://" + token)
	if err != nil {
		t.Fatalf("token %q does not parse as a presigned URL: %v", token, err)
	}
	q := u.Query()
	if u.Host != "db.example.internal:5432" || q.Get("Action") != "connect" || q.Get("DBUser") != "walrelay_iam" ||
		!strings.HasPrefix(q.Get("X-Amz-Credential"), testAccessKey+"/") ||
		!strings.Contains(q.Get("X-Amz-Credential"), "/eu-west-1/rds-db/") || q.Get("X-Amz-Signature") == "" {
		t.Errorf("token is not an RDS connect token for walrelay_iam at db.example.internal:5432 in eu-west-1: %s", token)
	}
	if strings.Contains(token, testSecretKey) || strings.Contains(token, url.QueryEscape(testSecretKey)) {
		t.Fatal("the token carries the secret key")
	}
	again, err := s.Relay.DatabasePassword(context.Background())
	if err != nil || again == "" {
		t.Fatalf("second token: %q, %v", again, err)
	}
}

// The URL decides where a token is valid: mistakes are named before any connection.
func TestDatabaseAuthRefuses(t *testing.T) {
	staticAWSEnv(t)
	for _, tc := range []struct {
		name, url, auth, want string
	}{
		{"password in url", "postgres://u:pw@db:5432/app?sslmode=require", "aws-iam", "carries a password"},
		{"plaintext", "postgres://u@db:5432/app?sslmode=disable", "aws-iam", "only over TLS"},
		{"several hosts", "postgres://u@db1:5432,db2:5432/app?sslmode=require", "aws-iam", "several hosts"},
		{"unknown", "postgres://u@db:5432/app", "kerberos", "want password or aws-iam"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadArgs(t, "--database-url", tc.url, "--database-auth", tc.auth)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	t.Run("no region", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		_, err := loadArgs(t, "--database-url", "postgres://u@db:5432/app?sslmode=require", "--database-auth", "aws-iam")
		if err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
			t.Fatalf("load = %v, want the no-region error", err)
		}
	})
}

// --kafka-sasl-mechanism AWS_MSK_IAM reads the environment's credentials for each
// SASL session.
func TestKafkaAWSMSKIAMCredentials(t *testing.T) {
	staticAWSEnv(t)
	s, err := loadArgs(t, "--kafka-sasl-mechanism", "AWS_MSK_IAM")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	sec := s.Sinks.Kafka.Security
	if sec.SASLMechanism != kafka.MechanismAWSMSKIAM || sec.AWSCredentials == nil {
		t.Fatalf("security %+v: want AWS_MSK_IAM with a credentials function", sec)
	}
	a, err := sec.AWSCredentials(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.AccessKey != testAccessKey || a.SecretKey != testSecretKey {
		t.Errorf("credentials %q/%q, want the environment's", a.AccessKey, a.SecretKey)
	}
}
