package catalog_test

import (
	"testing"

	"github.com/walrelay/walrelay/catalog"
)

// The "published" condition was written out in four places; the builder gives each
// the text it had, byte for byte, so the statements PostgreSQL runs and the view
// `walrelay migrate` prints are what they were (docs/design.md invariant 10).
func TestPublishedBuilderKeepsEachStatementsText(t *testing.T) {
	for _, c := range []struct{ where, got, want string }{
		{"pending view (migrations/plan.go)", catalog.NotPublished(`'public.outbox_events'`, "\n    "),
			"NOT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at,\n" +
				"    (SELECT walrelay_horizon('public.outbox_events'::regclass)), (SELECT walrelay_next_xid()))"},
		{"walrelay status (ops/status.go)", catalog.NotPublished("$2::text", " "),
			"NOT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at, " +
				"(SELECT walrelay_horizon($2::text::regclass)), (SELECT walrelay_next_xid()))"},
		{"retirement (poller/store.go)", catalog.BelowHorizon("$1::text"),
			"walrelay_full_xid(xmin, (SELECT walrelay_next_xid())) < coalesce((SELECT walrelay_horizon($1::text::regclass)), 0)"},
		{"retirement by age (poller/store.go)", catalog.OlderThanXids(3 << 30),
			"walrelay_full_xid(xmin, (SELECT walrelay_next_xid())) < (SELECT walrelay_next_xid()) - 3221225472"},
		{"catch-up pass (relay/catchup.go)", catalog.NotBelow(1234567),
			"walrelay_full_xid(xmin, (SELECT walrelay_next_xid())) >= 1234567"},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.where, c.got, c.want)
		}
	}
}
