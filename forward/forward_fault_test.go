package forward

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// A full disk never stops the gateway: with the queue's filesystem full
// and the remote down, local writes go on and what cannot be queued is
// counted; once the remote is back the backlog drains, the delivered files
// are removed (the active one too), space comes back and later writes are
// queued and delivered again, by themselves. A restart on a full disk
// starts (forwarding degraded, counted) and recovers once there is space.
// Every sample written is either delivered or counted as dropped.
func TestForwardDiskFull(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	var down atomic.Bool
	down.Store(true)
	r.respond = func(_ int, w http.ResponseWriter) bool {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	m := vfs.NewMem()
	m.SetCapacity(24 << 10)
	db := openDB(t, t.TempDir())
	defer db.Close()
	opts := Options{URL: r.srv.URL, Protocol: Prometheus, Dir: "fq", SegmentBytes: 1 << 20, // one file could fill the disk Linger: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Logger: quiet(), fs: m}
	f := newForwarder(t, db, opts)
	var written int64
	step := 0
	write := func() {
		t.Helper()
		pts := sensorPoints(10, 1, t0+int64(step)*int64(time.Second))
		step++
		if err := db.Write(pts); err != nil {
			t.Fatalf("local write with a full queue disk: %v", err)
		}
		written += int64(len(pts))
	}
	for f.Stats().DroppedQueue == 0 {
		write()
		if step > 10_000 {
			t.Fatal("the queue never filled its filesystem")
		}
	}
	for range 50 {
		write()
	}
	accounted := func() bool {
		st := f.Stats()
		return st.SamplesSent+st.DroppedQueue == written && st.BacklogSamples == 0
	}
	down.Store(false)
	waitFor(t, "the backlog to drain", 10*time.Second, accounted)
	// Writes go on: once the writer retries, they are queued and sent.
	sentBefore := f.Stats().SamplesSent
	defer func() {
		if t.Failed() {
			st := f.Stats()
			f.q.mu.Lock()
			for _, qf := range f.q.files {
				t.Logf("file %+v", *qf)
			}
			t.Logf("rd %+v active %d unresolved %v stats %+v written %d", f.q.rd, f.q.activeNum, f.q.unresolved, st, written)
			f.q.mu.Unlock()
		}
	}()
	waitFor(t, "queueing to resume", 10*time.Second, func() bool {
		write()
		return f.Stats().SamplesSent > sentBefore
	})
	waitFor(t, "the first writes after recovery", 10*time.Second, accounted)
	// With one queue file larger than the disk, the active file fills it
	// again now and then: it is then finished and, once delivered, removed,
	// and queueing goes on; a batch or so is lost each time, counted.
	// Three rounds write more than the disk holds: later rounds are sent
	// only if delivered files, the active one included, give space back.
	for round := range 3 {
		before := f.Stats()
		for range 40 {
			write()
		}
		waitFor(t, "later writes delivered or counted", 10*time.Second, accounted)
		if st := f.Stats(); st.SamplesSent == before.SamplesSent {
			t.Fatalf("round %d after recovery: nothing sent (dropped %d)", round, st.DroppedQueue-before.DroppedQueue)
		}
	}
	if err := f.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// A restart on a full disk: New succeeds, writes are counted, and it
	// recovers once space is back.
	down.Store(true)
	m.SetCapacity(1) // no file may grow: the cursor and the header of a new file fail
	f2, err := New(db, opts)
	if err != nil {
		t.Fatalf("New on a full disk: %v", err)
	}
	defer f2.Close()
	if err := f2.Start(); err != nil {
		t.Fatal(err)
	}
	written = 0
	for range 20 {
		write()
	}
	if st := f2.Stats(); st.DroppedQueue != written {
		t.Fatalf("on a full disk: dropped %d of %d", st.DroppedQueue, written)
	}
	m.SetCapacity(0)
	down.Store(false)
	waitFor(t, "queueing to resume after the restart", 10*time.Second, func() bool {
		write()
		return f2.Stats().SamplesSent > 0
	})
	waitFor(t, "every sample accounted for after the restart", 10*time.Second, func() bool {
		st := f2.Stats()
		return st.SamplesSent+st.DroppedQueue == written && st.BacklogSamples == 0
	})
}

// The age bound holds while writes go on: with a 2 s bound and a write
// every 100 ms during an outage, data older than the bound (plus the
// roll interval) is dropped and counted, although the newest queue file is
// never idle.
func TestForwardAgeWhileWriting(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	db := openDB(t, t.TempDir())
	defer db.Close()
	const age = 2 * time.Second
	f, err := New(db, Options{URL: "http://127.0.0.1:1/api/v1/write", Protocol: Prometheus, Logger: quiet(),
		MaxBacklogAge: age, Now: clk.now, fs: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var written int64
	for i := range 100 {
		pts := sensorPoints(10, 1, t0+int64(i)*int64(time.Second))
		if err := db.Write(pts); err != nil {
			t.Fatal(err)
		}
		written += int64(len(pts))
		clk.t = clk.t.Add(100 * time.Millisecond)
		f.enforceBounds() // as the trimmer does on its tick
	}
	st := f.Stats()
	maxLeft := 10 * int64((age+rollAge(age))/(100*time.Millisecond)+1)
	if st.DroppedBacklog == 0 || st.BacklogSamples > maxLeft || st.DroppedBacklog+st.BacklogSamples != written {
		t.Fatalf("dropped %d, backlog %d (at most %d), of %d written", st.DroppedBacklog, st.BacklogSamples, maxLeft, written)
	}
}
