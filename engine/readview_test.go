package engine

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// TestVisibilityResolveInOrder checks the published watermark: it passes a
// sequence number only once every one below it is resolved, in whatever
// order they resolve, and wait returns exactly then.
func TestVisibilityResolveInOrder(t *testing.T) {
	var v seqVisibility
	v.start(10, math.MinInt64)
	v.resolve(13)
	v.resolve(12)
	if got := v.published.Load(); got != 10 {
		t.Fatalf("published = %d with 11 unresolved, want 10", got)
	}
	done := make(chan struct{})
	go func() {
		v.wait(13)
		close(done)
	}()
	v.resolve(11)
	<-done
	if got := v.published.Load(); got != 13 {
		t.Fatalf("published = %d, want 13", got)
	}
	v.resolve(15)
	v.resolve(14)
	if got := v.published.Load(); got != 15 {
		t.Fatalf("published = %d, want 15", got)
	}

	// Readers: oldest is the oldest live reader, or published.
	a, oa := v.acquire()
	if a != 15 || oa != 15 {
		t.Fatalf("acquire = %d, %d", a, oa)
	}
	v.resolve(16)
	b, ob := v.acquire()
	if b != 16 || ob != 15 {
		t.Fatalf("second acquire = %d, %d, want 16, 15", b, ob)
	}
	v.release(a)
	if o := v.oldest(); o != 16 {
		t.Fatalf("oldest = %d after the older reader left, want 16", o)
	}
	v.release(b)
	if f := v.raiseFloor(5); f != 5 || v.raiseFloor(3) != 5 {
		t.Fatalf("floor = %d, want 5 and never lower", f)
	}
}

// TestQuerySeesDeleteWholeOrNot runs a Delete, and then a Write, between a
// query taking its snapshot and reading: the query must see neither, even
// though the deleted range spans a segment and the memtable.
func TestQuerySeesDeleteWholeOrNot(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	tags := []Tag{{Key: "d", Value: "1"}}
	for i := range int64(10) {
		mustWrite(t, db, pt("m", tags, "v", Int(i), i))
		if i == 4 {
			mustFlush(t, db) // 0..4 in a segment, 5..9 in the memtable
		}
	}
	var hookErr error
	db.testAfterReadSnapshot = func() {
		db.testAfterReadSnapshot = nil
		if err := db.Delete(t.Context(), Selector{Measurement: "m", Start: 0, End: 100}); err != nil {
			hookErr = err
			return
		}
		hookErr = db.Write([]Point{pt("m", tags, "v", Int(100), 3), pt("m", tags, "v", Int(100), 20)})
	}
	got := samplesOf(t, mustQuery(t, db, rawAll("m")))
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if len(got) != 10 {
		t.Fatalf("query that started before the delete saw %d samples, want all 10: %v", len(got), got)
	}
	for i, s := range got {
		if s.Time != int64(i) || s.Value.Int() != int64(i) {
			t.Fatalf("sample %d = %d=%v: saw part of a later write or delete", i, s.Time, s.Value)
		}
	}
	got = samplesOf(t, mustQuery(t, db, rawAll("m")))
	if len(got) != 2 || got[0].Time != 3 || got[1].Time != 20 {
		t.Fatalf("after the delete and write: %v, want samples at 3 and 20", got)
	}
}

// TestConcurrentDeleteSeenWhole races queries against writes and deletes of
// ranges that span a segment and the memtable, and checks that every query
// sees a state between two operations: the first half of a round, all of
// it, or nothing. (TestQuerySeesDeleteWholeOrNot pins the interleaving.)
func TestConcurrentDeleteSeenWhole(t *testing.T) {
	opts := quietOptions()
	opts.Sync = SyncNever
	db := openDB(t, t.TempDir(), opts)
	const n = 200
	write := func(round int) {
		var pts []Point
		for i := range int64(n) {
			pts = append(pts, pt("m", nil, "v", Int(int64(round)), i))
		}
		mustWrite(t, db, pts[:n/2]...)
		mustFlush(t, db)
		mustWrite(t, db, pts[n/2:]...)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Go(func() {
		for !stop.Load() {
			res, err := db.Query(t.Context(), rawAll("m"))
			if err != nil {
				bad.Store(err.Error())
				return
			}
			if len(res) == 0 {
				continue
			}
			s := res[0].Samples
			if len(s) != n && len(s) != n/2 {
				bad.Store(fmt.Sprintf("a query saw %d of the %d samples of a series being deleted", len(s), n))
				return
			}
			for _, x := range s {
				if x.Value.Int() != s[0].Value.Int() {
					bad.Store("a query mixed two rounds")
					return
				}
			}
		}
	})
	for round := range 30 {
		write(round)
		mustDelete(t, db, Selector{Measurement: "m", Start: 0, End: n})
	}
	stop.Store(true)
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
}

// TestFailedWriteNeverVisible fails the WAL fsync of one Write: the Write
// returns an error and its points are never visible, not to a query, not
// after the memtable is flushed by Close.
func TestFailedWriteNeverVisible(t *testing.T) {
	dir := t.TempDir()
	var failSync atomic.Bool
	opts := quietOptions()
	opts.fs = vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && failSync.Load() && strings.HasPrefix(name, filepath.Join(dir, walDirName)) {
			return vfs.ErrInjected
		}
		return nil
	})
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, db, pt("m", nil, "v", Int(1), 1))
	failSync.Store(true)
	if err := db.Write([]Point{pt("m", nil, "v", Int(2), 2), pt("m", nil, "v", Int(3), 1)}); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Write with a failing fsync = %v, want the injected error", err)
	}
	got := samplesOf(t, mustQuery(t, db, rawAll("m")))
	if len(got) != 1 || got[0].Time != 1 || got[0].Value.Int() != 1 {
		t.Fatalf("after a failed write the query sees %v, want only 1=1", got)
	}
	if err := db.Delete(t.Context(), Selector{Measurement: "m", Start: 0, End: 10}); err == nil {
		t.Fatal("Delete succeeded on a failed WAL")
	}
	got = samplesOf(t, mustQuery(t, db, rawAll("m")))
	if len(got) != 1 {
		t.Fatalf("a failed delete is visible: %v", got)
	}
	// Close flushes the memtable: only what was visible reaches a segment.
	if err := db.Close(); err != nil {
		t.Logf("close after a failed fsync: %v", err)
		return // the WAL stays, and recovery is the WAL's to judge
	}
	failSync.Store(false)
	db2 := openDB(t, dir, quietOptions())
	got = samplesOf(t, mustQuery(t, db2, rawAll("m")))
	if len(got) != 1 || got[0].Value.Int() != 1 {
		t.Fatalf("after close and reopen: %v, want only 1=1", got)
	}
}
