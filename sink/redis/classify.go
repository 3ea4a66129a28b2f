package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// class is what to do about a failed write.
type class int

const (
	// retry: no answer from Redis (network, timeout, closed connection) or an answer
	// about the server's state right now (loading, read-only replica, out of memory,
	// busy script, cluster down). The batch is sent again; dedup makes that safe.
	retry class = iota
	// reject: Redis refused this write for a reason that will repeat (the stream key
	// holds another type, an argument it does not accept, an ACL denial). About one
	// entry it is an *sink.EventError; about the whole script call, a broker error.
	reject
)

func (c class) String() string {
	if c == retry {
		return "retry"
	}
	return "reject"
}

// transient are the error codes of a server that will take the write later.
var transient = []string{
	"LOADING",     // replaying its AOF or RDB after a restart
	"READONLY",    // a replica, until failover makes it the primary
	"MASTERDOWN",  // a replica that lost its primary
	"CLUSTERDOWN", // a cluster without quorum
	"TRYAGAIN",    // a cluster resharding
	"OOM",         // maxmemory reached: the server as a whole, not this event
	"BUSY",        // another script runs past lua-time-limit
	"NOREPLICAS",  // min-replicas-to-write not met
	"NOSCRIPT",    // script cache flushed between EVALSHA and the fallback EVAL
}

// classify decides on err from Redis or from reaching it: any error that is not a
// Redis error reply (or a reply the script cannot give) is a failure to get an
// answer and is retried.
func classify(err error) class {
	if errors.Is(err, errUnexpectedReply) {
		return reject
	}
	var rErr goredis.Error
	if !errors.As(err, &rErr) {
		return retry
	}
	if goredis.IsMaxClientsError(err) {
		return retry
	}
	code, _, _ := strings.Cut(rErr.Error(), " ")
	for _, t := range transient {
		if code == t {
			return retry
		}
	}
	return reject
}
