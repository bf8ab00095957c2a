package engine

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/wal"
)

func walFiles(t *testing.T, dir string) []uint64 {
	t.Helper()
	nums, err := wal.Files(nil, filepath.Join(dir, walDirName))
	if err != nil {
		t.Fatal(err)
	}
	return nums
}

// A clean Close leaves no WAL file behind (the segments cover everything),
// reopening numbers files from the manifest's WAL start on (a number whose
// file held no record may be used again), and open/close cycles without
// writes do not pile up files.
func TestCloseRemovesWAL(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	m := NewRefModel()
	db := openDB(t, dir, opts)
	var last uint64
	for round := range 5 {
		pts := []Point{pt("m", nil, "v", Int(int64(round)), int64(round))}
		if round%2 == 0 { // odd rounds write nothing
			mustWrite(t, db, pts...)
			m.write(pts)
		}
		cur := db.wal.CurrentFile()
		if cur < last {
			t.Fatalf("round %d: wal file %d is below %d", round, cur, last)
		}
		last = cur
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if files := walFiles(t, dir); len(files) != 0 {
			t.Fatalf("round %d: wal files %v left after Close", round, files)
		}
		db = openDB(t, dir, opts)
		checkQuery(t, db, m, rawAll("m"), minTime, "after reopen")
	}
}

// Flush makes a Delete durable even when the memtable holds no sample:
// losing the unsynced WAL afterwards (SyncNever) must not bring the data
// back.
func TestFlushPersistsDelete(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncNever
	opts.DisableBackgroundCompaction = true
	db := openDB(t, dir, opts)
	mustWrite(t, db, pt("m", nil, "v", Int(1), 10), pt("m", nil, "v", Int(2), 20))
	mustFlush(t, db)
	mustDelete(t, db, Selector{Measurement: "m", Start: 0, End: 15})
	mustFlush(t, db)
	crash := crashCopy(t, dir)
	// Power loss under SyncNever: the WAL's contents are gone.
	if err := os.RemoveAll(filepath.Join(crash, walDirName)); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, crash, opts)
	got := samplesOf(t, mustQuery(t, db2, rawAll("m")))
	if len(got) != 1 || got[0].Time != 20 {
		t.Fatalf("after losing the WAL: %v, want only the sample at 20", got)
	}
}

// Buckets that would start below math.MinInt64 are clamped to it, so
// results stay sorted.
func TestBucketNearMinInt64(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", nil, "v", Int(1), math.MinInt64), pt("m", nil, "v", Int(2), math.MinInt64+5))
	res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Start: math.MinInt64, End: 0}, Agg: AggCount, Every: 3})
	got := samplesOf(t, res)
	// MinInt64 % 3 == -2: its bucket would start at MinInt64-1, so it is
	// clamped; MinInt64+5 is a multiple of 3 and starts its own bucket.
	if len(got) != 2 || got[0].Time != math.MinInt64 || got[1].Time != math.MinInt64+5 || got[0].Value.Int() != 1 {
		t.Fatalf("buckets %v, want [MinInt64:1 MinInt64+5:1]", got)
	}
}

// With background compaction off, L0 may grow past the stop trigger:
// nothing would ever compact it for a stalled writer.
func TestNoStallWithoutBackgroundCompaction(t *testing.T) {
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.L0CompactionTrigger = 1
	opts.L0StopWritesTrigger = 2
	db := openDB(t, t.TempDir(), opts)
	for i := range 6 {
		mustWrite(t, db, pt("m", nil, "v", Int(int64(i)), int64(i)))
		mustFlush(t, db)
	}
	if n := db.Stats().SegmentsPerLevel[0]; n != 6 {
		t.Fatalf("L0 holds %d segments, want 6", n)
	}
	mustCompact(t, db)
	if n := db.Stats().SegmentsPerLevel[0]; n != 0 {
		t.Fatalf("L0 holds %d segments after Compact", n)
	}
}

// A tombstone that cannot touch a segment (another series, another time)
// neither forces a rewrite of it nor lives forever: the next manifest edit
// records that the segment is unaffected and the tombstone is dropped.
func TestUnrelatedTombstonesArePruned(t *testing.T) {
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	mustWrite(t, db, pt("a", nil, "v", Int(1), 1))
	mustFlush(t, db)
	mustCompact(t, db)
	before := db.Stats()
	for i := range 20 {
		mustWrite(t, db, pt("z", nil, "v", Int(int64(i)), int64(100+i)))
		mustFlush(t, db)
		mustDelete(t, db, Selector{Measurement: "z", Start: 0, End: 1000})
		mustDelete(t, db, Selector{Measurement: "nothing", Start: 0, End: 1000})
		mustFlush(t, db)
		mustCompact(t, db)
	}
	st := db.Stats()
	if st.Tombstones != 0 {
		t.Errorf("%d tombstones live after every covered sample was rewritten", st.Tombstones)
	}
	// Series a's segment is rewritten only when merged with z's data, never
	// for the tombstones alone: compactions stay bounded by the flushes.
	if got := st.Compactions - before.Compactions; got > 40 {
		t.Errorf("%d compactions for 40 flushes of unrelated data", got)
	}
	if res := samplesOf(t, mustQuery(t, db, rawAll("a"))); len(res) != 1 {
		t.Fatalf("series a: %v", res)
	}
	if res := mustQuery(t, db, rawAll("z")); len(res) != 0 {
		t.Fatalf("series z survived its deletes: %v", res)
	}
}

