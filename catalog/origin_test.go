package catalog_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
)

func TestOriginRoundTrip(t *testing.T) {
	for _, o := range []catalog.Origin{
		{System: "7312345678901234567", Database: "orders db", Slot: "walrelay", Timeline: 3,
			SlotCreated: time.Date(2026, 12, 1, 7, 0, 0, 123456000, time.UTC)},
		{System: "1", Database: `we"ird`, Slot: "s", Timeline: 1},
	} {
		got, err := catalog.ParseOrigin(o.String())
		if err != nil {
			t.Fatalf("ParseOrigin(%q): %v", o.String(), err)
		}
		if got.System != o.System || got.Database != o.Database || got.Slot != o.Slot || got.Timeline != o.Timeline ||
			!got.SlotCreated.Equal(o.SlotCreated) {
			t.Errorf("round trip of %+v gave %+v", o, got)
		}
	}
	for _, bad := range []string{"", "0/1234", "system=1 database=x"} {
		if _, err := catalog.ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) accepted it", bad)
		}
	}
}
