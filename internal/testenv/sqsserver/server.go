package sqsserver

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Account is the account id in queue URLs.
const Account = "000000000000"

// Options tune a Server; zero fields take SQS's documented values.
type Options struct {
	// MaxBatchBytes bounds a SendMessageBatch request's total size (default 1 MiB).
	MaxBatchBytes int
	// DedupWindow is how long a FIFO queue remembers a deduplication id (default 5m).
	DedupWindow time.Duration
	// Latency delays every SendMessageBatch answer, so that requests overlap.
	Latency time.Duration
}

// Fault is an error answer: for a whole request (Status set) or one entry.
type Fault struct {
	Status  int    // HTTP status of a request fault: 400 for the sender's, 500 or 503 for the server's
	Code    string // e.g. RequestThrottled, InternalError, InvalidParameterValue
	Message string
	Sender  bool // the sender's fault (an entry's SenderFault)
}

// Entry is one SendMessageBatch entry as the server received it.
type Entry struct {
	ID         string
	Body       string
	Attributes map[string]string // StringValue by name
	GroupID    string
	DedupID    string
}

// Request is one SendMessageBatch request.
type Request struct {
	At       time.Time // when it arrived
	Answered time.Time // when its answer was written
	Queue    string
	Entries  []Entry
	Fault    *Fault          // the request's own fault, if any
	Failed   map[string]bool // entry ids that failed
}

// Message is one stored message.
type Message struct {
	Entry
	MessageID string
	Sequence  int64 // FIFO only
	Stored    time.Time
}

// Server is an SQS server for one test.
type Server struct {
	URL  string // http://127.0.0.1:port
	Addr string // 127.0.0.1:port
	opts Options

	mu struct {
		sync.Mutex
		queues       map[string]*queue
		requests     []*Request
		calls        map[string]int // by operation
		requestFault func(*Request) *Fault
		entryFault   func(queue string, e *Entry) *Fault
		busyGroups   map[string]int // FIFO groups in a request being handled, queue+"\x00"+group
		overlaps     int
		seq          int64
	}
}

type queue struct {
	name     string
	fifo     bool
	maxSize  int
	messages []Message
	dedup    map[string]Message // by deduplication id, FIFO
	deduped  int
}

// Start serves on a free loopback port until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.MaxBatchBytes == 0 {
		opts.MaxBatchBytes = 1 << 20
	}
	if opts.DedupWindow == 0 {
		opts.DedupWindow = 5 * time.Minute
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sqsserver: listen: %v", err)
	}
	s := &Server{Addr: ln.Addr().String(), opts: opts}
	s.URL = "http://" + s.Addr
	s.mu.queues = map[string]*queue{}
	s.mu.calls = map[string]int{}
	s.mu.busyGroups = map[string]int{}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// CreateQueue creates a queue (FIFO when the name ends in .fifo); maxSize 0 means
// 1 MiB, SQS's default.
func (s *Server) CreateQueue(name string, maxSize int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createLocked(name, maxSize)
}

func (s *Server) createLocked(name string, maxSize int) *queue {
	if q, ok := s.mu.queues[name]; ok {
		return q
	}
	if maxSize == 0 {
		maxSize = 1 << 20
	}
	q := &queue{name: name, fifo: strings.HasSuffix(name, ".fifo"), maxSize: maxSize, dedup: map[string]Message{}}
	s.mu.queues[name] = q
	return q
}

// Messages returns what queue holds, in the order it stored them.
func (s *Server) Messages(queue string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.mu.queues[queue]; ok {
		return append([]Message(nil), q.messages...)
	}
	return nil
}

// Count is how many messages queue holds.
func (s *Server) Count(queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.mu.queues[queue]; ok {
		return len(q.messages)
	}
	return 0
}

// Deduplicated is how many entries queue acknowledged without storing them, as
// repeats of a deduplication id within the window.
func (s *Server) Deduplicated(queue string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.mu.queues[queue]; ok {
		return q.deduped
	}
	return 0
}

// Requests returns every SendMessageBatch request so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.mu.requests))
	for i, r := range s.mu.requests {
		out[i] = *r
	}
	return out
}

// Calls is how often op (GetQueueUrl, SendMessageBatch, ...) was called.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.calls[op]
}

// GroupOverlaps counts SendMessageBatch requests that arrived with a FIFO group
// whose earlier request was still being handled.
func (s *Server) GroupOverlaps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.overlaps
}

// FailRequests makes every SendMessageBatch request for which f returns a fault fail
// as a whole with it (nil f: none).
func (s *Server) FailRequests(f func(*Request) *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.requestFault = f
}

