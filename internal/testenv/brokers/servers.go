package brokers

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"
)

// Environment variables naming an existing server to use instead of starting one.
const (
	NATSAddrEnv    = "WALRELAY_TEST_NATS_ADDR"    // host:port, JetStream enabled
	RedisURLEnv    = "WALRELAY_TEST_REDIS_URL"    // redis://host:port/db
	RabbitMQURLEnv = "WALRELAY_TEST_RABBITMQ_URL" // amqp://user:pass@host:port/vhost
)

// NATS starts a nats-server with JetStream for the test and returns its URL
// (nats://127.0.0.1:<port>); it stops when the test ends.
func NATS(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv(NATSAddrEnv); addr != "" {
		return "nats://" + addr
	}
	return NATSServer(t).URL
}

// Server is a broker server of the test's own that the test may stop and start
// again on the same port with the same data, as a broker's restart does.
type Server struct {
	URL  string
	spec spec

	mu sync.Mutex
	p  *process // nil while stopped
}

// NATSServer is NATS's server, for tests that stop it; it ignores NATSAddrEnv,
// since a shared server cannot be stopped.
func NATSServer(t testing.TB) *Server {
	t.Helper()
	bin, err := lookBinary("nats-server", "nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server")
	if err != nil {
		unavailable(t, "NATS", err)
	}
	dir := t.TempDir()
	srv := &Server{}
	p, _, err := startWithPorts(1, func(_ int, ports []int) (spec, error) {
		url := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
		srv.URL = url
		srv.spec = spec{
			name: "nats-server", bin: bin, dir: dir,
			args:  []string{"-js", "-sd", filepath.Join(dir, "jetstream"), "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0])},
			probe: func(ctx context.Context) error { return probeNATS(ctx, url) },
		}
		return srv.spec, nil
	})
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	srv.p = p
	t.Cleanup(srv.Stop)
	return srv
}

// Stop stops the server (SIGTERM) and waits until it exited.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.stop()
		s.p = nil
	}
}

// Start starts the stopped server again, on its port and data, and waits until it
// answers.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		return nil
	}
	p, err := start(s.spec)
	if err != nil {
		return err
	}
	s.p = p
	return nil
}

// probeNATS succeeds once the server answers a JetStream request, which the sink
// needs, not only a client connection.
func probeNATS(ctx context.Context, url string) error {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// Redis starts a redis-server without persistence for the test and returns its URL
// (redis://127.0.0.1:<port>/0); it stops when the test ends.
func Redis(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(RedisURLEnv); u != "" {
		return u
	}
	bin, err := lookBinary("redis-server", "redis-server", "/usr/bin/redis-server")
	if err != nil {
		unavailable(t, "Redis", err)
	}
	dir := t.TempDir()
	var url string
	p, _, err := startWithPorts(1, func(_ int, ports []int) (spec, error) {
		url = fmt.Sprintf("redis://127.0.0.1:%d/0", ports[0])
		return spec{
			name: "redis-server", bin: bin, dir: dir,
			args: []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
				"--dir", dir, "--daemonize", "no"},
			probe: func(ctx context.Context) error { return probeRedis(ctx, url) },
		}, nil
	})
	if err != nil {
		t.Fatalf("start Redis: %v", err)
	}
	t.Cleanup(p.stop)
	return url
}

func probeRedis(ctx context.Context, url string) error {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return err
	}
	opts.MaxRetries = -1 // one attempt per probe; the caller polls
	c := goredis.NewClient(opts)
	defer c.Close()
	return c.Ping(ctx).Err()
}

// rabbit is the test binary's RabbitMQ node, started by the first test that needs it.
var rabbit struct {
	mu   sync.Mutex
	done bool // a start was attempted; url or err holds its result
	url  string
	err  error
	dir  string
	node *process
	epmd *process
}

// RabbitMQ returns the URL (amqp://guest:guest@127.0.0.1:<port>/) of the test
// binary's own RabbitMQ node, starting it on first use; tests share it and keep
// apart by exchange and queue names. [StopShared] stops it.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(RabbitMQURLEnv); u != "" {
		return u
	}
	rabbit.mu.Lock()
	defer rabbit.mu.Unlock()
	if !rabbit.done {
		rabbit.done = true
		rabbit.url, rabbit.err = startRabbitMQ()
	}
	if rabbit.err != nil {
		unavailable(t, "RabbitMQ", rabbit.err)
	}
	return rabbit.url
}

