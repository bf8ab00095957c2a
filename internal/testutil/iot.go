package testutil

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/stratadb/strata/internal/point"
)

// The IoT baseline dataset, as the benchmarks define it: devices
// temperature sensors sampled once a second from IoTStart. Device i is the
// series sensor,device_id=dev-NNNN,site=site-NN (site i%10) and field j
// (temperature, temperature2, ...) of it starts at 20 + i%7; each following
// step adds a delta drawn uniformly from [-0.25, 0.25) by a PCG seeded
// (904+j, i), and the walk is rounded to 0.01 at every step and continues
// from the rounded value. bench.IoT builds the same values for the
// published figures.
const (
	IoTMeasurement = "sensor"
	IoTField       = "temperature"
	IoTStart       = int64(1_700_000_000) * 1e9 // ns
	IoTInterval    = int64(1e9)                 // ns
)

// IoTTags returns the tags of device i, sorted by key.
func IoTTags(i int) []point.Tag {
	return []point.Tag{
		{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)},
		{Key: "site", Value: fmt.Sprintf("site-%02d", i%10)},
	}
}

// IoTWalk yields the values of field 0 of every device, one step at a
// time.
type IoTWalk struct {
	rngs []*rand.Rand
	vals []float64
	step int
}

// NewIoTWalk returns the walk of devices devices, before its first step.
func NewIoTWalk(devices int) *IoTWalk {
	w := &IoTWalk{rngs: make([]*rand.Rand, devices), vals: make([]float64, devices)}
	for i := range devices {
		w.rngs[i] = rand.New(rand.NewPCG(904, uint64(i)))
		w.vals[i] = 20 + float64(i%7)
	}
	return w
}

// Next advances to the next step (the first call gives step 0) and returns
// its time and every device's value, in a slice the next call overwrites.
func (w *IoTWalk) Next() (t int64, vals []float64) {
	if w.step > 0 {
		for i, r := range w.rngs {
			w.vals[i] = math.Round((w.vals[i]+r.Float64()*0.5-0.25)*100) / 100
		}
	}
	t = IoTStart + int64(w.step)*IoTInterval
	w.step++
	return t, w.vals
}

// AppendIoTLine appends to dst the line protocol of device i's value v at
// time t (ns), newline included.
func AppendIoTLine(dst []byte, i int, v float64, t int64) []byte {
	dst = fmt.Appendf(dst, "%s,device_id=dev-%04d,site=site-%02d %s=", IoTMeasurement, i, i%10, IoTField)
	dst = strconv.AppendFloat(dst, v, 'f', -1, 64)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, t, 10)
	return append(dst, '\n')
}
