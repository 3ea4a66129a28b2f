package replication_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/walrelay/walrelay/internal/quietconn"
	"github.com/walrelay/walrelay/replication"
)

// TuneKeepalives asks the server for keepalives unless the URL set them, and dials
// sockets that carry the same values, the URL's included.
func TestKeepalivesTuneBothEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		query          string
		params         map[string]string
		idle, interval int // seconds
		count          int
		userTimeout    int // milliseconds
	}{
		{"", map[string]string{"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2",
			"tcp_keepalives_count": "3", "tcp_user_timeout": "15000"}, 5, 2, 3, 15000},
		{"?tcp_keepalives_idle=30&tcp_keepalives_count=4&tcp_user_timeout=1min", map[string]string{"tcp_keepalives_idle": "30",
			"tcp_keepalives_interval": "2", "tcp_keepalives_count": "4", "tcp_user_timeout": "1min"}, 30, 2, 4, 60000},
	} {
		cfg, err := pgconn.ParseConfig("postgres://u@" + ln.Addr().String() + "/db" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		replication.TuneKeepalives(cfg)
		for k, want := range tc.params {
			if got := cfg.RuntimeParams[k]; got != want {
				t.Errorf("%q: server parameter %s = %q, want %q", tc.query, k, got, want)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := cfg.DialFunc(ctx, "tcp", ln.Addr().String())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := conn.(*quietconn.Conn); !ok {
			t.Fatalf("DialFunc gave a %T, want a quiet TCP connection (internal/quietconn)", conn)
		}
		tcp, _ := quietconn.TCP(conn)
		raw, err := tcp.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		opts := map[string][2]int{"SO_KEEPALIVE": {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			"TCP_KEEPIDLE": {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE}, "TCP_KEEPINTVL": {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			"TCP_KEEPCNT": {unix.IPPROTO_TCP, unix.TCP_KEEPCNT}, "TCP_USER_TIMEOUT": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT}}
		if err := raw.Control(func(fd uintptr) {
			for name, o := range opts {
				v, err := unix.GetsockoptInt(int(fd), o[0], o[1])
				if err != nil {
					t.Errorf("getsockopt %s: %v", name, err)
				}
				got[name] = v
			}
		}); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": tc.idle, "TCP_KEEPINTVL": tc.interval,
			"TCP_KEEPCNT": tc.count, "TCP_USER_TIMEOUT": tc.userTimeout}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%q: socket %s = %d, want %d", tc.query, name, got[name], w)
			}
		}
	}
}