// startRabbitMQ boots a node of its own beside any the machine runs: its own node
// name, ports, Erlang cookie (HOME), epmd (ERL_EPMD_PORT), data, logs, config and
// plugins (none), and none of /etc/rabbitmq's settings.
func startRabbitMQ() (string, error) {
	// Debian's /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq
	// user and logs to /var/log; the script it runs takes our environment as is.
	server, err := lookBinary("rabbitmq-server", "rabbitmq-server", "/usr/lib/rabbitmq/bin/rabbitmq-server")
	if isExecutable("/usr/lib/rabbitmq/bin/rabbitmq-server") {
		server, err = "/usr/lib/rabbitmq/bin/rabbitmq-server", nil
	}
	if err != nil {
		return "", err
	}
	epmdBin, err := lookBinary("epmd", "rabbitmq-server", "/usr/bin/epmd")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "walrelay-rabbitmq-")
	if err != nil {
		return "", err
	}
	rabbit.dir = dir

	// A private epmd: registering with the machine's would share its name space.
	epmd, ports, err := startWithPorts(1, func(_ int, ports []int) (spec, error) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		return spec{name: "epmd", bin: epmdBin, dir: dir,
			args:  []string{"-port", strconv.Itoa(ports[0]), "-address", "127.0.0.1"},
			probe: func(ctx context.Context) error { return probeTCP(ctx, addr) }}, nil
	})
	if err != nil {
		stopRabbitMQ()
		return "", err
	}
	rabbit.epmd = epmd
	epmdPort := ports[0]

	var url string
	node, _, err := startWithPorts(2, func(attempt int, ports []int) (spec, error) {
		amqpPort, distPort := ports[0], ports[1]
		base := filepath.Join(dir, "node"+strconv.Itoa(attempt))
		home := filepath.Join(base, "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			return spec{}, err
		}
		files := map[string]string{
			"rabbitmq-env.conf": "# empty: keeps /etc/rabbitmq/rabbitmq-env.conf out\n",
			"enabled_plugins":   "[].\n",
			"rabbitmq.conf":     fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\n", amqpPort),
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(base, name), []byte(content), 0o644); err != nil {
				return spec{}, err
			}
		}
		url = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", amqpPort)
		return spec{
			name: "rabbitmq", bin: server, dir: base,
			env: []string{
				"HOME=" + home, // Erlang creates its cookie there
				"ERL_EPMD_PORT=" + strconv.Itoa(epmdPort),
				"ERL_EPMD_ADDRESS=127.0.0.1",
				"RABBITMQ_NODENAME=" + fmt.Sprintf("walrelay-test-%d-%d@localhost", os.Getpid(), attempt),
				"RABBITMQ_USE_LONGNAME=false",
				"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
				"RABBITMQ_NODE_PORT=" + strconv.Itoa(amqpPort),
				"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
				"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
				"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(base, "rabbitmq-env.conf"),
				"RABBITMQ_CONFIG_FILE=" + filepath.Join(base, "rabbitmq.conf"),
				"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(base, "advanced.config"),
				"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(base, "enabled_plugins"),
				"RABBITMQ_MNESIA_BASE=" + filepath.Join(base, "mnesia"),
				"RABBITMQ_LOG_BASE=" + filepath.Join(base, "log"),
				"RABBITMQ_PID_FILE=" + filepath.Join(base, "rabbitmq.pid"),
			},
			probe: func(ctx context.Context) error { return probeAMQP(url) },
		}, nil
	})
	if err != nil {
		stopRabbitMQ()
		return "", err
	}
	rabbit.node = node
	return url, nil
}

func probeAMQP(url string) error {
	c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
	if err != nil {
		return err
	}
	return c.Close()
}

func probeTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// StopShared stops the servers shared by the test binary's tests (RabbitMQ). Call
// it after m.Run, as testenv.Main does.
func StopShared() {
	rabbit.mu.Lock()
	defer rabbit.mu.Unlock()
	stopRabbitMQ()
}

func stopRabbitMQ() {
	if rabbit.node != nil {
		rabbit.node.stop()
		rabbit.node = nil
	}
	if rabbit.epmd != nil {
		rabbit.epmd.stop()
		rabbit.epmd = nil
	}
	if rabbit.dir != "" {
		_ = os.RemoveAll(rabbit.dir)
		rabbit.dir = ""
	}
}
