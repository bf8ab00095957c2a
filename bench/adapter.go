package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stratadb/strata/engine"
)

// Config selects how much memory the engines are given.
type Config string

const (
	// ConfigDefault runs each library with its own defaults.
	ConfigDefault Config = "default"
	// ConfigEqualMemory gives every engine the same 64 MiB for its write
	// path: see the package documentation for what each one gets.
	ConfigEqualMemory Config = "equal-memory"
)

// equalMemory is the budget of ConfigEqualMemory.
const equalMemory = 64 << 20

// Durability selects when the engines fsync.
type Durability string

const (
	// Fast fsyncs no batch: the operating system decides when data reaches
	// the disk.
	Fast Durability = "fast"
	// Durable fsyncs every batch before the write call returns.
	Durable Durability = "durable"
)

// Engine names.
const (
	EngineStrata     = "strata"
	EngineSQLite     = "sqlite"
	EngineLevelDB    = "leveldb"
	EnginePebble     = "pebble"
	EnginePrometheus = "prometheus"
	// EngineMemLimit is the in-memory floor, not a competitor.
	EngineMemLimit = "memlimit"
	// EngineStrataHTTP is strata ingesting line protocol through `strata
	// serve`'s /api/v2/write, one request per batch.
	EngineStrataHTTP = "strata-http"
)

// Engines returns the names of the engines the bench knows, in the default
// order.
func Engines() []string {
	return []string{EngineStrata, EngineSQLite, EngineLevelDB, EnginePebble, EnginePrometheus, EngineMemLimit, EngineStrataHTTP}
}

// Supports reports whether an engine runs in a configuration and
// durability. Prometheus fsyncs no commit, so it has no durable column;
// the floor has neither durability nor configuration and runs in
// default/fast only.
func Supports(eng string, cfg Config, dur Durability) bool {
	switch eng {
	case EnginePrometheus:
		return dur == Fast
	case EngineMemLimit:
		return dur == Fast && cfg == ConfigDefault
	}
	return true
}

// IsFloor reports whether an engine is a floor (drawn as a line, never
// ranked) rather than a competitor.
func IsFloor(eng string) bool { return eng == EngineMemLimit }

// EngineNotes says, per engine, what its fast and durable columns fsync
// and what its equal-memory configuration changes: the parity the table
// rests on.
func EngineNotes() map[string]string {
	return map[string]string{
		EngineStrata:     "fast: SyncNever (WAL written, fsynced on roll and Close); durable: SyncAlways (fsync per Write); equal-memory: MemTableBytes 64 MiB (its default)",
		EngineSQLite:     "fast: WAL journal, synchronous=NORMAL (fsync at checkpoints); durable: synchronous=FULL (fsync per transaction); equal-memory: cache_size 64 MiB",
		EngineLevelDB:    "fast: Sync=false; durable: Sync=true (fsync per batch); equal-memory: WriteBuffer 64 MiB",
		EnginePebble:     "fast: NoSync; durable: Sync (fsync per batch); equal-memory: MemTableSize 64 MiB",
		EnginePrometheus: "fast only: the head's WAL is fsynced when a 128 MiB segment fills and on Close, never per commit; equal-memory: no matching knob (the head keeps 1.5 block ranges in memory), run with its defaults",
		EngineMemLimit:   "in-memory floor: per-series slices found by one map lookup per point, no WAL, no disk, no fsync; default/fast only",
		EngineStrataHTTP: "as strata, behind strata serve's /api/v2/write on loopback: one line-protocol request per batch",
	}
}

// store is one engine's database, opened by an opener.
type store interface {
	// write stores a batch through the engine's natural batch API. The
	// points are reused after write returns.
	write(points []engine.Point) error
	// query answers q into rs. Selectors name tags either not at all or
	// all of them (with the field); aggregates are AggNone and AggMean.
	query(ctx context.Context, q engine.Query, rs *resultSet) error
	close() error
}

// opener opens (creating if missing) an engine's database in dir.
type opener func(dir string, cfg Config, dur Durability) (store, error)

// openers maps engine names to their adapters. Tests add broken ones.
var openers = map[string]opener{
	EngineStrata:  openStrata,
	EngineSQLite:  openSQLite,
	EngineLevelDB: openLevelDB,
	EnginePebble:  openPebble,

	EnginePrometheus: openPrometheus,
	EngineMemLimit:   openMemLimit,
	EngineStrataHTTP: openStrataHTTP,
}

func lookup(name string) (opener, error) {
	if o, ok := openers[name]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("bench: unknown engine %q (known: %s)", name, strings.Join(Engines(), ", "))
}

var errUnsupported = errors.New("bench: query not supported by this adapter")

// keyBuilder turns a point's fields into canonical series keys without
// allocating: the key is built in a reused buffer.
type keyBuilder struct {
	buf  []byte
	tags []engine.Tag
}

// key returns the canonical key of field f of p. The returned bytes are
// valid until the next call.
func (kb *keyBuilder) key(p *engine.Point, f int) []byte {
	tags := p.Tags
	if !slices.IsSortedFunc(tags, cmpTag) {
		kb.tags = append(kb.tags[:0], tags...)
		slices.SortFunc(kb.tags, cmpTag)
		tags = kb.tags
	}
	kb.buf = engine.AppendSeriesKey(kb.buf[:0], p.Measurement, tags, p.Fields[f].Key)
	return kb.buf
}

func cmpTag(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) }

// seriesInfo is one entry of a series dictionary: the id an adapter assigned
// and the parts of the canonical key.
type seriesInfo struct {
	id          uint64
	key         string
	measurement string
	tags        []engine.Tag
	field       string
}

// matches reports whether s is selected by sel's measurement, field and
// tag filters.
func (s *seriesInfo) matches(sel *engine.Selector) bool {
	return s.measurement == sel.Measurement &&
		(sel.Field == "" || sel.Field == s.field) &&
		tagsMatch(s.tags, sel.Tags)
}

// floatValue returns the float of a field, which the adapters for SQLite and
// the key-value stores require.
func floatValue(p *engine.Point, f int) (float64, error) {
	v := p.Fields[f].Value
	if v.Kind() != engine.KindFloat {
		return 0, fmt.Errorf("bench: field %q is %v: the adapters store floats only", p.Fields[f].Key, v.Kind())
	}
	return v.Float(), nil
}
