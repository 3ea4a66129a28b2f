package testenv

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a server and can cut them, which looks to a
// client like the server going down and coming back, without stopping a server that
// other tests share. While down it refuses connections, as a stopped broker's host
// does (accepting and then closing them instead reads to some clients as a TLS
// mismatch, which they do not retry).
type Proxy struct {
	addr string
	dial func(context.Context) (net.Conn, error)

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards to target until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	var d net.Dialer
	return NewProxyDialing(t, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", target) })
}

// NewProxyDialing is NewProxy reaching its server through dial, for a path of the
// test's own (a network namespace, say). A dial gets at most proxyDialTimeout.
func NewProxyDialing(t testing.TB, dial func(context.Context) (net.Conn, error)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, addr: ln.Addr().String(), dial: dial, conns: map[net.Conn]struct{}{}}
	go p.accept(ln)
	t.Cleanup(p.Down)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Down closes every forwarded connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Up listens on the same address again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		panic("testenv: proxy cannot listen on " + p.addr + " again: " + err.Error())
	}
	p.ln = ln
	go p.accept(ln)
}

// proxyDialTimeout bounds a dial, which across a path that drops packets would
// otherwise take the TCP timeout to fail.
const proxyDialTimeout = 5 * time.Second

func (p *Proxy) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		go p.forward(ln, client)
	}
}

// forward pipes client, accepted on ln, to a new connection to the server. A Down
// while the server is being dialled closed ln: the connection is cut then too.
func (p *Proxy) forward(ln net.Listener, client net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), proxyDialTimeout)
	server, err := p.dial(ctx)
	cancel()
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go p.pipe(client, server)
	go p.pipe(server, client)
}

func (p *Proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// FreeAddr returns a loopback address no one listens on now (for a server the test
// starts itself, such as a relay's metrics listener).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