// FailEntries makes every entry for which f returns a fault fail alone (nil f: none).
func (s *Server) FailEntries(f func(queue string, e *Entry) *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.entryFault = f
}

// ServeHTTP answers one AWS JSON 1.0 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if r.Method != http.MethodPost || !ok {
		writeFault(w, &Fault{Status: 400, Code: "InvalidAction", Message: "want a POST with X-Amz-Target: AmazonSQS.<operation>", Sender: true})
		return
	}
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/sqs/aws4_request") {
		writeFault(w, &Fault{Status: 400, Code: "MissingAuthenticationToken", Message: "request is not signed with SigV4 for sqs", Sender: true})
		return
	}
	s.mu.Lock()
	s.mu.calls[op]++
	s.mu.Unlock()
	var (
		out   any
		fault *Fault
	)
	switch op {
	case "CreateQueue":
		out, fault = s.createQueue(r)
	case "GetQueueUrl":
		out, fault = s.getQueueURL(r)
	case "GetQueueAttributes":
		out, fault = s.getQueueAttributes(r)
	case "SendMessageBatch":
		out, fault = s.sendMessageBatch(r)
	default:
		fault = &Fault{Status: 400, Code: "InvalidAction", Message: "operation " + op + " is not served here", Sender: true}
	}
	if fault != nil {
		writeFault(w, fault)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func decode(r *http.Request, v any) *Fault {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return &Fault{Status: 400, Code: "InvalidParameterValue", Message: "request body: " + err.Error(), Sender: true}
	}
	return nil
}

// queryCodes are the x-amzn-query-error codes SQS sends with its JSON errors.
var queryCodes = map[string]string{
	"QueueDoesNotExist": "AWS.SimpleQueueService.NonExistentQueue",
	"RequestThrottled":  "RequestThrottled",
}

func writeFault(w http.ResponseWriter, f *Fault) {
	fault := "Receiver"
	if f.Sender {
		fault = "Sender"
	}
	code := f.Code
	if q, ok := queryCodes[code]; ok {
		code = q
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Query-Error", code+";"+fault)
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + f.Code, "message": f.Message})
}

func (s *Server) queueURL(r *http.Request, name string) string {
	return "http://" + r.Host + "/" + Account + "/" + name
}

// queueOf finds the queue a QueueUrl names; the caller holds mu.
func (s *Server) queueOf(url string) (*queue, *Fault) {
	name := url[strings.LastIndexByte(url, '/')+1:]
	q, ok := s.mu.queues[name]
	if !ok {
		return nil, &Fault{Status: 400, Code: "QueueDoesNotExist", Message: "The specified queue does not exist.", Sender: true}
	}
	return q, nil
}

func (s *Server) createQueue(r *http.Request) (any, *Fault) {
	var in struct {
		QueueName  string
		Attributes map[string]string
	}
	if f := decode(r, &in); f != nil {
		return nil, f
	}
	if f := checkQueueName(in.QueueName); f != nil {
		return nil, f
	}
	maxSize, _ := strconv.Atoi(in.Attributes["MaximumMessageSize"])
	s.mu.Lock()
	s.createLocked(in.QueueName, maxSize)
	s.mu.Unlock()
	return map[string]string{"QueueUrl": s.queueURL(r, in.QueueName)}, nil
}

func checkQueueName(name string) *Fault {
	base := strings.TrimSuffix(name, ".fifo")
	if name == "" || len(name) > 80 || strings.Trim(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return &Fault{Status: 400, Code: "InvalidParameterValue", Message: "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length", Sender: true}
	}
	return nil
}

func (s *Server) getQueueURL(r *http.Request) (any, *Fault) {
	var in struct{ QueueName string }
	if f := decode(r, &in); f != nil {
		return nil, f
	}
	s.mu.Lock()
	_, ok := s.mu.queues[in.QueueName]
	s.mu.Unlock()
	if !ok {
		return nil, &Fault{Status: 400, Code: "QueueDoesNotExist", Message: "The specified queue does not exist.", Sender: true}
	}
	return map[string]string{"QueueUrl": s.queueURL(r, in.QueueName)}, nil
}

