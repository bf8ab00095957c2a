package bench

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// TestRunMixed runs a short mixed workload on every engine in process:
// the writer must have ingested near its target, every reader query kind
// must have run and been checked, and the throughput must cover the run.
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
	for _, r := range rep.Results {
		if r.PeakPointsPerSec <= 0 || r.TargetPointsPerSec != r.PeakPointsPerSec*0.8 || r.PointsWritten <= 0 {
			t.Errorf("%s: %+v", r.Engine, r)
		}
		if r.Write.Count <= 0 || !(r.Write.P50Ms <= r.Write.P99Ms && r.Write.P99Ms <= r.Write.MaxMs) {
			t.Errorf("%s: write latency %+v", r.Engine, r.Write)
		}
		for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
			if q := r.Queries[name]; q.Count <= 0 || q.MaxMs <= 0 {
				t.Errorf("%s: %s latency %+v", r.Engine, name, q)
			}
		}
		if r.Answers <= 0 || r.AnswersCheckedInFull <= 0 || r.AnswersCheckedInFull > r.Answers {
			t.Errorf("%s: %d answers, %d checked in full", r.Engine, r.Answers, r.AnswersCheckedInFull)
		}
		if len(r.Throughput) != 1 || r.Throughput[0].Points <= 0 {
			t.Errorf("%s: throughput %+v", r.Engine, r.Throughput)
		}
		if (r.Compactions != nil) != (r.Engine == EngineStrata || r.Engine == EngineStrataHTTP || r.Engine == EnginePebble || r.Engine == EnginePrometheus) {
			t.Errorf("%s: compactions %v", r.Engine, r.Compactions)
		}
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("scratch left behind: %v %v", entries, err)
	}
}

// TestCheckMixed checks the checker of mixed answers: right answers pass,
// a changed value, a missing row or a wrong window fail, and only a spread
// sample of many range scans is checked in full.
func TestCheckMixed(t *testing.T) {
	ds, err := Stream(1<<40, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(a mixedAnswer) mixedAnswer {
		var rs resultSet
		if err := ds.reference(a.query(ds), &rs); err != nil {
			t.Fatal(err)
		}
		a.digest = rs.digest()
		return a
	}
	var good []mixedAnswer
	for w := 30; w < 3000; w += 11 {
		for _, a := range mixedQueries(w%20, w) {
			good = append(good, answer(a))
		}
	}
	full, q, msg := checkMixed(ds, good)
	if msg != "" {
		t.Fatalf("right answers fail: %s: %s", q, msg)
	}
	points := int64(len(good) / 3)
	if want := points + 2*fullChecks; full != want {
		t.Errorf("%d checked in full, want %d", full, want)
	}
	for name, mutate := range map[string]func(a *mixedAnswer){
		"value":  func(a *mixedAnswer) { a.digest.ValueHash++; a.digest.ValueSum += 0.01 },
		"row":    func(a *mixedAnswer) { a.digest.Rows-- },
		"window": func(a *mixedAnswer) { a.from++ },
	} {
		for i := range 3 {
			bad := append([]mixedAnswer(nil), good...)
			mutate(&bad[i]) // the first answers are always checked in full
			if _, q, msg := checkMixed(ds, bad); msg == "" || q != bad[i].name {
				t.Errorf("%s of %s: check = %q %q", name, bad[i].name, q, msg)
			}
		}
	}
}

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
