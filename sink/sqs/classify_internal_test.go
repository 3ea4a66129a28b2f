package sqs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

func apiErr(code string, fault smithy.ErrorFault) error {
	return &smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessageBatch",
		Err: &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault}}
}

func TestClassify(t *testing.T) {
	override := "AWS.SimpleQueueService.NonExistentQueue"
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, retry},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), retry},
		{"throttled", apiErr("RequestThrottled", smithy.FaultClient), retry},
		{"throttling exception", apiErr("ThrottlingException", smithy.FaultClient), retry},
		{"kms throttled", &types.KmsThrottled{}, retry},
		{"internal error", apiErr("InternalError", smithy.FaultServer), retry},
		{"unknown server fault", apiErr("SomethingNew", smithy.FaultServer), retry},
		{"503 without a code", &smithy.OperationError{Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 503}}, Err: errors.New("x")}}}, retry},
		{"queue does not exist", &types.QueueDoesNotExist{}, unusable},
		{"queue does not exist, query code", &types.QueueDoesNotExist{ErrorCodeOverride: &override}, unusable},
		{"access denied", apiErr("AccessDenied", smithy.FaultClient), unusable},
		{"kms access denied", &types.KmsAccessDenied{}, unusable},
		{"request too long", &types.BatchRequestTooLong{}, refused},
		{"invalid parameter", apiErr("InvalidParameterValue", smithy.FaultClient), refused},
		{"invalid contents", &types.InvalidMessageContents{}, refused},
		{"400 that is not sqs's", &smithy.OperationError{Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}}, Err: errors.New("x")}}}, retry},
		{"unknown code, 400", &smithy.OperationError{Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}}, Err: &smithy.GenericAPIError{Code: "New"}}}}, refused},
		{"unknown code, 500", &smithy.OperationError{Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 500}}, Err: &smithy.GenericAPIError{Code: "New"}}}}, retry},
		{"bad token", apiErr("InvalidClientTokenId", smithy.FaultClient), rejected},
		{"bad signature", apiErr("SignatureDoesNotMatch", smithy.FaultClient), rejected},
		{"expired token", apiErr("ExpiredToken", smithy.FaultClient), rejected},
		{"no credentials", &smithy.OperationError{Err: &v4.SigningError{Err: errors.New("failed to retrieve credentials")}}, rejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// The size is SQS's count (body, each attribute's name, type and value); the
// refusals name what to change.
func TestMessage(t *testing.T) {
	e := &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "a1", EventType: "created", Payload: []byte(`{}`),
		Headers: []outbox.Header{{Key: "tenant", Value: "acme"}}}
	entry, size, err := message(e, true)
	if err != nil {
		t.Fatal(err)
	}
	want := len(`{}`)
	for name, v := range entry.MessageAttributes {
		want += len(name) + len("String") + len(*v.StringValue)
	}
	if size != want || len(entry.MessageAttributes) != 6 || *entry.MessageGroupId != "a1" || *entry.MessageDeduplicationId != "e1" {
		t.Errorf("size %d (want %d), %d attributes, group %q, dedup %q", size, want, len(entry.MessageAttributes),
			*entry.MessageGroupId, *entry.MessageDeduplicationId)
	}
	if entry, _, _ := message(e, false); entry.MessageGroupId != nil || entry.MessageDeduplicationId != nil {
		t.Error("a standard queue's message has a group or deduplication id")
	}
	for _, tc := range []struct {
		name  string
		tweak func(*outbox.Event)
		want  string
	}{
		{"binary payload", func(e *outbox.Event) { e.Payload = []byte{0xff, 0xfe} }, "SQS bodies are text"},
		{"control character", func(e *outbox.Event) { e.Payload = []byte("a\x00b") }, "SQS bodies are text"},
		{"reserved header", func(e *outbox.Event) { e.Headers = []outbox.Header{{Key: "AWS.trace", Value: "x"}} }, "not a valid SQS message attribute name"},
		{"doubled dot", func(e *outbox.Event) { e.Headers = []outbox.Header{{Key: "a..b", Value: "x"}} }, "not a valid SQS message attribute name"},
	} {
		ev := *e
		tc.tweak(&ev)
		if _, _, err := message(&ev, true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if id := fifoID(strings.Repeat("x", 129)); !strings.HasPrefix(id, "sha256-") || id != fifoID(strings.Repeat("x", 129)) {
		t.Errorf("fifoID of a long id: %q, want a stable sha256- hash", id)
	}
	if id := fifoID(`a!~"`); id != `a!~"` {
		t.Errorf("fifoID of printable ASCII: %q, want it unchanged", id)
	}
}

func TestCheckColumns(t *testing.T) {
	cols := outbox.DefaultColumns()
	cols.Headers = []outbox.HeaderColumn{{Column: "a"}, {Column: "b"}}
	if err := CheckRecordColumns(record.Format{}, cols); err != nil {
		t.Errorf("two header columns and the trace column: %v", err)
	}
	cols.Headers = append(cols.Headers, outbox.HeaderColumn{Column: "c"})
	if err := CheckRecordColumns(record.Format{}, cols); err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Errorf("three header columns and the trace column: %v, want an error allowing 2", err)
	}
	cols.Trace = ""
	if err := CheckRecordColumns(record.Format{}, cols); err != nil {
		t.Errorf("three header columns without a trace column: %v", err)
	}
	for tmpl, want := range map[string]string{"outbox-{aggregate_type}.fifo": "", "outbox": "", "outbox.event.{aggregate_type}": "'-' and '_' only",
		"{event_type}": "", strings.Repeat("q", 81): "longer than 80", "x.{nope}": "unknown placeholder"} {
		err := CheckQueueTemplate(tmpl)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckQueueTemplate(%q) = %v, want %q", tmpl, err, want)
		}
	}
}
