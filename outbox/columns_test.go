package outbox_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/outbox"
)

// A column placed as a header may not take a name a sink sets itself: walrelay's
// own under every record-headers setting, and the HTTP sink's Standard Webhooks
// headers (webhook-*, also as webhook_, which the HTTP sink maps to webhook-); the
// names only record-headers walrelay sets are refused where that setting is known.
func TestHeaderColumnsRefuseReservedNames(t *testing.T) {
	for _, name := range []string{"id", "tombstone", "Nats-Msg-Id", "webhook-id", "Webhook-Signature", "webhook_timestamp", "webhook-anything"} {
		c := outbox.DefaultColumns()
		c.Headers = []outbox.HeaderColumn{{Column: "col", Header: name}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sets itself") {
			t.Errorf("header %q: %v, want refused as one walrelay sets itself", name, err)
		}
	}
	c := outbox.DefaultColumns()
	c.Headers = []outbox.HeaderColumn{{Column: "col", Header: "Event_Type"}}
	if err := c.Validate(); err != nil {
		t.Errorf("header Event_Type: %v, want allowed by Validate (record-headers debezium leaves it to the column)", err)
	}
	if err := c.CheckWalrelayHeaders(); err == nil || !strings.Contains(err.Error(), "sets itself under record-headers walrelay") {
		t.Errorf("header Event_Type under record-headers walrelay: %v, want refused", err)
	}
	for _, name := range []string{"webhooks", "my-webhook-id", "tenant"} {
		c := outbox.DefaultColumns()
		c.Headers = []outbox.HeaderColumn{{Column: "col", Header: name}}
		if err := c.Validate(); err != nil {
			t.Errorf("header %q: %v, want allowed", name, err)
		}
	}
}
