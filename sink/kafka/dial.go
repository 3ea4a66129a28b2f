package kafka

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/walrelay/walrelay/internal/quietconn"
)

// dialTimeout bounds connecting to one broker.
const dialTimeout = 10 * time.Second

// dial connects to a broker over TCP whose reads and writes do not wake the Go
// runtime's monitor thread (internal/quietconn): a produce request and its response
// are most of the relay's system calls at moderate rates.
var dial = quietconn.Dial((&net.Dialer{Timeout: dialTimeout}).DialContext)

// dialTLS is dial with TLS over the connection, the server name taken from the
// broker's address when cfg has none.
func dialTLS(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conf := cfg
		if conf.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			conf = cfg.Clone()
			conf.ServerName = host
		}
		tc := tls.Client(c, conf)
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}
