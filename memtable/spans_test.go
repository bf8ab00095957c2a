package memtable

import (
	"math/rand/v2"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// TestSpans checks that a series' spans, sorted or not, count exactly the
// samples Read returns in a range, end where those samples' times say,
// and come in time order with bounded counts.
func TestSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, shuffled := range []bool{false, true} {
		tb := New()
		const n = 5000
		times := r.Perm(n)
		if !shuffled {
			for i := range times {
				times[i] = i
			}
		}
		for _, ts := range times {
			tb.Apply([]point.Entry{{ID: 7, Time: int64(ts), Value: point.Int(int64(ts))}})
		}
		if got := tb.SeriesLen(7); got != n {
			t.Fatalf("SeriesLen = %d, want %d", got, n)
		}
		for _, rg := range [][2]int64{{0, n - 1}, {100, 2000}, {4999, 9999}, {-5, 0}, {6000, 7000}} {
			want := tb.Samples(7, rg[0], rg[1], nil)
			spans := tb.Spans(7, rg[0], rg[1], 0, nil)
			total, last := 0, int64(rg[0]-1)
			for _, sp := range spans {
				if sp.MaxTime <= last || sp.Count <= 0 || sp.Count > maxChunk {
					t.Fatalf("shuffled=%v range %v: bad span %+v after %d", shuffled, rg, sp, last)
				}
				total += sp.Count
				if want[total-1].Time != sp.MaxTime {
					t.Fatalf("shuffled=%v range %v: span ends at %d, sample %d is at %d", shuffled, rg, sp.MaxTime, total-1, want[total-1].Time)
				}
				last = sp.MaxTime
			}
			if total != len(want) {
				t.Fatalf("shuffled=%v range %v: spans count %d samples, Read returns %d", shuffled, rg, total, len(want))
			}
		}
	}
	if s := New().Spans(1, 0, 10, 0, nil); len(s) != 0 {
		t.Fatalf("spans of a missing series: %v", s)
	}
}
