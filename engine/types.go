package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/wal"
)

// The data model types are defined in internal/point and re-exported here.
type (
	Point    = point.Point
	Tag      = point.Tag
	Field    = point.Field
	Value    = point.Value
	Kind     = point.Kind
	Sample   = point.Sample
	Selector = point.Selector
	Matcher  = point.Matcher
	MatchOp  = point.MatchOp
)

// Match operators of a Matcher, as PromQL's label matchers.
const (
	MatchEqual     = point.MatchEqual     // =
	MatchNotEqual  = point.MatchNotEqual  // !=
	MatchRegexp    = point.MatchRegexp    // =~ (RE2, fully anchored)
	MatchNotRegexp = point.MatchNotRegexp // !~
)

// Value kinds.
const (
	KindFloat  = point.KindFloat
	KindInt    = point.KindInt
	KindUint   = point.KindUint
	KindBool   = point.KindBool
	KindString = point.KindString
)

// Value constructors.
func Float(v float64) Value { return point.Float(v) }
func Int(v int64) Value     { return point.Int(v) }
func Uint(v uint64) Value   { return point.Uint(v) }
func Bool(v bool) Value     { return point.Bool(v) }
func String(v string) Value { return point.String(v) }

// Errors returned by the engine. Match them with errors.Is.
var (
	ErrClosed            = base.ErrClosed
	ErrFieldTypeConflict = base.ErrFieldTypeConflict
	ErrInvalid           = base.ErrInvalid
	ErrCorrupt           = base.ErrCorrupt
	// ErrLocked is returned by Open when another DB, in this process or
	// another, has the directory open.
	ErrLocked = base.ErrLocked
	// ErrReadOnly is returned by Write, Delete, Flush and Compact on a DB
	// opened with Options.ReadOnly.
	ErrReadOnly = base.ErrReadOnly
	// ErrNotDatabase is returned by Open for a non-empty directory that holds
	// no strata database, and, with ReadOnly, for a missing or empty one.
	ErrNotDatabase = base.ErrNotDatabase
)

// CorruptionError locates damaged bytes; it matches ErrCorrupt.
type CorruptionError = base.CorruptionError

// PointError names the point of a Write call that was rejected.
type PointError = base.PointError

// SyncMode says when the WAL is fsynced.
type SyncMode = wal.SyncMode

const (
	// SyncAlways fsyncs before Write returns; concurrent writers share fsyncs.
	SyncAlways = wal.SyncAlways
	// SyncInterval fsyncs in the background at most every SyncInterval.
	SyncInterval = wal.SyncInterval
	// SyncNever leaves flushing to the operating system.
	SyncNever = wal.SyncNever
)

// Aggregate selects the function a Query applies per bucket.
type Aggregate int

const (
	AggNone Aggregate = iota // raw samples
	AggCount
	AggSum
	AggMean
	AggMin
	AggMax
	AggFirst
	AggLast
)

var aggNames = [...]string{"none", "count", "sum", "mean", "min", "max", "first", "last"}

func (a Aggregate) String() string {
	if a >= 0 && int(a) < len(aggNames) {
		return aggNames[a]
	}
	return fmt.Sprintf("Aggregate(%d)", int(a))
}

// ParseAggregate returns the Aggregate named s ("mean", "max", ...).
func ParseAggregate(s string) (Aggregate, error) {
	for i, n := range aggNames {
		if n == s {
			return Aggregate(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown aggregate %q", ErrInvalid, s)
}

// Query selects series and a time range, optionally aggregated in buckets.
type Query struct {
	Selector
	Agg   Aggregate // AggNone (raw samples), AggCount, ...
	Every int64     // bucket width in ns for Agg; 0 = one bucket over [Start, End)
	// GroupBy, when non-nil, aggregates the matching series of one field
	// that share the values of these tag keys together: one result per
	// (field, distinct values). An empty non-nil slice puts every matching
	// series of a field in one group. GroupBy with AggNone is ErrInvalid.
	GroupBy []string
}

// SeriesInfo describes one stored series without its samples.
type SeriesInfo struct {
	Measurement string
	Tags        []Tag // sorted by key
	Field       string
	Kind        Kind
}

// Series is one series of a query result.
type Series struct {
	Measurement string
	Tags        []Tag // sorted by key
	Field       string
	Samples     []Sample // sorted by Time; for Agg != AggNone, Time is the bucket start
}

// Options configure a DB. A nil *Options and every zero field mean the default.
type Options struct {
	Sync          SyncMode      // SyncAlways (default), SyncInterval, SyncNever
	SyncInterval  time.Duration // for SyncInterval; default 100ms
	MemTableBytes int64         // flush threshold; default 64 MiB
	Retention     time.Duration // 0 = keep forever; older data is dropped by compaction

	// Logger receives recovery, flush and compaction events; default slog.Default().
	Logger *slog.Logger
	// WALSegmentBytes is the size at which a WAL file is rolled; default 64 MiB.
	WALSegmentBytes int64
	// BlockSamples is the most samples per segment block; default 1000.
	BlockSamples int
	// MaxImmutableMemTables is how many sealed memtables may wait for flush
	// before writers block; default 2. Writers are slowed before that.
	MaxImmutableMemTables int
	// DisableBackgroundCompaction stops the engine from compacting on its
	// own; Compact still works.
	DisableBackgroundCompaction bool
	// L0CompactionTrigger is the number of L0 segments that starts a
	// compaction; default 4.
	L0CompactionTrigger int
	// L0StopWritesTrigger is the number of L0 segments at which writers wait
	// for compaction; default 12.
	L0StopWritesTrigger int
	// LevelMultiplier is the size ratio between adjacent levels; default 10.
	LevelMultiplier int
	// L1TargetBytes is the target size of level 1; default 64 MiB.
	L1TargetBytes int64
	// TargetSegmentBytes is the size at which compaction cuts an output
	// segment; default 64 MiB.
	TargetSegmentBytes int64
	// Now returns the current time, for retention; default time.Now.
	Now func() time.Time
	// ReadOnly opens an existing database without creating, writing,
	// deleting or truncating anything and without taking the write lock:
	// it serves a snapshot as of Open, beside a writer in another process.
	// Write, Delete, Flush and Compact return ErrReadOnly.
	ReadOnly bool

	// fs is the filesystem; nil means the operating system's. Tests in this
	// package set it to inject faults.
	fs vfs.FS
}
