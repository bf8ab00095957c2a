// Package bench is strata's insert baseline: the same deterministic IoT
// dataset written into strata, SQLite, LevelDB, Pebble and Prometheus'
// TSDB, with the same batches, and the figures put side by side beside an
// in-memory floor (`strata bench`). Run is the baseline; RunScale sweeps
// the data size or the series count; RunMixed runs writes and queries
// together.
//
// # Engines
//
// strata (engine.DB.Write), SQLite, LevelDB, Pebble, prometheus (the TSDB's
// head appender, one Commit per batch, series references cached per
// series, labels __name__ = measurement_field plus the tags, millisecond
// times; queried through its Querier, means computed in Go) and memlimit,
// the in-memory floor: per-series slices of samples, no log, no disk, no
// encoding, drawn as a line and never ranked. It does per point only what
// any engine must, find the series and append the sample: the series is
// found through one map lookup by tag set that builds no key and allocates
// nothing (the seriesIndex, which LevelDB, Pebble and Prometheus use too,
// so that no adapter spends more than the engine on finding series), so
// no engine inserts faster and the distance to it is what the engine
// costs (BenchmarkFloor). EngineNotes
// states each engine's fsync parity; Supports which configuration and
// durability it runs in (Prometheus fast only: it fsyncs its WAL when a
// 128 MiB segment fills and on Close, never per commit; the floor
// default/fast only). strata-http is strata behind
// `strata serve`'s /api/v2/write on loopback, one line-protocol request
// per batch: the cost of ingesting over HTTP.
// BenchmarkRangeScanVsVictoriaMetrics times the range scan of 1,000 series
// x 600 samples after a reopen against VictoriaMetrics' lib/storage, built
// from its Go module and run in its own process (internal/vmscan).
//
// # Dataset
//
// IoT builds the baseline (1,000 devices x 1,000 timestamps, a random-walk
// temperature per device, rounded to 0.01, at 1 s from 2023-11-14T22:13:20Z,
// all devices at t0, then all at t1, ...), SonnetDB one series of random
// values, and the wide shape 1,000 devices x 30 walks x 12 timestamps.
// Stream is the mixed workload's endless IoT stream whose values are a hash
// of (field, device, step), so any answer can be checked without keeping
// what was written. Both are generated from seeded PCGs, so every run and every engine
// sees the same points; Dataset.Batches yields them as []engine.Point.
//
// # What is measured
//
// Each engine, configuration, durability and run gets a fresh directory and,
// from the command, a fresh child process. The dataset is generated before
// the clock starts. The insert time runs from before the engine's Open to
// after its Close, so the work each engine does before Close returns
// (flushes, compactions it waits for, final fsyncs) counts for every engine
// alike. Work an engine defers past Close does not: LevelDB and Pebble leave
// their last memtable in their WAL and replay it on the next Open, where
// strata flushes it on Close. Alongside the time:
//
//   - Go heap bytes allocated (runtime.MemStats.TotalAlloc over the same
//     window); memory allocated in C is absent: SQLite's page cache and
//     Pebble's memtables (built with cgo, Pebble allocates them with calloc);
//   - peak RSS over the same window (VmHWM, reset before Open where Linux
//     allows), including the Go runtime and the dataset's values (8 bytes
//     per field per point), which every engine carries alike; in-process runs
//     share one process, so only child runs isolate this figure;
//   - bytes on disk: the sum of the file sizes in the engine's directory
//     after Close, logs included (SQLite checkpoints and removes its WAL on
//     Close; LevelDB and Pebble keep theirs);
//   - after reopening, three queries timed once each (a point query of one
//     device and one minute, a range scan of every device over ten minutes,
//     a 1-minute mean per device over the whole range), each answered by the
//     engine's natural means: strata's Query with AggMean, SQL with GROUP BY
//     for SQLite, iterators and means computed in Go for LevelDB and Pebble.
//     Every row is checked against the dataset itself (bit-exact for raw
//     samples, within 1e-9 relative for means), and a digest of each answer
//     (row count, series, times, values) against the one of the answer the
//     dataset gives; a difference is reported as a *CheckError naming the
//     engine, and Run returns an error matching ErrMismatch.
//
// Times are the medians of the runs; so are the memory, disk and query
// figures. The ratio to SQLite compares insert times in the same
// configuration and durability.
//
// # Sweeps
//
// RunScale inserts IoT datasets of growing size, one run each: 1M, 10M and
// 100M points at 1,000 series, or 1k, 10k, 100k and 1M series at 10 points
// each (3 at 1M). An engine that does not finish a size (insert and
// queries) within the limit is killed, reported "over limit" and runs no
// larger size. Points/s, bytes per point and peak RSS are drawn against
// the size.
//
// # Mixed workload
//
// RunMixed measures each engine's peak rate by an unthrottled insert of
// the stream into a directory of its own, then, in a fresh one, paces a
// writer at a share (0.8) of it while reader goroutines loop over the point
// query (last 60 s of one device), the range scan (last 600 s of all) and
// the 1-minute means (last 1,000 s of all), always over data already
// acknowledged. It reports write and query latency (p50 and p99 to three
// significant digits from HDR histograms, exact max), how far the writer
// fell behind its schedule, write stalls (write calls longer than a
// batch's share of the schedule, and the engine's own count where it
// keeps one), compactions run (strata and Pebble from their statistics,
// Prometheus from its metrics) and throughput per second. Every answer's
// row and series counts are checked as it comes, and an evenly spread
// sample of them (2,000 to 4,000 point queries, 200 to 400 of each other
// query) row by row after the run. What the run keeps does not grow with
// its length beyond the per-second throughput, so --duration 30m works:
// the engines hold their memory within their budgets, and the floor, which
// has no disk to flush to, drops the samples no reader can still ask for
// (older than the widest window and every window being read).
//
// # Durability
//
// Fast fsyncs no batch: SQLite synchronous=NORMAL in WAL mode (it syncs at
// checkpoints only), LevelDB and Pebble with Sync false, strata SyncNever.
// Durable fsyncs every batch before the write returns: SQLite
// synchronous=FULL, LevelDB and Pebble with Sync true, strata SyncAlways.
// A batch is one SQLite transaction (one prepared statement), one
// leveldb.Batch, one pebble.Batch, or one engine.DB.Write call.
//
// # Configurations
//
// Default gives each library its own defaults (strata: 64 MiB memtable;
// SQLite: 2 MiB page cache; LevelDB and Pebble: 4 MiB write buffer or
// memtable, 8 MiB block cache). Equal-memory gives every engine the same
// 64 MiB for the write path: SQLite cache_size=-65536 (64 MiB of pages),
// LevelDB WriteBuffer and Pebble MemTableSize of 64 MiB (their block caches
// stay at 8 MiB), strata MemTableBytes of 64 MiB (its default). None of the
// engines is otherwise tuned.
//
// # Storage layouts
//
// SQLite stores series in their own table (id, canonical key, measurement,
// field) and samples in a WITHOUT ROWID table keyed by (series, ts). LevelDB
// and Pebble store a sample under series id (8 bytes) + time (8 bytes,
// big-endian, sign bit flipped) with the float's 8 bytes as value, and the
// series dictionary under id 0. Strata stores what the engine stores.
package bench
