package debezium

import (
	"strings"

	"github.com/walrelay/walrelay/record"
)

// routerDefaults are the outbox event router's documented defaults, used for the
// options a configuration leaves out.
var routerDefaults = map[string]string{
	"table.field.event.id":       "id",
	"table.field.event.key":      "aggregateid",
	"table.field.event.payload":  "payload",
	"route.by.field":             "aggregatetype",
	"route.topic.replacement":    "outbox.event.${routedByValue}",
	"tracing.span.context.field": "tracingspancontext",
}

// findRouter finds the outbox event router among the connector's transforms.
func (c *conversion) findRouter() {
	if list, ok := c.use("transforms"); ok {
		for _, n := range splitList(list) {
			if c.props["transforms."+n+".type"] == outboxRouter {
				c.router = n
				c.used["transforms."+n+".type"] = true
				break
			}
		}
	}
	if c.router == "" {
		c.b.WriteString("# No outbox event router (" + outboxRouter + ") in transforms: its defaults are used.\n")
	}
}

// opt is the router's option k, marked used, or its default.
func (c *conversion) opt(k string) string {
	if c.router != "" {
		if v, ok := c.use("transforms." + c.router + "." + k); ok {
			return v
		}
	}
	return routerDefaults[k]
}

// defaultTopicRegex is the router's route.topic.regex: the whole routed value.
const defaultTopicRegex = "(?<routedByValue>.*)"

// topicFields converts route.topic.regex and route.topic.replacement: a
// topic-template where the default regex's replacement has no other group or
// escape, topic-regex and topic-replacement otherwise, and a difference where Go's
// RE2 cannot read the expression as Java does.
func (c *conversion) topicFields() [][2]string {
	regex, repl := c.opt("route.topic.regex"), c.opt("route.topic.replacement")
	if regex == "" {
		regex = defaultTopicRegex
	}
	if tmpl := strings.ReplaceAll(repl, "${routedByValue}", "{aggregate_type}"); regex == defaultTopicRegex &&
		!strings.ContainsAny(strings.ReplaceAll(tmpl, "{aggregate_type}", ""), `${}\`) {
		return [][2]string{{"topic-template", tmpl}}
	}
	if _, err := record.ParseRoute(regex, repl); err != nil {
		c.differs("transforms."+c.router+".route.topic.regex", regex, err.Error())
		return nil
	}
	return [][2]string{{"topic-regex", regex}, {"topic-replacement", repl}}
}
