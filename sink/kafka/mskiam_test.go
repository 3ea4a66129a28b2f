package kafka_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/walrelay/walrelay/sink/kafka"
)

// TestAWSMSKIAMOffered: with --kafka-sasl-mechanism AWS_MSK_IAM the client asks the
// broker for AWS_MSK_IAM in its SASL handshake and authenticates with a SigV4-signed
// request carrying the access key id, never the secret key. kfake has no AWS_MSK_IAM of
// its own, so the test answers the two SASL requests itself (the unit's edge) and lets
// kfake serve the rest; whether Amazon MSK accepts the signature is not tested here.
func TestAWSMSKIAMOffered(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1") // a loopback broker's name has no region in it
	const (
		accessKey = "AKIAWALRELAYTEST0001"
		secretKey = "wJalrXUtnFEMI/K7MDENG/walrelaySECRETkey"
	)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)

	var (
		mu         sync.Mutex
		mechanisms []string
		authBytes  [][]byte
	)
	cluster.ControlKey(int16(kmsg.SASLHandshake), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.SASLHandshakeRequest)
		mu.Lock()
		mechanisms = append(mechanisms, r.Mechanism)
		mu.Unlock()
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{kafka.MechanismAWSMSKIAM}
		return resp, nil, true
	})
	cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		mu.Lock()
		authBytes = append(authBytes, append([]byte(nil), r.SASLAuthBytes...))
		mu.Unlock()
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"test"}`)
		return resp, nil, true
	})

	var fetched atomic.Int32
	sec := kafka.Security{
		SASLMechanism: kafka.MechanismAWSMSKIAM,
		AWSCredentials: func(context.Context) (aws.Auth, error) {
			fetched.Add(1)
			return aws.Auth{AccessKey: accessKey, SecretKey: secretKey}, nil
		},
	}
	if err := sec.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	opts, err := sec.Opts()
	if err != nil {
		t.Fatalf("Opts: %v", err)
	}
	client, err := kgo.NewClient(append(opts, kgo.SeedBrokers(cluster.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Ping(ctx); err != nil {
		t.Fatalf("ping through AWS_MSK_IAM: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(mechanisms) == 0 || mechanisms[0] != kafka.MechanismAWSMSKIAM {
		t.Fatalf("SASL handshake mechanisms %q, want %s", mechanisms, kafka.MechanismAWSMSKIAM)
	}
	if len(authBytes) == 0 {
		t.Fatal("no SASL authenticate request reached the broker")
	}
	if fetched.Load() == 0 {
		t.Error("the AWS credentials function was never called")
	}
	var signed map[string]string
	if err := json.Unmarshal(authBytes[0], &signed); err != nil {
		t.Fatalf("authenticate payload is not MSK IAM's JSON: %v\n%s", err, authBytes[0])
	}
	if signed["action"] != "kafka-cluster:Connect" || !strings.HasPrefix(signed["x-amz-credential"], accessKey+"/") ||
		!strings.Contains(signed["x-amz-credential"], "/eu-west-1/kafka-cluster/") || signed["x-amz-signature"] == "" {
		t.Errorf("authenticate payload is not a signed kafka-cluster:Connect for %s in eu-west-1: %s", accessKey, authBytes[0])
	}
	for _, b := range authBytes {
		if strings.Contains(string(b), secretKey) {
			t.Fatalf("the secret key went to the broker: %s", b)
		}
	}
}

// AWS_MSK_IAM signs with the environment's credentials: a user or password is a
// mistake the settings check names.
func TestAWSMSKIAMTakesNoPassword(t *testing.T) {
	t.Parallel()
	err := kafka.Security{SASLMechanism: kafka.MechanismAWSMSKIAM, SASLUser: "u", SASLPassword: "p"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "takes no user or password") {
		t.Fatalf("Validate = %v, want the no-user-or-password error", err)
	}
	if _, err := (kafka.Security{SASLMechanism: kafka.MechanismAWSMSKIAM}).Opts(); err == nil {
		t.Fatal("Opts without AWS credentials succeeded")
	}
}
