package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// fillRandom applies n random batches and a few deletes to db and m,
// flushing after every flushEvery batches (0 = never).
func fillRandom(t testing.TB, db *DB, m *RefModel, g *gen, n, flushEvery int) {
	t.Helper()
	for i := range n {
		pts := g.batch()
		want := m.write(pts)
		err := db.Write(pts)
		if (want < 0) != (err == nil) {
			t.Fatalf("batch %d: Write returned %v, model conflict index %d", i, err, want)
		}
		if i%7 == 3 {
			sel := g.selector()
			mustDelete(t, db, sel)
			m.delete(sel)
		}
		if flushEvery > 0 && i%flushEvery == flushEvery-1 {
			mustFlush(t, db)
		}
	}
}

func checkAll(t testing.TB, db *DB, m *RefModel, where string) {
	t.Helper()
	for _, meas := range genMeasurements {
		checkQuery(t, db, m, rawAll(meas), minTime, where)
		checkQuery(t, db, m, Query{Selector: Selector{Measurement: meas, Start: -100_000, End: 100_000}, Agg: AggSum, Every: 10_000}, minTime, where)
	}
}

// TestReopen checks that data, deletes and kinds survive Close and Open,
// whether they were flushed or only logged.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncNever
	db := openDB(t, dir, opts)
	m := NewRefModel()
	g := newGen(rand.New(rand.NewPCG(7, 7)))
	fillRandom(t, db, m, g, 60, 20)
	checkAll(t, db, m, "before close")
	for i := range 3 {
		db = reopen(t, db, dir, opts)
		checkAll(t, db, m, "after reopen")
		checkKinds(t, db, m, "after reopen")
		fillRandom(t, db, m, g, 10, 0)
		if i == 1 {
			mustCompact(t, db)
		}
	}
	checkAll(t, db, m, "end")
}

// crashOptions make the database quiescent between calls, so crashCopy
// sees a consistent instant: no background flush or compaction.
func crashOptions() *Options {
	return &Options{
		Logger:                      slog.New(slog.DiscardHandler),
		DisableBackgroundCompaction: true,
	}
}

// TestCrashRecovery abandons a database without Close (by copying its
// files while it is open, after acknowledged SyncAlways writes) and checks
// that the copy opens with every acknowledged write, delete and kind.
func TestCrashRecovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, db *DB)
	}{
		{"wal only", func(t *testing.T, db *DB) {}},
		{"after flush", func(t *testing.T, db *DB) { mustFlush(t, db) }},
		{"after compact", func(t *testing.T, db *DB) { mustFlush(t, db); mustCompact(t, db) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := crashOptions()
			db := openDB(t, dir, opts)
			m := NewRefModel()
			g := newGen(rand.New(rand.NewPCG(8, 8)))
			fillRandom(t, db, m, g, 30, 10)
			tc.prep(t, db)
			fillRandom(t, db, m, g, 10, 0) // the tail lives in the WAL only

			crashed := crashCopy(t, dir)
			db2 := openDB(t, crashed, opts)
			checkAll(t, db2, m, "after crash")
			checkKinds(t, db2, m, "after crash")

			// The recovered database works: write, crash again, recover again.
			fillRandom(t, db2, m, g, 10, 0)
			crashed2 := crashCopy(t, crashed)
			db3 := openDB(t, crashed2, opts)
			checkAll(t, db3, m, "after second crash")
			db3 = reopen(t, db3, crashed2, opts)
			checkAll(t, db3, m, "after second crash and reopen")
		})
	}
}

// lastWALFile returns the path of the highest-numbered WAL file in dir.
func lastWALFile(t testing.TB, dir string) string {
	t.Helper()
	walDir := filepath.Join(dir, walDirName)
	ents, err := os.ReadDir(walDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no wal files in %s", walDir)
	}
	slices.Sort(names)
	return filepath.Join(walDir, names[len(names)-1])
}

// TestTornWALTail cuts a few bytes off the end of the last WAL file of a
// crashed database: Open must succeed with every earlier acknowledged write.
func TestTornWALTail(t *testing.T) {
	for _, cut := range []int64{1, 3, 9} {
		t.Run(fmt.Sprint("cut=", cut), func(t *testing.T) { testTornWALTail(t, cut) })
	}
}

func testTornWALTail(t *testing.T, cut int64) {
	dir := t.TempDir()
	opts := crashOptions()
	db := openDB(t, dir, opts)
	m := NewRefModel()
	const n = 20
	for i := range int64(n) {
		p := []Point{pt("m", []Tag{{Key: "i", Value: string(rune('a' + i%4))}}, "v", Int(i), i*10)}
		mustWrite(t, db, p...)
		if i < n-1 {
			m.write(p)
		}
	}
	crashed := crashCopy(t, dir)
	wf := lastWALFile(t, crashed)
	fi, err := os.Stat(wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wf, fi.Size()-cut); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, crashed, opts)
	checkQuery(t, db2, m, rawAll("m"), minTime, "after torn tail")
	// The log goes on after the cut.
	more := []Point{pt("m", nil, "v", Int(-1), -1)}
	mustWrite(t, db2, more...)
	m.write(more)
	db2 = reopen(t, db2, crashed, opts)
	checkQuery(t, db2, m, rawAll("m"), minTime, "after torn tail and reopen")
}

// TestLock checks that a second Open of a directory fails at once with
// ErrLocked, and succeeds after Close.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, quietOptions())
	mustWrite(t, db, pt("m", nil, "v", Float(1), 1))
	done := make(chan error, 1)
	go func() {
		db2, err := Open(dir, quietOptions())
		if err == nil {
			db2.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("second Open returned %v, want ErrLocked", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second Open blocked instead of failing fast")
	}
	// The failed Open disturbed nothing.
	mustWrite(t, db, pt("m", nil, "v", Float(2), 2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir, quietOptions())
	if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); len(got) != 2 {
		t.Fatalf("after reopen: %v", got)
	}
}

// TestClosed checks that every call on a closed DB returns ErrClosed.
func TestClosed(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", nil, "v", Float(1), 1))
	if err := db.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close returned %v, want ErrClosed", err)
	}
	ctx := context.Background()
	sel := Selector{Measurement: "m", Start: 0, End: 10}
	if err := db.Write([]Point{pt("m", nil, "v", Float(1), 2)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close returned %v", err)
	}
	if _, err := db.Query(ctx, Query{Selector: sel}); !errors.Is(err, ErrClosed) {
		t.Errorf("Query after Close returned %v", err)
	}
	if err := db.Delete(ctx, sel); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close returned %v", err)
	}
	if err := db.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close returned %v", err)
	}
	if err := db.Compact(); !errors.Is(err, ErrClosed) {
		t.Errorf("Compact after Close returned %v", err)
	}
}

// TestCloseStopsGoroutines checks that Close waits for every goroutine the
// DB started, in every sync mode.
func TestCloseStopsGoroutines(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			before := runtime.NumGoroutine()
			opts := quietOptions()
			opts.Sync = mode
			opts.SyncInterval = time.Millisecond
			opts.MemTableBytes = 4 << 10
			opts.L0CompactionTrigger = 2
			db, err := Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			// Enough to seal a few memtables and start a compaction.
			for i := range int64(30) {
				var pts []Point
				for j := range int64(10) {
					pts = append(pts, pt("m", nil, "v", Int(i), i*10+j))
				}
				if err := db.Write(pts); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// A goroutine that has signalled its end may need a moment to
			// exit: yield until the count is back, within a deadline.
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				runtime.Gosched()
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<16)
				t.Fatalf("%d goroutines before Open, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
