package segment

import (
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
)

// iotDataset generates the IoT benchmark dataset (docs/benchmarks.md,
// testutil.IoTWalk): devices series of
// `sensor,device_id=dev-NNNN,site=site-NN temperature`, each with steps
// samples at 1 s intervals. Series come sorted by key.
func iotDataset(devices, steps int) []testSeries {
	out := make([]testSeries, devices)
	for i := range out {
		out[i] = testSeries{
			key:     point.AppendSeriesKey(nil, testutil.IoTMeasurement, testutil.IoTTags(i), testutil.IoTField),
			kind:    point.KindFloat,
			samples: make([]point.Sample, steps),
		}
	}
	w := testutil.NewIoTWalk(devices)
	for s := range steps {
		t, vals := w.Next()
		for i, v := range vals {
			out[i].samples[s] = point.Sample{Time: t, Value: point.Float(v)}
		}
	}
	return out
}
