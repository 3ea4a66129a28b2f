package poller

// RowVersion is one version of a row as a statement read it from its table: where it
// lies and the transaction that wrote it. It names the row also when its id is NULL,
// and the pair cannot name another row: a position is reused only after its row is
// gone, by a row another transaction writes (or this one, once that row is deleted,
// which an outbox row a pass reads is not).
type RowVersion struct {
	Position string // ctid
	Table    uint32 // tableoid: a partitioned table's positions repeat across its partitions
	Xmin     uint32
}
