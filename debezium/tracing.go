package debezium

// tracing converts the router's tracing.span.context.field into column-trace, read
// only where the table has the column; the router's other tracing options create a
// span walrelay does not (unsupportedReasons).
func (c *conversion) tracing() {
	c.fields = append(c.fields, [2]string{"column-trace", c.opt("tracing.span.context.field")})
}
