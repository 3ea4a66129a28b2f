package settings

import "testing"

// Every setting is listed under one concern in run's help: a new setting that joins
// no group fails here, not silently in a help page.
func TestEverySettingHasAGroup(t *testing.T) {
	for _, name := range New().names() {
		n := 0
		for _, g := range Groups {
			if g.Has(name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("setting %q is in %d groups, want 1 (settings/groups.go)", name, n)
		}
	}
}
