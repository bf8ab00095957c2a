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

// The data model types are defined in internal/point, where the leaf
// packages (wal, memtable, segment, compaction) can use them without
// importing engine, and are aliases here: an engine.Point is a point.Point.
// Each alias' comment shows the type's exported shape, since go doc prints
// an alias without its fields; TestAliasDocs keeps them in step.

// Point is one measurement at one time: a tag set and one or more fields.
//
//	type Point struct {
//		Measurement string
//		Tags        []Tag   // any order; duplicate keys are an error
//		Fields      []Field // at least one
//		Time        int64   // Unix ns
//	}
type Point = point.Point

// Tag is a key=value pair that identifies a series.
//
//	type Tag struct{ Key, Value string }
type Tag = point.Tag

// Field is one named value of a point.
//
//	type Field struct {
//		Key   string
//		Value Value
//	}
type Field = point.Field

// Value is a field value of one of the five kinds: make one with Float,
// Int, Uint, Bool or String. The zero Value has no kind and is never stored.
//
//	func (v Value) Kind() Kind      // KindFloat, KindInt, KindUint, KindBool, KindString
//	func (v Value) Float() float64  // the value, or the zero value for another kind
//	func (v Value) Int() int64
//	func (v Value) Uint() uint64
//	func (v Value) Bool() bool
//	func (v Value) Str() string
//	func (v Value) String() string  // any kind, formatted for people
//	func (v Value) Equal(w Value) bool // same kind and value; NaN equals NaN
//	func (v Value) Bits() uint64    // the 64-bit payload of a number or bool (floats as IEEE-754 bits)
type Value = point.Value

// Kind is the type of a field's values. A series' kind is fixed by its
// first write, for the life of the database.
//
//	func (k Kind) Valid() bool   // one of the five storable kinds
//	func (k Kind) Numeric() bool // float, int or uint: sum, mean, min and max apply
//	func (k Kind) String() string
type Kind = point.Kind

// Sample is one timestamped value of a series.
//
//	type Sample struct {
//		Time  int64 // Unix ns
//		Value Value
//	}
type Sample = point.Sample

// Selector picks series and a half-open time range. Query and Delete take
// one (Measurement required); the metadata calls and Last too
// (Measurement "" = every measurement).
//
//	type Selector struct {
//		Measurement string    // required for Query and Delete; "" = every measurement for the metadata calls
//		Field       string    // "" = every field
//		Tags        []Tag     // exact-match filters, ANDed; empty = every series of the measurement
//		Matchers    []Matcher // more filters, ANDed with Tags
//		Start, End  int64     // half-open [Start, End) in Unix ns; Start == End == 0 means all time
//	}
type Selector = point.Selector

// Matcher filters series by one tag, as a PromQL label matcher: a series
// that lacks the tag key has the value "" for it, so k != "x" matches
// series without k, k = "" matches exactly the series without k, and
// k =~ ".*" matches every series. A regexp uses RE2 syntax and must match
// the whole value; an invalid one is ErrInvalid.
//
//	type Matcher struct {
//		Key   string
//		Op    MatchOp // MatchEqual (the zero value), MatchNotEqual, MatchRegexp, MatchNotRegexp
//		Value string
//	}
type Matcher = point.Matcher

// MatchOp is the operator of a Matcher.
//
//	func (op MatchOp) String() string // "=", "!=", "=~", "!~"
//	func (op MatchOp) Valid() bool    // one of the four operators
type MatchOp = point.MatchOp

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
	// ErrSeriesLimit: a write would create a series past MaxSeries or
	// MaxSeriesPerMeasurement. It fails whole; writes to existing series go on.
	ErrSeriesLimit = base.ErrSeriesLimit
	ErrCorrupt     = base.ErrCorrupt
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

// CorruptionError locates damaged bytes; errors.Is(err, ErrCorrupt) is
// true for it, and errors.As gives the location.
//
//	type CorruptionError struct {
//		Path   string // file the bad bytes were read from
//		Offset int64  // byte offset of the damaged record, block or section
//		Err    error  // what failed: a checksum, a magic, a length, ...
//	}
type CorruptionError = base.CorruptionError

// PointError names the point of a Write call that was rejected; Err wraps
// ErrInvalid or ErrFieldTypeConflict.
//
//	type PointError struct {
//		Index int   // index of the point in the slice passed to Write
//		Err   error // the reason
//	}
type PointError = base.PointError

// SyncMode says when the WAL is fsynced: SyncAlways, SyncInterval or
// SyncNever.
//
//	func (m SyncMode) String() string
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
	// RetentionRules set the retention of the series they select, first
	// match wins; the others keep Retention. See DB.SetRetentionRules.
	RetentionRules []RetentionRule
	// Rollups downsample the series they select after a while; every
	// matching rule applies, as a cascade. See DB.SetRollups.
	Rollups []RollupRule

	// MaxDiskBytes bounds the database's files; 0 = no bound. Past it,
	// compaction drops the oldest samples (by time, over all series) until
	// the files are under 90% of it. The time now kept is in Stats.
	MaxDiskBytes int64
	// MaxSeries bounds the series of the database; 0 = no bound. A Write
	// that would create a series beyond it fails whole with a *PointError
	// wrapping ErrSeriesLimit; writes to existing series go on.
	MaxSeries int
	// MaxSeriesPerMeasurement is MaxSeries per measurement.
	MaxSeriesPerMeasurement int

	// Logger receives recovery, flush and compaction events; default slog.Default().
	Logger *slog.Logger
	// WALSegmentBytes is the size at which a WAL file is rolled; default 64 MiB.
	WALSegmentBytes int64
	// BlockSamples is the most samples per segment block; default 1000.
	BlockSamples int
	// MaxImmutableMemTables is how many sealed memtables may wait for flush
	// before writers block; default 2. Writers are slowed before that. Up
	// to this many, and one per core, are flushed at once.
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
