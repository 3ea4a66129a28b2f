package outbox

import (
	"fmt"
	"regexp"
)

// Columns names the outbox table's columns, for tables that are not walrelay's own:
// the article's, Debezium's (id, aggregatetype, aggregateid, type, payload), or any
// other. CreatedAt may be empty: the table has no such column, and the commit time
// stands in for it.
type Columns struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       string
	CreatedAt     string
}

// DefaultColumns are the article's names, which `walrelay migrate` creates.
func DefaultColumns() Columns {
	return Columns{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id",
		EventType: "event_type", Payload: "payload", CreatedAt: "created_at"}
}

var columnName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// Validate checks that each name is a plain SQL identifier and that the required
// ones are set.
func (c Columns) Validate() error {
	for _, col := range []struct {
		setting, name string
		optional      bool
	}{
		{"column-id", c.ID, false}, {"column-aggregate-type", c.AggregateType, false},
		{"column-aggregate-id", c.AggregateID, false}, {"column-event-type", c.EventType, false},
		{"column-payload", c.Payload, false}, {"column-created-at", c.CreatedAt, true},
	} {
		if col.name == "" && col.optional {
			continue
		}
		if !columnName.MatchString(col.name) {
			return fmt.Errorf("%s %q is not a column name (letters, digits, _ and $, not starting with a digit)", col.setting, col.name)
		}
	}
	return nil
}
