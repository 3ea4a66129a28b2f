package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security configures TLS and SASL towards the brokers.
type Security struct {
	// TLS enables TLS; CAFile (PEM) replaces the system roots; CertFile and KeyFile
	// present a client certificate.
	TLS      bool
	CAFile   string
	CertFile string
	KeyFile  string
	// SASLMechanism is "", PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or AWS_MSK_IAM.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
	// AWSCredentials gives AWS_MSK_IAM the credentials to sign with. It is called for
	// every SASL session, so credentials that rotate (an assumed role, a web identity)
	// are read fresh; the program supplies it (walrelay's binary reads the standard
	// AWS environment), so this package links no AWS SDK.
	AWSCredentials func(context.Context) (aws.Auth, error)
}

// MechanismAWSMSKIAM is Amazon MSK's IAM access control over SASL.
const MechanismAWSMSKIAM = "AWS_MSK_IAM"

// Validate checks the settings without reading any file.
func (s Security) Validate() error {
	var errs []error
	switch s.SASLMechanism {
	case "":
		if s.SASLUser != "" || s.SASLPassword != "" {
			errs = append(errs, errors.New("kafka sasl user or password given without --kafka-sasl-mechanism"))
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if s.SASLUser == "" {
			errs = append(errs, fmt.Errorf("kafka sasl mechanism %s needs a user", s.SASLMechanism))
		}
	case MechanismAWSMSKIAM:
		if s.SASLUser != "" || s.SASLPassword != "" {
			errs = append(errs, errors.New("kafka sasl mechanism AWS_MSK_IAM takes no user or password: it signs with the AWS credentials of the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, a role)"))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka sasl mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or AWS_MSK_IAM", s.SASLMechanism))
	}
	if !s.TLS && (s.CAFile != "" || s.CertFile != "" || s.KeyFile != "") {
		errs = append(errs, errors.New("kafka tls files given without --kafka-tls"))
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("kafka tls client certificate needs both a cert file and a key file"))
	}
	return errors.Join(errs...)
}

// Opts turns the settings into franz-go options, reading the certificate files.
func (s Security) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read kafka tls ca file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka tls ca file %s holds no PEM certificate", s.CAFile)
			}
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("load kafka tls client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.Dialer(dialTLS(cfg)))
	}
	switch s.SASLMechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.SASLUser, Pass: s.SASLPassword}.AsSha512Mechanism()))
	case MechanismAWSMSKIAM:
		if s.AWSCredentials == nil {
			return nil, errors.New("kafka sasl mechanism AWS_MSK_IAM needs AWS credentials, and none were given to the sink")
		}
		opts = append(opts, kgo.SASL(aws.ManagedStreamingIAM(s.AWSCredentials)))
	}
	return opts, nil
}