func (s *Server) getQueueAttributes(r *http.Request) (any, *Fault) {
	var in struct {
		QueueUrl       string
		AttributeNames []string
	}
	if f := decode(r, &in); f != nil {
		return nil, f
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, f := s.queueOf(in.QueueUrl)
	if f != nil {
		return nil, f
	}
	all := map[string]string{"MaximumMessageSize": strconv.Itoa(q.maxSize), "FifoQueue": strconv.FormatBool(q.fifo)}
	attrs := map[string]string{}
	for _, n := range in.AttributeNames {
		if v, ok := all[n]; ok {
			attrs[n] = v
		} else if n == "All" {
			attrs = all
		}
	}
	return map[string]any{"Attributes": attrs}, nil
}

type wireEntry struct {
	Id                     string
	MessageBody            string
	MessageAttributes      map[string]struct{ DataType, StringValue string }
	MessageGroupId         string
	MessageDeduplicationId string
}

type resultEntry struct {
	Id               string
	MessageId        string
	MD5OfMessageBody string
	SequenceNumber   string `json:",omitempty"`
}

type failedEntry struct {
	Id          string
	Code        string
	Message     string
	SenderFault bool
}

func (s *Server) sendMessageBatch(r *http.Request) (any, *Fault) {
	var in struct {
		QueueUrl string
		Entries  []wireEntry
	}
	if f := decode(r, &in); f != nil {
		return nil, f
	}
	req := &Request{At: time.Now(), Queue: in.QueueUrl[strings.LastIndexByte(in.QueueUrl, '/')+1:], Failed: map[string]bool{}}
	for _, we := range in.Entries {
		e := Entry{ID: we.Id, Body: we.MessageBody, GroupID: we.MessageGroupId, DedupID: we.MessageDeduplicationId,
			Attributes: map[string]string{}}
		for name, v := range we.MessageAttributes {
			e.Attributes[name] = v.StringValue
		}
		req.Entries = append(req.Entries, e)
	}

	s.mu.Lock()
	s.mu.requests = append(s.mu.requests, req)
	q, fault := s.queueOf(in.QueueUrl)
	if fault == nil {
		fault = checkBatch(in.Entries, s.opts.MaxBatchBytes)
	}
	if fault == nil && s.mu.requestFault != nil {
		fault = s.mu.requestFault(req)
	}
	var groups []string // a refused request counts too: its sender waits for the answer
	if q != nil && q.fifo {
		for _, e := range req.Entries {
			g := q.name + "\x00" + e.GroupID
			if s.mu.busyGroups[g] > 0 {
				s.mu.overlaps++
			}
			s.mu.busyGroups[g]++
			groups = append(groups, g)
		}
	}
	s.mu.Unlock()

	if s.opts.Latency > 0 {
		time.Sleep(s.opts.Latency) // the server's own answer time, which lets requests overlap
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range groups {
		if s.mu.busyGroups[g]--; s.mu.busyGroups[g] == 0 {
			delete(s.mu.busyGroups, g)
		}
	}
	req.Answered = time.Now()
	if fault != nil {
		req.Fault = fault
		return nil, fault
	}
	out := struct {
		Successful []resultEntry
		Failed     []failedEntry
	}{Successful: []resultEntry{}, Failed: []failedEntry{}}
	for i, we := range in.Entries {
		e := &req.Entries[i]
		f := checkEntry(q, we)
		if f == nil && s.mu.entryFault != nil {
			f = s.mu.entryFault(q.name, e)
		}
		if f != nil {
			req.Failed[e.ID] = true
			out.Failed = append(out.Failed, failedEntry{Id: e.ID, Code: f.Code, Message: f.Message, SenderFault: f.Sender})
			continue
		}
		out.Successful = append(out.Successful, s.store(q, e))
	}
	return out, nil
}

// store keeps e in q (FIFO: unless its deduplication id is a repeat within the
// window); the caller holds mu.
func (s *Server) store(q *queue, e *Entry) resultEntry {
	sum := md5.Sum([]byte(e.Body))
	res := resultEntry{Id: e.ID, MD5OfMessageBody: hex.EncodeToString(sum[:])}
	now := time.Now()
	if q.fifo {
		if prev, ok := q.dedup[e.DedupID]; ok && now.Sub(prev.Stored) < s.opts.DedupWindow {
			q.deduped++
			res.MessageId, res.SequenceNumber = prev.MessageID, strconv.FormatInt(prev.Sequence, 10)
			return res
		}
	}
	s.mu.seq++
	m := Message{Entry: *e, MessageID: fmt.Sprintf("m-%012d", s.mu.seq), Stored: now}
	if q.fifo {
		m.Sequence = s.mu.seq
		q.dedup[e.DedupID] = m
		res.SequenceNumber = strconv.FormatInt(m.Sequence, 10)
	}
	q.messages = append(q.messages, m)
	res.MessageId = m.MessageID
	return res
}

// checkBatch applies the limits of a request as a whole.
func checkBatch(entries []wireEntry, maxBytes int) *Fault {
	switch {
	case len(entries) == 0:
		return &Fault{Status: 400, Code: "EmptyBatchRequest", Message: "There should be at least one SendMessageBatchRequestEntry in the request.", Sender: true}
	case len(entries) > 10:
		return &Fault{Status: 400, Code: "TooManyEntriesInBatchRequest", Message: fmt.Sprintf("Maximum number of entries per request are 10. You have sent %d.", len(entries)), Sender: true}
	}
	ids := map[string]bool{}
	total := 0
	for _, e := range entries {
		if e.Id == "" || len(e.Id) > 80 || strings.Trim(e.Id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return &Fault{Status: 400, Code: "InvalidBatchEntryId", Message: "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.", Sender: true}
		}
		if ids[e.Id] {
			return &Fault{Status: 400, Code: "BatchEntryIdsNotDistinct", Message: "Id " + e.Id + " repeated.", Sender: true}
		}
		ids[e.Id] = true
		total += size(e)
	}
	if total > maxBytes {
		return &Fault{Status: 400, Code: "BatchRequestTooLong", Message: fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxBytes, total), Sender: true}
	}
	return nil
}

// size is a message's size as SQS counts it: the body and each attribute's name,
// type and value.
func size(e wireEntry) int {
	n := len(e.MessageBody)
	for name, v := range e.MessageAttributes {
		n += len(name) + len(v.DataType) + len(v.StringValue)
	}
	return n
}

// checkEntry applies the limits of one message; a refusal is the sender's fault.
func checkEntry(q *queue, e wireEntry) *Fault {
	invalid := func(format string, args ...any) *Fault {
		return &Fault{Code: "InvalidParameterValue", Message: "One or more parameters are invalid. Reason: " + fmt.Sprintf(format, args...), Sender: true}
	}
	if e.MessageBody == "" {
		return &Fault{Code: "MissingParameter", Message: "The request must contain the parameter MessageBody.", Sender: true}
	}
	if n := size(e); n > q.maxSize {
		return invalid("Message must be shorter than %d bytes.", q.maxSize)
	}
	for _, r := range e.MessageBody {
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return &Fault{Code: "InvalidMessageContents", Message: fmt.Sprintf("Invalid binary character '#x%X' was found in the message body.", r), Sender: true}
		}
	}
	if len(e.MessageAttributes) > 10 {
		return invalid("Number of message attributes [%d] exceeds the allowed maximum [10].", len(e.MessageAttributes))
	}
	for name, v := range e.MessageAttributes {
		lower := strings.ToLower(name)
		if name == "" || len(name) > 256 || strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") ||
			strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") ||
			strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" {
			return invalid("Message attribute name '%s' is invalid.", name)
		}
		if v.DataType != "String" && !strings.HasPrefix(v.DataType, "String.") && v.DataType != "Number" {
			return invalid("The type of message attribute '%s' is invalid.", name)
		}
		if v.StringValue == "" {
			return invalid("Message attribute '%s' must contain a non-empty value of type '%s'.", name, v.DataType)
		}
	}
	switch {
	case q.fifo && e.MessageGroupId == "":
		return &Fault{Code: "MissingParameter", Message: "The request must contain the parameter MessageGroupId.", Sender: true}
	case q.fifo && e.MessageDeduplicationId == "":
		return invalid("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly.")
	case !q.fifo && e.MessageDeduplicationId != "":
		return invalid("The request include parameter that is not valid for this queue type.")
	}
	return nil
}

// CheckDelivery reports how queue's messages differ from ids, event ids (the id
// attribute) in commit order: each must be stored exactly once, nothing else, and
// every message group's in the order of ids.
func (s *Server) CheckDelivery(queue string, ids []string) error {
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	seen := map[string]int{}
	last := map[string]int{}
	for _, m := range s.Messages(queue) {
		id := m.Attributes["id"]
		seen[id]++
		i, ok := pos[id]
		if !ok {
			return fmt.Errorf("queue %s holds event %s, which was not written", queue, id)
		}
		if prev, ok := last[m.GroupID]; ok && i < prev {
			return fmt.Errorf("queue %s, group %s: event %s (position %d) stored after position %d", queue, m.GroupID, id, i, prev)
		}
		last[m.GroupID] = i
	}
	for _, id := range ids {
		if seen[id] != 1 {
			return fmt.Errorf("queue %s holds event %s %d times, want once", queue, id, seen[id])
		}
	}
	return nil
}
