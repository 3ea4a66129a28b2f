package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/jackc/pgx/v5/pgconn"
	saslaws "github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/settings"
	"github.com/walrelay/walrelay/sink/kafka"
)

// newSettings returns the defaults of every setting, with the binary's cloud
// authentication as what loading them ends with.
func newSettings() *settings.Settings {
	s := settings.New()
	s.Authenticate = cloudAuth
	return s
}

// cloudAuth gives the libraries the credentials the cloud settings ask for: an RDS
// IAM token provider as the relay's and migrate's database password, AWS credentials
// for Kafka's AWS_MSK_IAM. The AWS SDK stays in the binary; the libraries take plain
// functions (docs/operations.md, "Cloud authentication").
func cloudAuth(s *settings.Settings) error {
	switch s.DatabaseAuth {
	case settings.AuthPassword, "":
		s.Relay.DatabasePassword = nil
	case settings.AuthAWSIAM:
		if s.Relay.DatabaseURL == "" {
			return nil // the command says the URL is missing
		}
		tokens, err := rdsIAMTokens(s.Relay.DatabaseURL)
		if err != nil {
			return fmt.Errorf("--database-auth aws-iam: %w", err)
		}
		s.Relay.DatabasePassword = tokens
		iamAuth.Store(true)
	default:
		return fmt.Errorf("--database-auth: want %s or %s, got %q", settings.AuthPassword, settings.AuthAWSIAM, s.DatabaseAuth)
	}
	if sec := &s.Sinks.Kafka.Security; sec.SASLMechanism == kafka.MechanismAWSMSKIAM && sec.AWSCredentials == nil {
		awsCfg, err := loadAWSConfig()
		if err != nil {
			return fmt.Errorf("--kafka-sasl-mechanism AWS_MSK_IAM: %w", err)
		}
		sec.AWSCredentials = mskCredentials(awsCfg.Credentials)
	}
	return nil
}

// loadAWSConfig reads the standard AWS environment: AWS_* variables, the shared
// config and credentials files, and, when asked for credentials, web identity,
// container and instance roles. It reads no network until credentials are retrieved.
func loadAWSConfig() (aws.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, fmt.Errorf("load the AWS configuration (AWS_PROFILE, AWS_CONFIG_FILE): %w", err)
	}
	return cfg, nil
}

// rdsIAMTokens returns a password function that signs a fresh RDS IAM
// authentication token (valid 15 minutes) for the URL's host, port and user each
// time a connection is opened. The URL must name one host and no password.
func rdsIAMTokens(dbURL string) (func(context.Context) (string, error), error) {
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", redact.Error(err, dbURL))
	}
	switch {
	case pc.Password != "":
		return nil, errors.New("the database url carries a password; remove it, the IAM token is the password")
	case severalHosts(pc):
		return nil, errors.New("the database url names several hosts, and a token is signed for one; use the cluster endpoint")
	case pc.TLSConfig == nil:
		return nil, errors.New("the database url has sslmode=disable, and RDS takes IAM tokens only over TLS; use sslmode=verify-full (with sslrootcert, the RDS CA bundle) or sslmode=require")
	}
	awsCfg, err := loadAWSConfig()
	if err != nil {
		return nil, err
	}
	if awsCfg.Region == "" {
		return nil, errors.New("no AWS region; set AWS_REGION (or a region in the AWS config file)")
	}
	endpoint := net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))
	user, region, creds := pc.User, awsCfg.Region, awsCfg.Credentials
	return func(ctx context.Context) (string, error) {
		token, err := auth.BuildAuthToken(ctx, endpoint, region, user, creds)
		if err != nil {
			return "", fmt.Errorf("sign an RDS IAM token for %s at %s: %w", user, endpoint, err)
		}
		return token, nil
	}, nil
}

// severalHosts: the URL names more than one host:port. Fallbacks also hold the same
// host again without TLS (sslmode=prefer), which is one host.
func severalHosts(pc *pgconn.Config) bool {
	for _, fb := range pc.Fallbacks {
		if fb.Host != pc.Host || fb.Port != pc.Port {
			return true
		}
	}
	return false
}

// mskCredentials reads the AWS credentials for each Kafka SASL session, so rotated
// credentials (an assumed role, a web identity) are used as they change.
func mskCredentials(creds aws.CredentialsProvider) func(context.Context) (saslaws.Auth, error) {
	return func(ctx context.Context) (saslaws.Auth, error) {
		if creds == nil {
			return saslaws.Auth{}, errors.New("no AWS credentials provider in the AWS configuration")
		}
		c, err := creds.Retrieve(ctx) // the SDK's provider caches until expiry
		if err != nil {
			return saslaws.Auth{}, fmt.Errorf("AWS credentials for Kafka AWS_MSK_IAM: %w", err)
		}
		return saslaws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "walrelay"}, nil
	}
}
