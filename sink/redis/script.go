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
	"github.com/walrelay/walrelay/record"
)

// duplicate is the script's reply for an event whose id the stream already got
// within the dedup window. Entry ids look like 1700000000000-0, so it cannot clash.
const duplicate = "duplicate"

// argsPerEvent is room for the ARGV values of one event after the two leading
// ones: the number of its fields, then each field as a name, value pair (walrelay's
// own headers and the payload; the headers from columns and tombstone come on top).
const argsPerEvent = 1 + 2*(record.OwnHeaders+1)

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
for i = 1, #KEYS / 2 do
  local stream, dedup = KEYS[2 * i - 1], KEYS[2 * i]
  local fields = tonumber(ARGV[a + 1])
  local args
  if trim then
    args = {stream, 'MAXLEN', '~', ARGV[2], '*'}
  else
    args = {stream, '*'}
  end
  local n = #args
  for k = 1, 2 * fields do
    args[n + k] = ARGV[a + 1 + k]
  end
  a = a + 1 + 2 * fields
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
		args = s.appendFields(args, e)
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

// appendFields appends the count of e's entry fields and their name, value pairs,
// as package record makes them: walrelay's own headers (record.Format.Own), payload
// (the record value; empty for a tombstone), the headers taken from columns (a null
// value as an empty field), then tombstone = true for a tombstone.
func (s *Sink) appendFields(args []any, e *outbox.Event) []any {
	f := &s.cfg.Format
	var created [record.CreatedLen]byte
	own, n := f.Own(e, &created)
	value, tombstone := f.Value(e)
	count := len(args)
	args = append(args, 0)
	for _, h := range own[:n] {
		args = append(args, h.Key, string(h.Value))
	}
	args = append(args, "payload", bulk(value))
	for _, h := range e.Headers {
		if v, ok := f.HeaderValue(h); ok {
			args = append(args, h.Key, bulk(v))
		}
	}
	if tombstone {
		args = append(args, "tombstone", "true")
	}
	args[count] = (len(args) - count - 1) / 2
	return args
}

// bulk is b as a script argument; a nil (a tombstone, a null header value) is an
// empty string, which go-redis writes for certain.
func bulk(b []byte) any {
	if b == nil {
		return ""
	}
	return b
}
