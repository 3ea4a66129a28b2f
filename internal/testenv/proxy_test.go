package testenv

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// A connection accepted before Down whose server dial ends after it is cut too:
// otherwise a client that opened it a moment before Down still reaches the server.
func TestDownCutsAConnectionStillDialling(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()

	dialling, release := make(chan struct{}), make(chan struct{})
	p := NewProxyDialing(t, func(ctx context.Context) (net.Conn, error) {
		close(dialling)
		<-release
		var d net.Dialer
		return d.DialContext(ctx, "tcp", echo.Addr().String())
	})
	client, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	<-dialling
	p.Down()
	close(release)

	if err := client.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, _ = client.Write([]byte("ping"))
	buf := make([]byte, 4)
	n, err := client.Read(buf)
	if n > 0 {
		t.Fatalf("read %q through a proxy that is down", buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection stayed open after Down")
	}
}
