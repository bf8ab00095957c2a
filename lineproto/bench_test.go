package lineproto_test

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/stratadb/strata/internal/testutil"
	"github.com/stratadb/strata/lineproto"
)

// The insert baseline of docs/benchmarks.md: 1,000 devices x 1,000 timestamps.
const (
	iotDevices = 1000
	iotSteps   = 1000
	iotLines   = iotDevices * iotSteps
	iotStart   = 1_700_000_000 // seconds
)

// iotDataset renders the baseline dataset as line protocol with nanosecond
// timestamps: measurement sensor, tags device_id=dev-%04d and
// site=site-%02d (device i is at site i%10), one float field temperature
// that starts at 20+(i%7) and takes a random walk in steps drawn uniformly
// from [-0.25, 0.25) by a PCG seeded (904, i), rounded to 0.01. All devices
// at t0, then all at t1, and so on.
var iotDataset = sync.OnceValue(func() []byte {
	w := testutil.NewIoTWalk(iotDevices)
	buf := make([]byte, 0, iotLines*80)
	for range iotSteps {
		ts, temps := w.Next()
		for i, v := range temps {
			buf = testutil.AppendIoTLine(buf, i, v, ts)
		}
	}
	return buf
})

// benchIngest writes the dataset into the DB made by newDB for each
// iteration and reports lines/s and allocations per line.
func benchIngest(b *testing.B, newDB func() lineproto.DB) {
	data := iotDataset()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := testutil.CPUTime()
	lines := 0
	for b.Loop() {
		res, err := lineproto.Write(context.Background(), newDB(), bytes.NewReader(data), lineproto.Options{})
		if err != nil || res.Points != iotLines || len(res.Rejected) != 0 {
			b.Fatalf("Write: %d points, %d rejected, %v", res.Points, len(res.Rejected), err)
		}
		lines += res.Lines
	}
	cpu := testutil.CPUTime() - cpu0
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	if cpu > 0 {
		// On a shared machine wall time says little; CPU time (all threads
		// of the process, GC included) says what a line costs.
		b.ReportMetric(float64(lines)/cpu.Seconds(), "lines/cpu-s")
	}
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(lines), "allocs/line")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(lines), "B/line")
}

// BenchmarkWrite measures the parser path: the 1M-line dataset into a DB
// that drops the points.
func BenchmarkWrite(b *testing.B) {
	benchIngest(b, func() lineproto.DB { return &discardDB{} })
}

// BenchmarkDecoder is the floor under BenchmarkWrite: the lineprotocol
// decoder alone over the same bytes, building nothing.
func BenchmarkDecoder(b *testing.B) {
	data := iotDataset()
	b.SetBytes(int64(len(data)))
	cpu0 := testutil.CPUTime()
	lines := 0
	for b.Loop() {
		d := lineprotocol.NewDecoderWithBytes(data)
		for d.Next() {
			if _, err := d.Measurement(); err != nil {
				b.Fatal(err)
			}
			for {
				k, _, err := d.NextTag()
				if err != nil {
					b.Fatal(err)
				}
				if k == nil {
					break
				}
			}
			for {
				k, _, _, err := d.NextFieldBytes()
				if err != nil {
					b.Fatal(err)
				}
				if k == nil {
					break
				}
			}
			if _, err := d.TimeBytes(); err != nil {
				b.Fatal(err)
			}
			lines++
		}
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	if cpu := testutil.CPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(lines)/cpu.Seconds(), "lines/cpu-s")
	}
}

// BenchmarkWriteDecoderPath is BenchmarkWrite with every line parsed by
// the decoder, as lines whose series section is new are: the fast path's
// gain is the difference.
func BenchmarkWriteDecoderPath(b *testing.B) {
	defer lineproto.DisableFastPath()()
	benchIngest(b, func() lineproto.DB { return &discardDB{} })
}
