package debezium

import (
	"fmt"
	"sort"
	"strings"
)

// binaryConverters are Debezium's converters for payloads written as bytes:
// io.debezium.converters.ByteBufferConverter and its older form
// BinaryDataConverter (debezium-core io/debezium/converters). Both write a value
// of Connect's BYTES schema as its bytes and hand any other to the converter
// delegate.converter.type names, configured with the options under that prefix;
// without one, such a value fails the connector's task (DataException).
var binaryConverters = map[string]bool{
	"io.debezium.converters.ByteBufferConverter": true,
	"io.debezium.converters.BinaryDataConverter": true,
}

// binaryConverter is the one rule for both binaryConverters: the column the side
// writes (the payload for the value, the aggregate id for the key) is bytea in
// the catalog: bytearray; any other type, or a value that is the router's
// envelope struct: the delegate, where walrelay has it. What neither covers is a
// difference naming the converter. Without the catalog a converter with no
// delegate can only have written bytea columns (any other fails every record),
// so it is bytearray; one with a delegate needs --database-url to tell.
func (c *conversion) binaryConverter(side, from, class string, lookup settingLookup) (string, bool) {
	prefix := side + ".converter.delegate.converter.type"
	delegate, delegateFrom, hasDelegate := lookup(prefix)
	delegate = strings.TrimSpace(delegate)
	column := c.opt("table.field.event.key")
	if side == "value" {
		column = c.opt("table.field.event.payload")
	}
	envelope := side == "value" && strings.Contains(c.opt("table.fields.additional.placement"), ":envelope")
	types := c.columnTypes(column)
	bytes := !envelope && len(types) == 1 && types[0] == "bytea"
	switch {
	case bytes:
		fmt.Fprintf(&c.b, "# %s=%s: the %s column %s is bytea, which it writes as its bytes\n", from, class, side, column)
		return "bytearray", false
	case types == nil && !envelope && !hasDelegate:
		fmt.Fprintf(&c.b, "# %s=%s: without delegate.converter.type it writes bytea columns only (any other fails the task), "+
			"so %s is taken to be bytea; give --database-url to check it\n", from, class, column)
		return "bytearray", false
	case types == nil && !envelope:
		c.differs(from, class, fmt.Sprintf("it writes a bytea %s column as its bytes and any other with %s; give --database-url "+
			"so the column's type says which", column, delegate))
		return "string", false
	case len(types) > 1 && !envelope:
		c.differs(from, class, fmt.Sprintf("the %s column %s is %s in different tables, which it writes differently; "+
			"give each its own connector", side, column, strings.Join(types, " and ")))
		return "string", false
	}
	what := "the router's envelope struct"
	if !envelope {
		what = fmt.Sprintf("the %s column %s (%s)", side, column, types[0])
	}
	if !hasDelegate {
		c.differs(from, class, what+" is not bytes, which it hands to delegate.converter.type, which is not set; "+
			"Debezium fails such a record")
		return "string", false
	}
	conv, known := converterClasses[delegate]
	if !known {
		c.differs(delegateFrom, delegate, "it writes "+what+"; walrelay writes it as StringConverter, JsonConverter or ByteArrayConverter does, no other")
		return "string", false
	}
	fmt.Fprintf(&c.b, "# %s=%s: it writes %s with its delegate, %s\n", from, class, what, delegate)
	return conv, jsonSchemas(conv, prefix, lookup)
}

// columnTypes are the distinct catalog types of column in the tables
// table.include.list names: nil when the catalog is not known or lacks one.
func (c *conversion) columnTypes(column string) []string {
	if c.catalog == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, entry := range splitList(c.props["table.include.list"]) {
		tables, reason := includedTables(entry, c.catalog)
		if reason != "" {
			return nil
		}
		for _, t := range tables {
			typ, ok := c.catalog.Types[t][column]
			if !ok {
				return nil
			}
			seen[typ] = true
		}
	}
	var types []string
	for t := range seen {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}
