package point

import "errors"

// SeriesRef names a series for an appender without its names: 0 means
// unknown. package engine re-exports it as engine.SeriesRef; what a ref
// holds is the engine's business (see engine/appender.go).
type SeriesRef uint64

// SampleAppender is the appender interface that decoders outside package
// engine (lineproto) write through without importing it. *engine.Appender
// has its first three methods; the engine's DB.SampleAppender returns one
// with all of them.
type SampleAppender interface {
	// Append adds one sample to the pending batch (see engine.Appender).
	Append(ref SeriesRef, measurement string, tags []Tag, field string, t int64, v Value) (SeriesRef, error)
	// Commit stores the pending batch atomically, as one Write.
	Commit() error
	// Rollback drops the pending batch.
	Rollback() error
	// Pending returns the number of samples pending.
	Pending() int
	// Truncate drops the pending samples after the first n, and the new
	// series that only they named: what Append added since Pending
	// returned n. A decoder uses it to take back the fields of a line
	// whose later field is refused, since a line is stored whole or not at
	// all.
	Truncate(n int)
}

// CompareTags orders tags by key, as a canonical series key does.
func CompareTags(a, b Tag) int { return cmpTag(a, b) }

// ErrBatchFull is matched (besides ErrInvalid) by an appender's refusal of
// a sample that would take its pending batch past MaxWriteBytes: commit
// the batch and append the sample again.
var ErrBatchFull = errors.New("batch full")
