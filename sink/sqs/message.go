package sqs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// maxAttributes is SQS's limit of message attributes per message.
const maxAttributes = 10

// stringType is every attribute's DataType.
const stringType = "String"

// nullBody stands for a NULL payload: SQS refuses an empty body.
const nullBody = "null"

// errMessage: SQS would refuse the message for what it is.
var errMessage = errors.New("sqs cannot carry this event")

// message is the SQS message of e as walrelay's own record (the zero
// record.Format); see recordMessage.
func message(e *outbox.Event, fifo bool) (types.SendMessageBatchRequestEntry, int, error) {
	return recordMessage(&record.Format{}, e, fifo)
}

// recordMessage is how an event becomes an SQS message: the record package record
// makes of it as f says. Its value is the body, and the attributes are its headers
// (with the default format id, event_type, aggregate_type, aggregate_id,
// created_at), tombstone for a tombstone (the body is then "null"), then the
// event's headers in their order, all of type String; an empty value, a null one
// included, is left out (SQS refuses it). On a FIFO queue the group is the
// aggregate id and the deduplication id the event id. It returns the entry (its Id
// is the request's to set), its size as SQS counts it (the body and each
// attribute's name, type and value), or why SQS would refuse it.
func recordMessage(f *record.Format, e *outbox.Event, fifo bool) (types.SendMessageBatchRequestEntry, int, error) {
	var entry types.SendMessageBatchRequestEntry
	value, tombstone := f.Value(e)
	body := string(value)
	switch {
	case tombstone:
		body = nullBody
	case body == "":
		return entry, 0, fmt.Errorf("%w: the payload is empty and an SQS message body must not be", errMessage)
	case !validBody(body):
		return entry, 0, fmt.Errorf("%w: the payload holds characters an SQS body cannot (invalid UTF-8 or control characters); SQS bodies are text", errMessage)
	}
	attrs := make(map[string]types.MessageAttributeValue, record.OwnHeaders+1+len(e.Headers))
	size := len(body)
	add := func(name string, value []byte) {
		if len(value) == 0 {
			return
		}
		v := string(value)
		attrs[name] = types.MessageAttributeValue{DataType: aws.String(stringType), StringValue: &v}
		size += len(name) + len(stringType) + len(v)
	}
	var created [record.CreatedLen]byte
	own, n := f.Own(e, &created)
	for _, h := range own[:n] {
		add(h.Key, h.Value)
	}
	if tombstone {
		add("tombstone", []byte("true"))
	}
	for _, h := range e.Headers {
		v, ok := f.HeaderValue(h)
		if !ok {
			continue // a NULL column under walrelay's headers: no attribute
		}
		if err := checkAttributeName(h.Key); err != nil {
			return entry, 0, err
		}
		add(h.Key, v)
	}
	if len(attrs) > maxAttributes {
		return entry, 0, fmt.Errorf("%w: it has %d message attributes and SQS allows %d; place fewer columns as headers (column-headers)",
			errMessage, len(attrs), maxAttributes)
	}
	entry.MessageBody = aws.String(body)
	entry.MessageAttributes = attrs
	if fifo {
		entry.MessageGroupId = aws.String(fifoID(e.AggregateID))
		entry.MessageDeduplicationId = aws.String(fifoID(e.ID))
	}
	return entry, size, nil
}

// fifoID is s as a message group or deduplication id: s itself when SQS takes it
// (1 to 128 characters, ASCII letters, digits and punctuation), else "sha256-" and
// the hex of its SHA-256, the same for the same s.
func fifoID(s string) string {
	ok := s != "" && len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] <= '~'
	}
	if ok {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// validBody reports whether SQS takes s as a body: UTF-8 of the characters
// #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
func validBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000) {
			return false
		}
	}
	return true
}

// checkAttributeName applies SQS's rule to a header key: at most 256 characters,
// letters, digits, '-', '_' and '.', no leading, trailing or doubled '.', and not
// starting with AWS. or Amazon. in any case.
func checkAttributeName(name string) error {
	bad := name == "" || len(name) > 256 || name[0] == '.' || name[len(name)-1] == '.'
	for i := 0; !bad && i < len(name); i++ {
		c := name[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') ||
			c == '.' && name[i-1] == '.'
	}
	if !bad && (hasPrefixFold(name, "aws.") || hasPrefixFold(name, "amazon.")) {
		bad = true
	}
	if bad {
		return fmt.Errorf("%w: header %q is not a valid SQS message attribute name (letters, digits, '-', '_', '.'; "+
			"not starting with AWS. or Amazon.); rename it in column-headers", errMessage, name)
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
