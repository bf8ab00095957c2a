package engine

import (
	"sync/atomic"
	"time"
)

// stats are the engine's counters; Stats reads them.
type stats struct {
	pointsWritten          atomic.Int64
	samplesWritten         atomic.Int64
	deletes                atomic.Int64
	flushes                atomic.Int64
	flushNanos             atomic.Int64
	flushBytes             atomic.Int64
	compactions            atomic.Int64
	compactionNanos        atomic.Int64
	compactionBytesRead    atomic.Int64
	compactionBytesWritten atomic.Int64
	writeStalls            atomic.Int64
	writeSlowdowns         atomic.Int64
	compactionYields       atomic.Int64
	blocksPushedDown       atomic.Int64
	seriesLimitRefusals    atomic.Int64
	rollupCompactions      atomic.Int64
	samplesRolledUp        atomic.Int64
	rollupBucketsWritten   atomic.Int64
	rollupBucketsCascaded  atomic.Int64
}

// Stats is a point-in-time view of a DB's state and counters.
type Stats struct {
	Series             int     // series known to the catalog
	MemTableBytes      int64   // active plus sealed memtables
	ImmutableMemTables int     // sealed memtables waiting for flush
	SegmentsPerLevel   []int   // index = level
	BytesPerLevel      []int64 // index = level
	DiskBytes          int64   // segments plus WAL
	WALBytes           int64
	SegmentSamples     int64 // samples held in segments (not yet in the memtables)
	Tombstones         int

	PointsWritten  int64
	SamplesWritten int64
	Deletes        int64

	Flushes       int64
	FlushDuration time.Duration
	FlushedBytes  int64

	Compactions            int64
	CompactionDuration     time.Duration
	CompactionBytesRead    int64
	CompactionBytesWritten int64
	PendingCompactionBytes int64
	// WriteAmplification is (flushed + compaction-written bytes) / flushed
	// bytes: how many times each flushed byte was written to segments.
	WriteAmplification float64

	WriteStalls    int64 // writes that waited for a flush or compaction
	WriteSlowdowns int64 // writes delayed to let background work catch up
	// CompactionYields counts the pauses of compactions for a flush that
	// stalled writers waited on.
	CompactionYields int64
	BlocksPushedDown int64 // segment blocks aggregated from their stats alone

	// SeriesLimitRefusals counts new series refused for MaxSeries or
	// MaxSeriesPerMeasurement (each refusal fails one Write call).
	SeriesLimitRefusals int64

	// OldestKept is the expiry floor, in Unix ns: samples older are gone
	// for good, dropped by Retention or, past MaxDiskBytes, by the disk
	// budget (the time the database now keeps). math.MinInt64 while
	// nothing has been dropped.
	OldestKept int64

	// Downsampling (Options.Rollups), counted by compaction since Open.
	RollupCompactions     int64 // compactions that rolled up raw samples or cascaded buckets
	SamplesRolledUp       int64 // raw samples folded into rollup buckets
	RollupBucketsWritten  int64 // buckets compactions wrote, those carried over unchanged included
	RollupBucketsCascaded int64 // buckets merged into a coarser rule's bucket
	// RollupLevels describes, by Every ascending, the rollup buckets the
	// segments hold: how many, and where the newest of each Every ends.
	// Filled while rollup rules are set (Options.Rollups, SetRollups).
	RollupLevels []RollupLevelStats
}

// Stats returns the DB's current statistics.
func (db *DB) Stats() Stats {
	var s Stats
	db.mu.Lock()
	if db.mu.mem != nil {
		s.MemTableBytes = db.mu.mem.t.Bytes()
	}
	for _, m := range db.mu.imm {
		s.MemTableBytes += m.t.Bytes()
	}
	s.ImmutableMemTables = len(db.mu.imm)
	s.Tombstones = len(db.mu.tombstones)
	v := db.mu.v
	if v != nil {
		v.Ref()
	}
	db.mu.Unlock()
	s.SegmentsPerLevel = make([]int, maxLevels)
	s.BytesPerLevel = make([]int64, maxLevels)
	if v != nil {
		for l, level := range v.Levels {
			s.SegmentsPerLevel[l] = len(level)
			for _, h := range level {
				s.BytesPerLevel[l] += h.Meta.Size
				s.DiskBytes += h.Meta.Size
				s.SegmentSamples += h.Meta.Samples
			}
		}
		s.PendingCompactionBytes = db.policy.PendingBytes(infos(v))
		if db.rollups.Load() != nil {
			s.RollupLevels = db.rollupExt.levels(v)
		}
		db.unrefVersion(v)
	}
	if !db.closed.Load() && db.wal != nil {
		s.WALBytes = db.wal.Size()
	}
	s.DiskBytes += s.WALBytes
	s.Series = db.cat.Len()
	s.PointsWritten = db.st.pointsWritten.Load()
	s.SamplesWritten = db.st.samplesWritten.Load()
	s.Deletes = db.st.deletes.Load()
	s.Flushes = db.st.flushes.Load()
	s.FlushDuration = time.Duration(db.st.flushNanos.Load())
	s.FlushedBytes = db.st.flushBytes.Load()
	s.Compactions = db.st.compactions.Load()
	s.CompactionDuration = time.Duration(db.st.compactionNanos.Load())
	s.CompactionBytesRead = db.st.compactionBytesRead.Load()
	s.CompactionBytesWritten = db.st.compactionBytesWritten.Load()
	if s.FlushedBytes > 0 {
		s.WriteAmplification = float64(s.FlushedBytes+s.CompactionBytesWritten) / float64(s.FlushedBytes)
	}
	s.WriteStalls = db.st.writeStalls.Load()
	s.WriteSlowdowns = db.st.writeSlowdowns.Load()
	s.CompactionYields = db.st.compactionYields.Load()
	s.BlocksPushedDown = db.st.blocksPushedDown.Load()
	s.SeriesLimitRefusals = db.st.seriesLimitRefusals.Load()
	s.OldestKept = db.vis.floor.Load()
	s.RollupCompactions = db.st.rollupCompactions.Load()
	s.SamplesRolledUp = db.st.samplesRolledUp.Load()
	s.RollupBucketsWritten = db.st.rollupBucketsWritten.Load()
	s.RollupBucketsCascaded = db.st.rollupBucketsCascaded.Load()
	return s
}
