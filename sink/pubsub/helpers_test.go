package pubsub_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/pubsub"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const project = "walrelay-test"

// fake is Pub/Sub's in-process fake (pstest) on a free loopback port, with a
// recorder of the publish requests it gets. The fake checks none of Pub/Sub's
// limits and keeps no order of its own beyond arrival: the tests check the
// requests the sink sends and the order the fake stored them in.
type fake struct {
	t    testing.TB
	srv  *pstest.Server
	rec  *recorder
	addr string // where clients reach it: the server, or a proxy in front of it
}

// recorder sees every publish request before the fake does, and may refuse it.
type recorder struct {
	mu       sync.Mutex
	requests []request
	refuse   func(*pb.PublishRequest) error
}

// request is one publish request as the fake received it.
type request struct {
	topic string
	keys  []string // each message's ordering key
	ids   []string // each message's id attribute
	at    time.Time
	err   error // what the recorder answered instead of the fake (set once answered)
}

func (r *recorder) React(req any) (handled bool, ret any, err error) {
	pr, ok := req.(*pb.PublishRequest)
	if !ok {
		return false, nil, nil
	}
	rq := request{topic: pr.Topic, at: time.Now()}
	for _, m := range pr.Messages {
		rq.keys = append(rq.keys, m.OrderingKey)
		rq.ids = append(rq.ids, m.Attributes["id"])
	}
	r.mu.Lock()
	i := len(r.requests)
	r.requests = append(r.requests, rq)
	refuse := r.refuse
	r.mu.Unlock()
	if refuse != nil {
		err = refuse(pr) // outside mu: a refusal may wait for the test
	}
	r.mu.Lock()
	r.requests[i].err = err
	r.mu.Unlock()
	return err != nil, nil, err
}

// setRefuse makes the fake answer requests for which f returns an error with it.
func (f *fake) setRefuse(refuse func(*pb.PublishRequest) error) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.rec.refuse = refuse
}

// requestsWith returns the requests that carried event id, in arrival order (also
// one the recorder is still answering).
func (f *fake) requestsWith(id string) []request {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	var out []request
	for _, r := range f.rec.requests {
		for _, x := range r.ids {
			if x == id {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

func newFake(t testing.TB) *fake {
	t.Helper()
	rec := &recorder{}
	srv := pstest.NewServerWithAddress("127.0.0.1:0", pstest.ServerReactorOption{FuncName: "Publish", Reactor: rec})
	t.Cleanup(func() { _ = srv.Close() })
	return &fake{t: t, srv: srv, rec: rec, addr: srv.Addr}
}

// topic is a fresh topic name of the test's own, created in the fake.
func (f *fake) topic(name string) string {
	f.t.Helper()
	if _, err := f.srv.GServer.CreateTopic(context.Background(), &pb.Topic{Name: topicPath(name)}); err != nil {
		f.t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

func topicPath(name string) string { return "projects/" + project + "/topics/" + name }

// config publishes to the fake; the template is prefix + {aggregate_type}.
func (f *fake) config(prefix string) pubsub.Config {
	cfg := pubsub.DefaultConfig()
	cfg.Project = project
	cfg.EmulatorHost = f.addr
	cfg.TopicTemplate = prefix + "{aggregate_type}"
	return cfg
}

// messages are the messages stored in topic, in the order the fake stored them.
func (f *fake) messages(topic string) []*pstest.Message {
	var out []*pstest.Message
	for _, m := range f.srv.Messages() {
		if m.Topic == topicPath(topic) {
			out = append(out, m)
		}
	}
	return out
}

// count is how many messages topic holds.
func (f *fake) count(topic string) int { return len(f.messages(topic)) }

// start is a fake with a topic of the test's own (<prefix>order) and a sink, its
// config changed by tweak when set, publishing to it.
func start(t testing.TB, tweak func(*pubsub.Config)) (f *fake, topic string, s *pubsub.Sink) {
	t.Helper()
	f = newFake(t)
	p := prefix()
	topic = f.topic(p + "order")
	cfg := f.config(p)
	if tweak != nil {
		tweak(&cfg)
	}
	return f, topic, newSink(t, cfg)
}

func newSink(t testing.TB, cfg pubsub.Config) *pubsub.Sink {
	t.Helper()
	s, err := pubsub.New(cfg)
	if err != nil {
		t.Fatalf("pubsub.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// prefix is a topic prefix of the test's own.
func prefix() string { return fmt.Sprintf("walrelay-%08x.", rand.Uint32()) }

// outcomes records done calls per event id, with when they came.
type outcomes struct {
	mu    sync.Mutex
	errs  map[string][]error
	at    map[string]time.Time
	total int
}

func newOutcomes() *outcomes {
	return &outcomes{errs: map[string][]error{}, at: map[string]time.Time{}}
}

func (o *outcomes) publish(s sink.Sink, e *outbox.Event) {
	s.Publish(e, sink.DoneFunc(func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.errs[e.ID] = append(o.errs[e.ID], err)
		o.at[e.ID] = time.Now()
		o.total++
	}))
}

func (o *outcomes) of(id string) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs[id]...)
}

func (o *outcomes) when(id string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at[id]
}

func (o *outcomes) wait(t testing.TB, n int) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d outcomes", n), func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.total >= n
	})
}

var seq struct {
	sync.Mutex
	n int
}

// event makes a distinct event of the aggregate.
func event(aggregateType, aggregateID string) *outbox.Event {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return &outbox.Event{
		ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", rand.Uint32(), n), AggregateType: aggregateType, AggregateID: aggregateID,
		EventType: "thing.happened", Payload: fmt.Appendf(nil, `{"n": %d}`, n), CreatedAt: time.Now().UTC(),
	}
}

// ids are the id attributes of msgs, in order.
func ids(msgs []*pstest.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Attributes["id"]
	}
	return out
}

// big is a payload of n bytes of JSON.
func big(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }

// clientOpts reach the fake with a client of the test's own.
func clientOpts(f *fake) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(f.addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
}