// Background compaction that keeps failing stops writes with its error
// after its retries instead of leaving writers to stall; reopening without
// the fault finds every acknowledged point.
func TestCompactionFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	// Fail the creation of every segment after the two that the flushes make:
	// the third is the compaction's output.
	inj := &vfs.OnIndex{N: 2, Sticky: true, Match: func(op vfs.Op, name string) bool {
		return op == vfs.OpCreate && strings.HasSuffix(name, ".seg.tmp")
	}}
	opts := quietOptions()
	opts.L0CompactionTrigger = 2
	opts.fs = vfs.Inject(vfs.Default, inj.Injector())
	db := openDB(t, dir, opts)
	m := NewRefModel()
	for i := range 2 {
		pts := []Point{pt("m", nil, "v", Int(int64(i)), int64(i))}
		mustWrite(t, db, pts...)
		m.write(pts)
		mustFlush(t, db)
	}
	db.mu.Lock()
	for db.mu.bgErr == nil {
		db.mu.cond.Wait() // broadcast when the error is recorded
	}
	db.mu.Unlock()
	if inj.Count() != 2+compactionRetries {
		t.Errorf("%d segment creations, want 2 flushes + %d compaction attempts", inj.Count(), compactionRetries)
	}
	err := db.Write([]Point{pt("m", nil, "v", Int(9), 9)})
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Write after compaction failed for good = %v, want the injected error", err)
	}
	db.Close()

	opts.fs = nil
	db = openDB(t, dir, opts)
	checkQuery(t, db, m, rawAll("m"), minTime, "after reopen")
	mustCompact(t, db)
	checkQuery(t, db, m, rawAll("m"), minTime, "after compaction")
}

// Closing while the background compactor runs is not a compaction failure:
// nothing is logged at error level.
func TestCloseIsNotACompactionFailure(t *testing.T) {
	for range 5 {
		var logged strings.Builder
		opts := quietOptions()
		opts.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: &logged}, &slog.HandlerOptions{Level: slog.LevelError}))
		opts.L0CompactionTrigger = 2
		db := openDB(t, t.TempDir(), opts)
		for i := range 2 {
			mustWrite(t, db, pt("m", nil, "v", Int(int64(i)), int64(i)))
			mustFlush(t, db) // the second flush wakes the compactor
		}
		mustWrite(t, db, pt("m", nil, "v", Int(2), 2))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if s := logged.String(); s != "" {
			t.Fatalf("Close logged errors: %s", s)
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Replaying two Delete records must not let the second overwrite the
// first's tag filter (the decoder reuses its slices).
func TestReplayKeepsEachDeletesTags(t *testing.T) {
	dir := t.TempDir()
	o := quietOptions()
	o.DisableBackgroundCompaction = true
	db := openDB(t, dir, o)
	mustWrite(t, db, pt("cpu", []Tag{{Key: "host", Value: "a"}}, "v", Int(1), 10))
	mustFlush(t, db)
	mustDelete(t, db, Selector{Measurement: "cpu", Tags: []Tag{{Key: "host", Value: "a"}}, Start: 0, End: 100})
	mustDelete(t, db, Selector{Measurement: "mem", Tags: []Tag{{Key: "host", Value: "b"}}, Start: 0, End: 100})
	db2 := openDB(t, crashCopy(t, dir), o)
	if res := mustQuery(t, db2, rawAll("cpu")); len(res) != 0 {
		t.Fatalf("deleted sample is back after replay: %v", res)
	}
}

// A compaction output's applied-tombstone mark must hold for every input.
// Here a delete of series x arrives after the compaction took its snapshot,
// and a flush then raises the mark of the input holding only y past it
// (the delete cannot touch y). The output must still let the delete apply
// to x's sample.
func TestCompactionOutputMarkCoversAllInputs(t *testing.T) {
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.L0CompactionTrigger = 2
	db := openDB(t, t.TempDir(), opts)
	mustWrite(t, db, pt("x", nil, "v", Int(1), 1))
	mustFlush(t, db)
	mustWrite(t, db, pt("y", nil, "v", Int(2), 1))
	mustFlush(t, db)
	var once sync.Once
	db.testAfterCompactionSnapshot = func() {
		once.Do(func() {
			mustDelete(t, db, Selector{Measurement: "x", Start: 0, End: 10})
			mustWrite(t, db, pt("z", nil, "v", Int(3), 1))
			mustFlush(t, db) // its manifest edit raises y's segment past the delete
		})
	}
	mustCompact(t, db)
	if res := mustQuery(t, db, rawAll("x")); len(res) != 0 {
		t.Fatalf("deleted sample of x is back after compaction: %v", formatSeries(res))
	}
	for _, m := range []string{"y", "z"} {
		if res := samplesOf(t, mustQuery(t, db, rawAll(m))); len(res) != 1 {
			t.Fatalf("series %s: %v", m, res)
		}
	}
}
