package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/outbox"
)

// duplicate is the script's reply for an event whose id the stream already got
// within the dedup window. Entry ids look like 1700000000000-0, so it cannot clash.
const duplicate = "duplicate"

// argsPerEvent are the ARGV values of one event after the two leading ones, without
// its extra fields: id, event_type, aggregate_type, aggregate_id, created_at,
// payload, then the number of extra fields, which follow as name, value pairs.
const argsPerEvent = 7

// appendScript writes a batch in one atomic script call. Per event it claims the
// dedup key (SET NX PX) and appends the entry; both happen in the same script, so
// no other client sees one without the other, and a redelivery within the window
// finds the key and appends nothing. When the append fails the key is deleted
// again, so a later attempt is not mistaken for a duplicate. The script stops at the
// first error and returns the replies so far with the error last, as the string
// "error:<message>": events after it were not attempted, which keeps every stream in
// publish order when they are sent again. (Errors travel as strings because go-redis
// ends the parsing of an array at a nested OOM, NOPERM, READONLY, ... error reply.)
var appendScript = goredis.NewScript(`
local window = tonumber(ARGV[1])
local trim = tonumber(ARGV[2]) > 0
local out = {}
local a = 2
local names = {'id', 'event_type', 'aggregate_type', 'aggregate_id', 'created_at', 'payload'}
for i = 1, #KEYS / 2 do
  local stream, dedup = KEYS[2 * i - 1], KEYS[2 * i]
  local extra = tonumber(ARGV[a + 7])
  local args
  if trim then
    args = {stream, 'MAXLEN', '~', ARGV[2], '*'}
  else
    args = {stream, '*'}
  end
  local n = #args
  for k = 1, 6 do
    args[n + 2 * k - 1] = names[k]
    args[n + 2 * k] = ARGV[a + k]
  end
  n = n + 12
  for k = 1, 2 * extra do
    args[n + k] = ARGV[a + 7 + k]
  end
  a = a + 7 + 2 * extra
  local fresh = true
  if window > 0 then
    local set = redis.pcall('SET', dedup, '1', 'NX', 'PX', ARGV[1])
    if type(set) == 'table' and set.err then
      out[i] = 'error:' .. set.err
      return out
    end
    fresh = set ~= false
  end
  if fresh then
    local r = redis.pcall('XADD', unpack(args))
    if type(r) == 'table' and r.err then
      if window > 0 then
        redis.call('DEL', dedup)
      end
      out[i] = 'error:' .. r.err
      return out
    end
    out[i] = r
  else
    out[i] = 'duplicate'
  end
end
return out
`)

// errUnexpectedReply is a reply the script cannot give: a bug, not an outage.
var errUnexpectedReply = errors.New("unexpected script reply")

// replyError is an error reply the script caught for one event.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError makes it a go-redis Error, as the same reply outside a script would be.
func (replyError) RedisError() {}

// dedupKey is the key that remembers id for stream during the dedup window.
func dedupKey(stream, id string) string {
	return DedupKeyPrefix + stream + ":" + id
}

// exec runs the script for items. It returns one reply per item attempted: the
// entry id or duplicate (a string), or the error that stopped the script (last).
// EVALSHA is tried first; on NOSCRIPT (first use, or a flushed script cache) the
// script is sent with EVAL, which caches it again.
func (s *Sink) exec(ctx context.Context, items []*item) ([]any, error) {
	keys := make([]string, 0, 2*len(items))
	args := make([]any, 0, 2+argsPerEvent*len(items)) // and extra fields
	args = append(args, s.windowArg, s.maxLenArg)
	for _, it := range items {
		e := it.ev
		keys = append(keys, it.stream, dedupKey(it.stream, e.ID))
		args = append(args, e.ID, e.EventType, e.AggregateType, e.AggregateID,
			e.CreatedAt.UTC().Format(time.RFC3339Nano), payloadArg(e))
		args = appendExtraFields(args, e)
	}
	reply, err := appendScript.Run(ctx, s.client, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	replies, ok := reply.([]any)
	if !ok || len(replies) == 0 || len(replies) > len(items) {
		return nil, fmt.Errorf("%w %T for %d events", errUnexpectedReply, reply, len(items))
	}
	for i, r := range replies {
		str, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("%w %T at %d", errUnexpectedReply, r, i)
		}
		if msg, isErr := strings.CutPrefix(str, "error:"); isErr {
			if i != len(replies)-1 {
				return nil, fmt.Errorf("%w: error at %d of %d", errUnexpectedReply, i, len(replies))
			}
			replies[i] = replyError(msg)
		}
	}
	return replies, nil
}

func windowArg(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// payloadArg is the payload field's value: a NULL payload is an empty one, marked by
// the tombstone field.
func payloadArg(e *outbox.Event) any {
	if e.Payload == nil {
		return ""
	}
	return e.Payload
}

// appendExtraFields appends the count of e's extra fields and their name, value
// pairs: the headers taken from columns, then tombstone for a NULL payload.
func appendExtraFields(args []any, e *outbox.Event) []any {
	n := 0
	for _, h := range e.Headers {
		if !h.Null {
			n++
		}
	}
	if e.NullPayload {
		n++
	}
	args = append(args, n)
	for _, h := range e.Headers {
		if !h.Null { // a NULL column: no field
			args = append(args, h.Key, h.Value)
		}
	}
	if e.NullPayload {
		args = append(args, "tombstone", "true")
	}
	return args
}
