package replication

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/quietconn"
)

// Keepalive timings for the connections whose silent loss must not outlive a
// takeover: the leadership lock's session (a dead holder's backend keeps the advisory
// lock, so no standby can lead) and the replication connection (a dead walsender
// keeps the slot active). When the network drops packets without closing anything,
// only TCP itself notices, on each end:
//
//   - idle: the first probe after 5 s of silence, then one every 2 s; 3 unanswered
//     probes end the socket 5 + 3×2 = 11 s after the last packet heard;
//   - data outstanding: TCP_USER_TIMEOUT ends the socket once data has gone
//     unacknowledged for 15 s. On Linux it also takes over from the probe count, so
//     an idle socket there ends 15-17 s after the last packet heard.
//
// The lock session is idle on the server between the leader's pings, so the server
// drops it, and the advisory lock with it, about 15 s after the path died; standbys
// retry every second and lead well within 30 s. A quiet healthy connection costs one
// small probe per 5 s.
const (
	keepaliveIdle     = 5 * time.Second
	keepaliveInterval = 2 * time.Second
	keepaliveCount    = 3
	userTimeout       = 15 * time.Second
)

// The server settings, in the units PostgreSQL takes them without a suffix.
const (
	paramIdle        = "tcp_keepalives_idle"     // seconds
	paramInterval    = "tcp_keepalives_interval" // seconds
	paramCount       = "tcp_keepalives_count"
	paramUserTimeout = "tcp_user_timeout" // milliseconds; PostgreSQL 12 and later
)

// TuneKeepalives makes a connection made with cfg end on both sides within seconds
// when the network path dies silently: it asks the server for keepalives and a TCP
// user timeout on its socket (startup parameters), and dials the client's socket with
// the same. Settings the URL already has are kept and mirrored on the client side;
// they are ignored on Unix-domain sockets. The client's TCP socket is quiet
// (internal/quietconn): its reads and writes do not wake the Go runtime's monitor.
func TuneKeepalives(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	idle := setting(cfg.RuntimeParams, paramIdle, time.Second, keepaliveIdle)
	interval := setting(cfg.RuntimeParams, paramInterval, time.Second, keepaliveInterval)
	timeout := setting(cfg.RuntimeParams, paramUserTimeout, time.Millisecond, userTimeout)
	count := keepaliveCount
	if v, ok := cfg.RuntimeParams[paramCount]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			count = n
		}
		if count == 0 {
			count = -1 // PostgreSQL's system default
		}
	} else {
		cfg.RuntimeParams[paramCount] = strconv.Itoa(keepaliveCount)
	}

	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     systemDefault(idle),
			Interval: systemDefault(interval),
			Count:    count,
		},
	}
	if timeout > 0 {
		d.Control = func(network, _ string, c syscall.RawConn) error {
			if !strings.HasPrefix(network, "tcp") {
				return nil
			}
			var setErr error
			if err := c.Control(func(fd uintptr) { setErr = setUserTimeout(fd, timeout) }); err != nil {
				return err
			}
			return setErr
		}
	}
	cfg.DialFunc = quietconn.Dial(d.DialContext)
}

// setting returns the duration the URL gives the server parameter, or sets the
// parameter to def when the URL has none. A value it cannot read (PostgreSQL will
// say what is wrong with it) leaves the client side at def.
func setting(params map[string]string, name string, unit, def time.Duration) time.Duration {
	v, ok := params[name]
	if !ok {
		params[name] = strconv.FormatInt(int64(def/unit), 10)
		return def
	}
	if d, err := parseSetting(v, unit); err == nil {
		return d
	}
	return def
}

// parseSetting reads a PostgreSQL time setting: a bare number in the parameter's
// unit, or a number with one of the units ms, s, min, h.
func parseSetting(v string, unit time.Duration) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * unit, nil
	}
	if strings.HasSuffix(v, "min") {
		v = strings.TrimSuffix(v, "in")
	}
	d, err := time.ParseDuration(strings.ReplaceAll(v, " ", ""))
	if err != nil || d < 0 {
		return 0, errors.Join(errors.New("not a PostgreSQL time setting: "+v), err)
	}
	return d, nil
}

// systemDefault maps PostgreSQL's 0 ("use the system default") to net's -1 ("leave
// the system default").
func systemDefault(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
