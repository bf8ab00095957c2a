package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// TestRunMixed runs a short mixed workload on every engine in process and
// checks every field of the report: the writer ingested at its target and
// no faster, every reader query kind ran and a bounded sample of the
// answers was checked in full, the throughput covers the run, the
// counters are there for the engines that keep them, and the report
// writes as JSON (round trip), CSV, Markdown and SVG.
func TestRunMixed(t *testing.T) {
	o := MixedOptions{Engines: testEngines(t), Duration: 1100 * time.Millisecond, Calibrate: 200 * time.Millisecond,
		Devices: 50, Batch: 500, Readers: 2, Dir: t.TempDir()}
	rep, err := RunMixed(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(o.Engines) {
		t.Fatalf("%d results for %d engines", len(rep.Results), len(o.Engines))
	}
	if rep.Config != ConfigDefault || rep.Durability != Fast || rep.Devices != 50 || rep.Batch != 500 || rep.Readers != 2 ||
		rep.Share != 0.8 || rep.DurationSec != 1.1 || rep.CalibSec != 0.2 || rep.Machine.Cores <= 0 {
		t.Errorf("report header %+v", rep)
	}
	for _, r := range rep.Results {
		if r.PeakPointsPerSec <= 0 || r.TargetPointsPerSec != r.PeakPointsPerSec*0.8 || r.PointsWritten <= 0 {
			t.Errorf("%s: %+v", r.Engine, r)
		}
		// Paced from the first batch: at most one batch ahead of the target.
		if limit := r.TargetPointsPerSec + float64(o.Batch)/o.Duration.Seconds(); r.AchievedPointsPerSec <= 0 || r.AchievedPointsPerSec > limit*1.01 {
			t.Errorf("%s: achieved %.0f points/s, target %.0f", r.Engine, r.AchievedPointsPerSec, r.TargetPointsPerSec)
		}
		if r.Write.Count*int64(o.Batch) != r.PointsWritten || !(r.Write.P50Ms <= r.Write.P99Ms && r.Write.P99Ms <= r.Write.MaxMs) || r.Write.P50Ms <= 0 {
			t.Errorf("%s: write latency %+v for %d points", r.Engine, r.Write, r.PointsWritten)
		}
		if r.WriteStalls < 0 || r.WriteStalls > r.Write.Count || r.WriteLagMaxMs < 0 {
			t.Errorf("%s: %d stalls of %d writes, lag %v ms", r.Engine, r.WriteStalls, r.Write.Count, r.WriteLagMaxMs)
		}
		var answers, minFull, maxFull int64
		for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
			q := r.Queries[name]
			if q.Count <= 0 || !(0 < q.P50Ms && q.P50Ms <= q.P99Ms && q.P99Ms <= q.MaxMs) {
				t.Errorf("%s: %s latency %+v", r.Engine, name, q)
			}
			limit := int64(fullChecks)
			if name == QueryPoint {
				limit = fullPointChecks
			}
			answers += q.Count
			minFull += min(q.Count, limit)
			maxFull += min(q.Count, 2*limit)
		}
		if r.Answers != answers || r.AnswersCheckedInFull < minFull || r.AnswersCheckedInFull > maxFull {
			t.Errorf("%s: %d answers (queries counted %d), %d checked in full, want %d to %d",
				r.Engine, r.Answers, answers, r.AnswersCheckedInFull, minFull, maxFull)
		}
		if len(r.Throughput) != 1 || r.Throughput[0].Second != 0 || r.Throughput[0].Points <= 0 || r.Throughput[0].Queries <= 0 {
			t.Errorf("%s: throughput %+v", r.Engine, r.Throughput)
		}
		if (r.Compactions != nil) != (r.Engine == EngineStrata || r.Engine == EngineStrataHTTP || r.Engine == EnginePebble || r.Engine == EnginePrometheus) {
			t.Errorf("%s: compactions %v", r.Engine, r.Compactions)
		}
		if (r.EngineWriteStalls != nil) != (r.Engine == EngineStrata || r.Engine == EngineStrataHTTP) {
			t.Errorf("%s: engine write stalls %v", r.Engine, r.EngineWriteStalls)
		}
		if (r.DiskBytes == 0) != IsFloor(r.Engine) {
			t.Errorf("%s: %d bytes on disk", r.Engine, r.DiskBytes)
		}
		if runtime.GOOS == "linux" && (r.PeakRSSBytes <= 0 || r.Throughput[0].RSSBytes <= 0 || r.Throughput[0].RSSBytes > r.PeakRSSBytes) {
			t.Errorf("%s: peak RSS %d, throughput %+v", r.Engine, r.PeakRSSBytes, r.Throughput)
		}
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("scratch left behind: %v %v", entries, err)
	}

	var js, cs, md, svg bytes.Buffer
	for _, w := range []struct {
		f   func(io.Writer) error
		buf *bytes.Buffer
	}{{rep.WriteJSON, &js}, {rep.WriteCSV, &cs}, {rep.WriteMarkdown, &md}, {rep.WriteSVG, &svg}} {
		if err := w.f(w.buf); err != nil {
			t.Fatal(err)
		}
	}
	var back MixedReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, rep) {
		t.Errorf("JSON round trip: %v\n%s", err, js.String())
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != len(rep.Results)+1 || !slices.Equal(rows[0], mixedCSVHeader) {
		t.Errorf("CSV: %v %q", err, rows)
	}
	for _, r := range rep.Results {
		if !strings.Contains(md.String(), "| "+r.Engine+" |") || !strings.Contains(svg.String(), r.Engine) {
			t.Errorf("%s missing from the Markdown or the SVG", r.Engine)
		}
	}
	if runtime.GOOS == "linux" && !strings.Contains(svg.String(), "RSS (MiB)") {
		t.Error("no memory chart in the SVG")
	}
}

