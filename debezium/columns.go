package debezium

// routerColumns maps router options to walrelay's column settings, in output order.
var routerColumns = [][2]string{
	{"table.field.event.id", "column-id"},
	{"route.by.field", "column-aggregate-type"},
	{"table.field.event.key", "column-aggregate-id"},
	{"table.field.event.type", "column-event-type"},
	{"table.field.event.payload", "column-payload"},
	{"table.field.event.timestamp", "column-created-at"},
}

// columns converts the router's table.field.event.* and route.by.field options into
// the tables' column settings.
func (c *conversion) columns() {
	for _, rc := range routerColumns {
		v := c.opt(rc[0])
		if rc[0] == "table.field.event.type" {
			// The router never reads the type column (EventRouterDelegate), so a table
			// may lack it; walrelay reads one only where the connector names it.
			if _, set := c.props["transforms."+c.router+".table.field.event.type"]; !set || c.router == "" {
				c.b.WriteString("# table.field.event.type: not set, and Debezium reads no type column; set column-event-type to one\n" +
					"# for walrelay's event_type header, metrics label and {event_type}\n")
				v = ""
			}
		}
		c.fields = append(c.fields, [2]string{rc[1], v})
	}
}
