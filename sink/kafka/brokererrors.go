package kafka

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerErrors keeps the last error the client met talking to a broker, from
// franz-go's hooks, so that a relay whose broker stops acknowledging can say why
// (sink.ErrorReporter). A produce response read clears it. The hooks run per
// request, not per record, and allocate only for an error.
type brokerErrors struct{ last atomic.Pointer[error] }

var (
	_ kgo.HookBrokerConnect = (*brokerErrors)(nil)
	_ kgo.HookBrokerWrite   = (*brokerErrors)(nil)
	_ kgo.HookBrokerRead    = (*brokerErrors)(nil)
)

func (h *brokerErrors) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.note(meta, "connect to", err)
}

func (h *brokerErrors) OnBrokerWrite(meta kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	h.note(meta, "write to", err)
}

func (h *brokerErrors) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key == int16(kmsg.Produce) && h.last.Load() != nil {
		h.last.Store(nil)
	}
	h.note(meta, "read from", err)
}

func (h *brokerErrors) note(meta kgo.BrokerMetadata, step string, err error) {
	if err == nil {
		return
	}
	err = fmt.Errorf("%s broker %s: %w", step, net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), err)
	h.last.Store(&err)
}

func (h *brokerErrors) lastError() error {
	if p := h.last.Load(); p != nil {
		return *p
	}
	return nil
}

// LastError is the last error the client met talking to a broker since a produce
// response last arrived, or nil; see sink.ErrorReporter.
func (s *Sink) LastError() error { return s.errs.lastError() }
