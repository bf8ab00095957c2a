package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLatencyRecorder compares the recorder's percentiles with the exact
// nearest-rank ones over latencies spread from 1 µs to 10 s: within 0.1%,
// the maximum exact, and two merged recorders answer as one that saw
// everything.
func TestLatencyRecorder(t *testing.T) {
	rng := rand.New(rand.NewPCG(904, 1))
	all, a, b := newLatencyRecorder(), newLatencyRecorder(), newLatencyRecorder()
	var exact []time.Duration
	for i := range 50_001 {
		d := time.Duration(math.Exp(rng.Float64()*math.Log(1e7))) * time.Microsecond
		exact = append(exact, d)
		all.record(d)
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	a.merge(b)
	slices.Sort(exact)
	rank := func(p float64) float64 { // nearest rank, rounded, as the histogram counts
		i := int(p*float64(len(exact))+0.5) - 1
		return float64(exact[min(max(i, 0), len(exact)-1)]) / 1e6
	}
	for _, l := range []Latency{all.summary(), a.summary()} {
		if l.Count != int64(len(exact)) {
			t.Errorf("count %d, want %d", l.Count, len(exact))
		}
		if want := rank(0.5); math.Abs(l.P50Ms-want) > want*1e-3 {
			t.Errorf("p50 %v ms, want %v", l.P50Ms, want)
		}
		if want := rank(0.99); math.Abs(l.P99Ms-want) > want*1e-3 {
			t.Errorf("p99 %v ms, want %v", l.P99Ms, want)
		}
		if want := float64(exact[len(exact)-1]) / 1e6; l.MaxMs != want {
			t.Errorf("max %v ms, want %v", l.MaxMs, want)
		}
	}
	// Beyond the histogram's hour: counted, and the maximum stays exact.
	long := newLatencyRecorder()
	long.record(2 * time.Hour)
	if l := long.summary(); l.Count != 1 || l.MaxMs != float64(2*time.Hour/time.Millisecond) || l.P99Ms > l.MaxMs {
		t.Errorf("a 2 h latency: %+v", l)
	}
	if l := newLatencyRecorder().summary(); l != (Latency{}) {
		t.Errorf("no latency: %+v", l)
	}
}

// TestLatencyRecorderBounded checks that the recorder's memory does not
// depend on how many latencies it saw: recording allocates nothing and
// its histogram keeps its size from the first latency to the millionth.
func TestLatencyRecorderBounded(t *testing.T) {
	l := newLatencyRecorder()
	size := l.h.ByteSize()
	if size > 1<<20 {
		t.Errorf("histogram of %d bytes", size)
	}
	d := time.Duration(0)
	allocs := testing.AllocsPerRun(1_000_000, func() {
		d += 997 * time.Nanosecond
		l.record(d % (10 * time.Second))
	})
	if allocs != 0 {
		t.Errorf("%v allocations per latency", allocs)
	}
	if l.count() < 1_000_000 || l.h.ByteSize() != size {
		t.Errorf("after %d latencies: %d bytes, was %d", l.count(), l.h.ByteSize(), size)
	}
}

// BenchmarkLatencyRecorder records b.N latencies into one recorder and
// reports its size, which stays the same for any b.N:
//
//	go test -run '^$' -bench LatencyRecorder ./bench/
func BenchmarkLatencyRecorder(b *testing.B) {
	l := newLatencyRecorder()
	b.ReportAllocs()
	d := time.Duration(0)
	for b.Loop() {
		d += 997 * time.Nanosecond
		l.record(d % (10 * time.Second))
	}
	b.ReportMetric(float64(l.h.ByteSize()), "B/recorder")
}
