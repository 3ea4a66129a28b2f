package record_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/record"
)

// Debezium's outbox router hands the routed value to Kafka's RegexRouter
// (debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/
// EventRouterDelegate.java, regexRouter.configure with route.topic.regex and
// route.topic.replacement), which, when Matcher.matches, takes
// Matcher.replaceFirst (apache/kafka connect/transforms/src/main/java/org/apache/
// kafka/connect/transforms/RegexRouter.java apply); anything else keeps the value
// as its topic.
func TestRouteTopic(t *testing.T) {
	for _, tc := range []struct {
		regex, replacement, value, want string
	}{
		// The router's defaults (EventRouterConfigDefinition).
		{"(?<routedByValue>.*)", "outbox.event.${routedByValue}", "order", "outbox.event.order"},
		{"(.*)", "$1.events", "customer", "customer.events"},
		{"(order|customer)_(.*)", "$2-$1", "order_created", "created-order"},
		// No whole match: the value itself, as RegexRouter leaves the topic.
		{"order_(.*)", "orders.$1", "xorder_1", "xorder_1"},
		{"order", "orders", "order.placed", "order.placed"},
		// $12 is group 1 then "2" when there is no group 12 (Matcher.appendReplacement).
		{"(a)", "$12", "a", "a2"},
		// The whole value matches, and replaceFirst replaces the first match, a.
		{"a|ab", "X", "ab", "Xb"},
		// A backslash makes the next character literal.
		{"(.*)", `\$$1\\`, "x", `$x\`},
	} {
		r, err := record.ParseRoute(tc.regex, tc.replacement)
		if err != nil {
			t.Errorf("ParseRoute(%q, %q): %v", tc.regex, tc.replacement, err)
			continue
		}
		if got := r.Topic(tc.value); got != tc.want {
			t.Errorf("regex %q replacement %q on %q: %q, want %q", tc.regex, tc.replacement, tc.value, got, tc.want)
		}
	}
}

// What Java reads and RE2 cannot is refused with the construct named, and a
// replacement naming a group the expression lacks is refused too.
func TestRouteRefuses(t *testing.T) {
	for _, tc := range []struct{ regex, replacement, want string }{
		{"(?=order)(.*)", "$1", "lookahead"},
		{"(?!x)(.*)", "$1", "negative lookahead"},
		{"(?<=a)b", "x", "lookbehind"},
		{`(a)\1`, "x", `backreference \1`},
		{`(?<n>a)\k<n>`, "x", "named backreference"},
		{"a*+", "x", "possessive"},
		{"(?>a)", "x", "atomic group"},
		{"[a-z&&[^e]]", "x", "intersection"},
		{"(.*)", "$2", "no group 2"},
		{"(.*)", "${name}", `no group named "name"`},
		{"(.*)", "cost$", "ends in $"},
		{"(", "x", "missing closing )"},
	} {
		_, err := record.ParseRoute(tc.regex, tc.replacement)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRoute(%q, %q): %v, want an error about %s", tc.regex, tc.replacement, err, tc.want)
		}
	}
	// An escaped lookahead's text is literal, not refused.
	if _, err := record.ParseRoute(`\(?=x`, "y"); err != nil {
		t.Errorf("escaped parenthesis: %v", err)
	}
}
