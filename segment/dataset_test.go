package segment

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stratadb/strata/internal/point"
)

// iotDataset generates the IoT benchmark dataset (docs/benchmarks.md): devices
// series of `sensor,device_id=dev-NNNN,site=site-NN temperature`, each with
// steps samples at 1 s intervals from 1,700,000,000 s. Device i starts at
// 20.0 + (i % 7) and each step adds a uniform delta in [-0.25, 0.25) drawn
// from PCG(904, i); stored values are rounded to 0.01. Series come sorted
// by key.
func iotDataset(devices, steps int) []testSeries {
	const t0 = 1_700_000_000 * int64(1e9)
	out := make([]testSeries, devices)
	for i := range out {
		tags := []point.Tag{
			{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)},
			{Key: "site", Value: fmt.Sprintf("site-%02d", i%10)},
		}
		rng := rand.New(rand.NewPCG(904, uint64(i)))
		v := 20.0 + float64(i%7)
		samples := make([]point.Sample, steps)
		for s := range samples {
			if s > 0 {
				v += rng.Float64()*0.5 - 0.25
			}
			samples[s] = point.Sample{Time: t0 + int64(s)*1e9, Value: point.Float(math.Round(v*100) / 100)}
		}
		out[i] = testSeries{
			key:     point.AppendSeriesKey(nil, "sensor", tags, "temperature"),
			kind:    point.KindFloat,
			samples: samples,
		}
	}
	return out
}
