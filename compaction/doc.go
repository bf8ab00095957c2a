// Package compaction holds the mechanism and the policy of strata's leveled
// compaction. It decides what to merge (Policy.Pick) and merges segments
// (Merge); the engine owns the manifest, names the output files, runs the
// plans in the background and publishes their results atomically.
//
// # Level structure
//
// Segments live in levels L0..L(MaxLevels-1):
//
//	L0   fresh memtable flushes, newest FileNum last. They may overlap each
//	     other in series keys and in time, so a query reads every one of them.
//	L1   segments whose [FirstKey, LastKey] ranges are disjoint: a series is
//	     in at most one segment of the level. Target size L1TargetBytes.
//	L2.. the same, each level Multiplier times the target of the one above.
//	     The last level has no target: data that reaches it stays there.
//
// For any one series, data in a lower-numbered level is newer than data in
// a higher-numbered one, and within L0 a higher FileNum is newer. Every plan
// keeps that order: L0 is always compacted as a whole into L1, and a level
// n segment is merged with all the level n+1 segments its key range touches,
// so the outputs slot into level n+1 without overlapping what is left there.
// Merge resolves duplicates by input order (last write wins), so Plan.Inputs
// lists segments oldest first.
//
// A query for one series therefore opens at most len(L0) segments plus one
// per non-empty level; with work drained that is below
// L0Trigger + MaxLevels - 1.
//
// # Priorities
//
// Pick returns, in this order: whole segments whose data is all older than
// the retention cutoff (deleted without reading); L0 when it holds L0Trigger
// segments or more; the level whose size is furthest over its target; and
// last, clean-up rewrites of segments that hold deleted (tombstoned) data or,
// at the bottom level, a good share of expired data.
//
// # Write amplification
//
// Every sample is written once to the WAL and once by the flush into L0.
// An L0->L1 compaction rewrites, with the L0 segments, every L1 segment in
// their key range; in a time-series workload each flush usually spans most
// series keys, so that is most of L1. Below L1, pushing a segment from level
// n rewrites it together with the level n+1 segments its key range touches,
// up to Multiplier times its size once the levels are full: each level a
// sample descends through costs it up to Multiplier+1 writes, about half
// that on average. Write amplification is thus roughly
// 2 + (L1 rewrites) + (levels below L1 in use) x Multiplier/2, the usual
// price of leveled compaction for reading one segment per level. Retention
// is cheap: segments whose data has all expired are deleted without being
// read, and the bottom level is rewritten for expiry only once
// ExpiredFraction of a segment has expired. MergeStats reports the bytes
// each merge read and wrote, from which the engine reports the measured
// figure.
//
// # Merge
//
// Merge is a streaming k-way merge: series in key order across the inputs,
// and within a series the samples of the inputs in time order. At any moment
// it holds one decoded block per input plus one output block, never a whole
// series or segment, so compaction memory is independent of data size.
// Blocks that retention or a delete range covers entirely are skipped
// without being read.
//
// # Compatibility
//
// This package is a building block of package engine, public so that the
// layout of the storage engine can be read and tested piece by piece. Its
// API has no compatibility promise and its signatures use types internal to
// strata (vfs.FS, point.Kind, ...): programs use package engine.
package compaction
