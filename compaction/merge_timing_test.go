package compaction

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// BenchmarkMerge merges four L0-like inputs of 200 float series. In
// "append" each input holds the next time window of every series (the
// common case: flushes of an append-only workload); in "overlap" the four
// inputs interleave in time and a tenth of the timestamps are rewritten.
func BenchmarkMerge(b *testing.B) {
	const (
		ninputs   = 4
		nseries   = 200
		perSeries = 2500 // per input
	)
	for _, overlap := range []bool{false, true} {
		name := "append"
		if overlap {
			name = "overlap"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			fs := vfs.Default
			var inputs []Input
			var inBytes, inSamples int64
			for i := range ninputs {
				rng := rand.New(rand.NewPCG(uint64(i), 3))
				series := make([]tseries, nseries)
				for s := range series {
					samples := make([]point.Sample, perSeries)
					v := 20.0 + float64(s%7)
					for j := range samples {
						var tm int64
						if overlap {
							tm = int64(j*ninputs+i) * 1e9
							if rng.IntN(10) == 0 && i > 0 {
								tm = int64(j*ninputs) * 1e9 // rewrite input 0's sample
							}
						} else {
							tm = int64(i*perSeries+j) * 1e9
						}
						v += math.Round((rng.Float64()-0.5)*50) / 100
						samples[j] = point.Sample{Time: tm, Value: point.Float(math.Round(v*100) / 100)}
					}
					series[s] = tseries{key: fmt.Sprintf("sensor,device_id=dev-%04d,site=site-%02d temperature", s, s%10), kind: point.KindFloat, samples: dedupe(samples)}
					inSamples += int64(len(series[s].samples))
				}
				r := writeSeg(b, fs, filepath.Join(dir, fmt.Sprintf("in%d.seg", i)), 1000, series)
				inBytes += r.Meta().Size
				inputs = append(inputs, Input{Reader: r})
			}
			o := &outputs{fs: fs, dir: b.TempDir(), blockSamples: 1000}
			opts := o.mergeOpts()
			opts.TargetSegmentBytes = 64 << 20
			var st MergeStats
			b.ReportAllocs()
			for b.Loop() {
				metas, s, err := Merge(context.Background(), inputs, opts)
				if err != nil {
					b.Fatal(err)
				}
				st = s
				for _, m := range metas {
					fs.Remove(m.Path)
				}
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(inSamples)/sec, "samples/s")
			b.ReportMetric(float64(inBytes)/sec/1e6, "MB/s")
			b.ReportMetric(float64(st.BytesWritten)/float64(st.SamplesOut), "B/sample")
		})
	}
}

// dedupe drops samples whose time is not after the previous one's.
func dedupe(s []point.Sample) []point.Sample {
	out := s[:0]
	for _, x := range s {
		if len(out) == 0 || x.Time > out[len(out)-1].Time {
			out = append(out, x)
		}
	}
	return out
}