// TestMixedTrimsFloor writes the stream into the floor as the mixed
// writer does, with a reader holding an old window open for a while: the
// floor keeps what any reader may still ask for (every answer checks),
// and no more than a few windows of it, however long the stream.
func TestMixedTrimsFloor(t *testing.T) {
	const devices, batch = 10, 100 // 10 steps a batch
	ds, db := openFloorStream(t, devices)
	ms := db.(*memStore)
	trim := newTrim(db, ds)
	lows := make([]atomic.Int64, 1)
	lows[0].Store(math.MaxInt64)
	b := newStreamBatch(ds, batch)
	held, heldFrom := mixedAnswer{}, -1
	var rs resultSet
	maxLen := 0
	for n := 1; n <= 2000; n++ {
		if err := db.write(b.next()); err != nil {
			t.Fatal(err)
		}
		steps := b.off / devices
		switch n {
		case 300: // a reader starts a query over the aggregate's window
			lows[0].Store(int64(steps - mixedWindow))
			held = mixedQueries(0, steps)[2]
			heldFrom = held.from
		case 900: // and ends it
			rs.reset()
			if err := db.query(context.Background(), held.query(ds), &rs); err != nil {
				t.Fatal(err)
			}
			held.digest = rs.digest()
			if _, q, msg := checkMixed(ds, []mixedAnswer{held}); msg != "" {
				t.Fatalf("a window held open was trimmed: %s: %s", q, msg)
			}
			lows[0].Store(math.MaxInt64)
		}
		trim.after(steps, lows)
		for _, s := range ms.data {
			maxLen = max(maxLen, len(s))
			if n < 900 && heldFrom >= 0 && s[0].t > ds.Time(heldFrom) {
				t.Fatalf("batch %d: the held window's first step %d was trimmed", n, heldFrom)
			}
		}
		if n%97 == 0 {
			for _, a := range mixedQueries(n%devices, steps) {
				rs.reset()
				if err := db.query(context.Background(), a.query(ds), &rs); err != nil {
					t.Fatal(err)
				}
				a.digest = rs.digest()
				if _, q, msg := checkMixed(ds, []mixedAnswer{a}); msg != "" {
					t.Fatalf("batch %d: %s: %s", n, q, msg)
				}
			}
		}
	}
	// 20,000 steps written; the held reader pinned 9,000 of them for a while.
	if last := ms.data[0]; len(last) > 3*mixedWindow || maxLen > 9000+3*mixedWindow {
		t.Errorf("the floor keeps %d samples a series (at most %d), the stream has 20,000 steps", len(last), maxLen)
	}
	for _, s := range ms.data {
		if cap(s) > 8*mixedWindow {
			t.Errorf("a series' array holds %d samples", cap(s))
		}
	}
}

