package ops

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
)

// ErrNoDeadLetter: no dead letter has the id asked for.
var ErrNoDeadLetter = errors.New("no dead letter with that id")

// RecordPreview is a dead letter's record as the relay's sink would publish it
// (the console's preview): the same Format, topic routing and headers as the
// stream, read from the row as it is now.
type RecordPreview struct {
	Table string `json:"table"`
	ID    string `json:"id"`
	// Topic is the topic, subject, stream or queue the record goes to; empty
	// when the sink names its destination otherwise (RabbitMQ, HTTP).
	Topic   string         `json:"topic,omitempty"`
	Key     PreviewBytes   `json:"key"`
	Value   PreviewBytes   `json:"value"`
	Headers []PreviewField `json:"headers"`
	// Tombstone: the value is a null record value.
	Tombstone bool `json:"tombstone,omitempty"`
}

// PreviewBytes are a record's bytes: as text when they are UTF-8, else base64.
type PreviewBytes struct {
	Text     string `json:"text"`
	Encoding string `json:"encoding"` // "utf-8" or "base64"
}

// PreviewField is one record header.
type PreviewField struct {
	Key   string       `json:"key"`
	Value PreviewBytes `json:"value"`
}

func previewBytes(b []byte) PreviewBytes {
	if utf8.Valid(b) {
		return PreviewBytes{Text: string(b), Encoding: "utf-8"}
	}
	return PreviewBytes{Text: base64.StdEncoding.EncodeToString(b), Encoding: "base64"}
}

// PreviewDeadLetter reads the dead letter id from cfg's outbox tables and makes
// its record with cfg.Published; ErrNoDeadLetter when none has that id.
func PreviewDeadLetter(ctx context.Context, pool *pgxpool.Pool, cfg relay.Config, id string) (RecordPreview, error) {
	for _, tc := range cfg.OutboxTables() {
		shape, err := catalog.DescribeTable(ctx, pool, tc.Table, tc.Columns)
		if err != nil {
			return RecordPreview{}, err
		}
		ev, found, err := readDeadLetter(ctx, pool, shape, id)
		if err != nil {
			return RecordPreview{}, err
		}
		if !found {
			continue
		}
		route, err := tableRoute(tc)
		if err != nil {
			return RecordPreview{}, err
		}
		ev.Table, ev.TopicTemplate = shape.Qualified(), tc.TopicTemplate
		if route != nil {
			ev.TopicTemplate = route.Topic(ev.AggregateType)
		}
		return makePreview(&ev, cfg.Published)
	}
	return RecordPreview{}, ErrNoDeadLetter
}

// readDeadLetter reads the row id of shape's table when it is a dead letter.
func readDeadLetter(ctx context.Context, pool *pgxpool.Pool, shape catalog.Shape, id string) (outbox.Event, bool, error) {
	idType := shape.IDType
	if idType == "" {
		idType = "text"
	}
	row := pool.QueryRow(ctx, "SELECT "+poller.EventColumns(shape)+" FROM "+shape.Ident()+" WHERE "+
		pgx.Identifier{shape.Columns.ID}.Sanitize()+" = $1::"+idType+
		" AND dead_lettered_at IS NOT NULL AND processed_at IS NULL LIMIT 1", id)
	ev, unpublishable, err := poller.ScanEvent(row, shape)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ev, false, nil
	case errors.As(err, &pgErr) && pgErr.Code == "22P02": // not an id of this table's type
		return ev, false, nil
	case err != nil:
		return ev, false, fmt.Errorf("read dead letter %s from %s: %w", id, shape.Qualified(), err)
	case unpublishable != nil:
		return ev, false, fmt.Errorf("dead letter %s in %s can never be published: %w", id, shape.Qualified(), unpublishable)
	}
	return ev, true, nil
}

// makePreview is ev's record under pub.
func makePreview(ev *outbox.Event, pub relay.Published) (RecordPreview, error) {
	f := pub.Format
	p := RecordPreview{Table: ev.Table, ID: ev.ID, Headers: []PreviewField{}}
	tmpl := ev.TopicTemplate
	if tmpl == "" {
		tmpl = pub.TopicTemplate
	}
	if tmpl != "" {
		t, err := sink.ParseTemplate(tmpl)
		if err != nil {
			return p, fmt.Errorf("topic template %q: %w", tmpl, err)
		}
		p.Topic = t.Render(ev)
	}
	p.Key = previewBytes(f.Key(ev))
	value, tombstone := f.Value(ev)
	p.Value, p.Tombstone = previewBytes(value), tombstone
	f.EachHeader(ev, func(key string, v []byte) {
		p.Headers = append(p.Headers, PreviewField{Key: key, Value: previewBytes(v)})
	})
	return p, nil
}
