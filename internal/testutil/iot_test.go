package testutil

import (
	"math"
	"testing"
)

// TestIoTWalk checks the walk against its definition: device i starts at
// 20 + i%7, every step moves by less than 0.25 plus rounding, and every
// value is a multiple of 0.01 one second after the previous step.
func TestIoTWalk(t *testing.T) {
	const devices = 20
	w := NewIoTWalk(devices)
	prev := make([]float64, devices)
	moved := false
	for s := range 50 {
		tm, vals := w.Next()
		if want := IoTStart + int64(s)*IoTInterval; tm != want {
			t.Fatalf("step %d at %d, want %d", s, tm, want)
		}
		for i, v := range vals {
			if s == 0 && v != 20+float64(i%7) {
				t.Fatalf("device %d starts at %v, want %v", i, v, 20+float64(i%7))
			}
			if r := math.Round(v * 100); math.Abs(v*100-r) > 1e-6 {
				t.Fatalf("step %d device %d: %v is not rounded to 0.01", s, i, v)
			}
			if s > 0 {
				if d := math.Abs(v - prev[i]); d > 0.255 {
					t.Fatalf("step %d device %d moved by %v", s, i, d)
				} else if d > 0 {
					moved = true
				}
			}
			prev[i] = v
		}
	}
	if !moved {
		t.Fatal("the walk never moved")
	}
	// Golden values: the benchmarks' baseline (bench.IoT checks the same).
	golden := map[int][]float64{
		0:   {20, 20.05, 20.03, 20.26, 20.27, 20.29},
		42:  {20, 19.85, 19.94, 20.17, 20.3, 20.09},
		999: {25, 24.96, 24.82, 24.9, 24.77, 24.94},
	}
	g := NewIoTWalk(1000)
	for s := range 6 {
		_, vals := g.Next()
		for dev, want := range golden {
			if vals[dev] != want[s] {
				t.Errorf("device %d step %d: %v, want %v", dev, s, vals[dev], want[s])
			}
		}
	}
	if got := IoTTags(13); got[0].Value != "dev-0013" || got[1].Value != "site-03" {
		t.Fatalf("IoTTags(13) = %v", got)
	}
}