// TestCheckMixed checks the checker of mixed answers: right answers pass,
// a changed value, a missing row or a wrong window fail.
func TestCheckMixed(t *testing.T) {
	ds, err := Stream(1<<40, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	var good []mixedAnswer
	for w := 30; w < 3000; w += 11 {
		for _, a := range mixedQueries(w%20, w) {
			good = append(good, streamAnswer(t, ds, a))
		}
	}
	full, q, msg := checkMixed(ds, good)
	if msg != "" {
		t.Fatalf("right answers fail: %s: %s", q, msg)
	}
	if full != int64(len(good)) {
		t.Errorf("%d checked in full, want %d", full, len(good))
	}
	for name, mutate := range map[string]func(a *mixedAnswer){
		"value":  func(a *mixedAnswer) { a.digest.ValueHash++; a.digest.ValueSum += 0.01 },
		"row":    func(a *mixedAnswer) { a.digest.Rows-- },
		"window": func(a *mixedAnswer) { a.from++ },
	} {
		for i := range 3 {
			k := len(good)/2 + i
			bad := slices.Clone(good)
			mutate(&bad[k])
			if _, q, msg := checkMixed(ds, bad); msg == "" || q != bad[k].name {
				t.Errorf("%s of %s: check = %q %q", name, bad[k].name, q, msg)
			}
		}
	}
}

// streamAnswer returns a with the digest of the stream's own answer.
func streamAnswer(t *testing.T, ds *Dataset, a mixedAnswer) mixedAnswer {
	t.Helper()
	var rs resultSet
	if err := ds.reference(a.query(ds), &rs); err != nil {
		t.Fatal(err)
	}
	a.digest = rs.digest()
	return a
}

// TestMixedAnswersBounded feeds a long run's worth of answers to the
// collector of a mixed run: it keeps an evenly spread sample of each
// query of between the limit and twice the limit whatever the count,
// counts every answer and its latency, and catches wrong row counts in
// answers it does not keep.
func TestMixedAnswersBounded(t *testing.T) {
	ds, err := Stream(1<<40, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := newMixedAnswers(ds)
	const n = 100_003
	proto := map[string]mixedAnswer{}
	for _, a := range mixedQueries(3, 2000) {
		proto[a.name] = streamAnswer(t, ds, a)
	}
	for i := range n {
		for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
			m.add(proto[name], time.Duration(1+i%1000)*time.Microsecond)
		}
	}
	if m.n != 3*n || m.mismatch != "" {
		t.Fatalf("%d answers, mismatch %q", m.n, m.mismatch)
	}
	for name, s := range m.sample {
		if len(s.kept) < s.limit || len(s.kept) > 2*s.limit || cap(s.kept) > 2*s.limit {
			t.Errorf("%s: %d kept (cap %d), limit %d", name, len(s.kept), cap(s.kept), s.limit)
		}
		for i, a := range s.kept {
			if a.seq != int64(i)*s.stride {
				t.Fatalf("%s: kept answer %d is number %d, want %d", name, i, a.seq, int64(i)*s.stride)
			}
		}
		if last := s.kept[len(s.kept)-1].seq; last+s.stride < n {
			t.Errorf("%s: the sample ends at answer %d of %d", name, last, n)
		}
		if l := m.lat[name].summary(); l.Count != n || !near3(l.P50Ms, 0.5) || !near3(l.P99Ms, 0.99) || l.MaxMs != 1 {
			t.Errorf("%s: latency %+v", name, l)
		}
	}
	bad := proto[QueryRange]
	bad.digest.Rows--
	m.add(bad, time.Millisecond) // number n, not a multiple of the stride
	if m.sample[QueryRange].seen-1 == 0 || (m.sample[QueryRange].seen-1)%m.sample[QueryRange].stride == 0 {
		t.Fatal("the bad answer was sampled: pick another count")
	}
	if m.query != QueryRange || m.mismatch == "" {
		t.Errorf("a wrong row count was missed: %q %q", m.query, m.mismatch)
	}
}

// near3 reports whether a is b to three significant digits.
func near3(a, b float64) bool { return a >= b*0.999 && a <= b*1.001 }

// TestRunMixedMismatch checks that a wrong answer during the mixed run
// makes RunMixed fail with ErrMismatch naming the engine.
func TestRunMixedMismatch(t *testing.T) {
	withBroken(t, func(q engine.Query, rs *resultSet) {
		if q.Agg == engine.AggNone && q.Field == "" && len(rs.rows) > 0 {
			rs.rows[len(rs.rows)/2].v += 0.01
		}
	})
	rep, err := RunMixed(context.Background(), MixedOptions{Engines: []string{"broken"}, Duration: time.Second,
		Calibrate: 200 * time.Millisecond, Devices: 10, Batch: 100, Readers: 1, Dir: t.TempDir()})
	var ce *CheckError
	if !errors.Is(err, ErrMismatch) || !errors.As(err, &ce) || ce.Engine != "broken" || ce.Query != QueryRange {
		t.Fatalf("RunMixed = %v, want a range_scan mismatch of broken", err)
	}
	if rep == nil || len(rep.Results) != 1 {
		t.Errorf("report %+v", rep)
	}
}

// TestFloorReadsWhileWriting runs readers on the floor while a writer
// appends the stream and rewrites older samples (with their own values, so
// every answer stays checkable): under the race detector this checks that
// queries, which read samples without the lock, never see one change.
func TestFloorReadsWhileWriting(t *testing.T) {
	const devices, batch = 20, 200
	ds, db := openFloorStream(t, devices)
	var steps atomic.Int64
	done := make(chan struct{})
	errs := make(chan string, 2)
	for r := range 2 {
		go func() {
			var rs resultSet
			for k := r; ; k++ {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				w := int(steps.Load())
				if w == 0 {
					runtime.Gosched()
					continue
				}
				a := mixedQueries(k%devices, w)[k%3]
				rs.reset()
				if err := db.query(context.Background(), a.query(ds), &rs); err != nil {
					errs <- err.Error()
					return
				}
				a.digest = rs.digest()
				if _, q, msg := checkMixed(ds, []mixedAnswer{a}); msg != "" {
					errs <- q + ": " + msg
					return
				}
			}
		}()
	}
	b := newStreamBatch(ds, batch)
	old := make([]engine.Point, 2)
	for n := range 400 {
		if err := db.write(b.next()); err != nil {
			t.Fatal(err)
		}
		steps.Store(int64(b.off / devices))
		if n%5 == 4 { // an older sample and the last one again, same values
			for i, at := range []int{b.off - 7*batch/2, b.off - 1} {
				old[i] = ds.Point(at)
			}
			if err := db.write(old); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for range 2 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}

// openFloorStream opens the floor in a fresh directory, forgotten when the
// test ends, and returns it with an endless stream of devices series.
func openFloorStream(t *testing.T, devices int) (*Dataset, store) {
	t.Helper()
	ds, err := Stream(1<<40, devices, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { forgetMem(dir) })
	db, err := openMemLimit(dir, ConfigDefault, Fast)
	if err != nil {
		t.Fatal(err)
	}
	return ds, db
}
