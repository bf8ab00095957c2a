package bench

import (
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/stratadb/strata/engine"
)

// Shape names a dataset layout.
type Shape string

const (
	// ShapeIoT is the baseline: many devices, each a random walk of
	// temperatures rounded to 0.01.
	ShapeIoT Shape = "iot"
	// ShapeSonnetDB is one series of uniform random values in [0, 100)
	// rounded to 4 decimals, as in SonnetDB's published insert benchmark.
	ShapeSonnetDB Shape = "sonnetdb"
	// ShapeWide is SonnetDB's server comparison: the IoT walk with 30
	// float fields per point, 1,000 devices x 12 timestamps by default.
	ShapeWide Shape = "wide"
)

// Shapes returns the dataset shapes.
func Shapes() []Shape { return []Shape{ShapeIoT, ShapeSonnetDB, ShapeWide} }

// Default sizes of ShapeWide.
const (
	WidePoints  = 12_000
	WideDevices = 1000
	WideFields  = 30
)

// Start is the first timestamp of every dataset: 2023-11-14T22:13:20Z.
const Start = int64(1_700_000_000) * int64(time.Second)

// Interval is the spacing of a series' timestamps.
const Interval = int64(time.Second)

// Dataset is a deterministic set of points: Devices series per field, each
// with Steps samples at Start, Start+Interval, ... Point i of the dataset is
// device i%Devices at step i/Devices: all devices at t0, then all at t1, and
// so on. Every point carries all the fields.
type Dataset struct {
	Shape       Shape
	Measurement string
	Devices     int      // series per field (1 for ShapeSonnetDB)
	Steps       int      // timestamps per series
	Fields      []string // field keys; Fields[0] is the baseline field
	Start       int64    // first timestamp, Unix ns
	Interval    int64    // timestamp spacing, ns

	tags   [][]engine.Tag // per device, sorted by key, shared by all points
	values [][]float64    // per field: value of (device, step) at step*Devices+device
	// gen computes values when values is nil: the endless stream of the
	// mixed workload, too long to hold.
	gen func(field, device, step int) float64
}

// IoT returns the baseline dataset: points/devices timestamps of devices
// devices. Device i has tags device_id=dev-%04d and site=site-%02d (i%10) and
// fields temperature, temperature2, ... (fields of them). Field j of device i
// starts at 20 + i%7 and each following step adds a delta drawn uniformly
// from [-0.25, 0.25) by a PCG seeded (904+j, i); the walk is rounded to 0.01
// at every step and continues from the rounded value.
func IoT(points, devices, fields int) (*Dataset, error) {
	if err := checkSize(points, devices, fields); err != nil {
		return nil, err
	}
	d := &Dataset{
		Shape:       ShapeIoT,
		Measurement: "sensor",
		Devices:     devices,
		Steps:       points / devices,
		Fields:      fieldKeys("temperature", fields),
		Start:       Start,
		Interval:    Interval,
		tags:        make([][]engine.Tag, devices),
		values:      make([][]float64, fields),
	}
	for i := range devices {
		d.tags[i] = []engine.Tag{
			{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)},
			{Key: "site", Value: fmt.Sprintf("site-%02d", i%10)},
		}
	}
	for j := range fields {
		vals := make([]float64, points)
		for i := range devices {
			r := rand.New(rand.NewPCG(uint64(904+j), uint64(i)))
			v := 20.0 + float64(i%7)
			for s := range d.Steps {
				if s > 0 {
					v = round(v+r.Float64()*0.5-0.25, 100)
				}
				vals[s*devices+i] = v
			}
		}
		d.values[j] = vals
	}
	return d, nil
}

// SonnetDB returns one series (measurement sonnetdb, tag id=0) of points
// samples whose field j (value, value2, ...) is uniform in [0, 100) from a
// PCG seeded (904+j, 0), rounded to 4 decimals.
func SonnetDB(points, fields int) (*Dataset, error) {
	if err := checkSize(points, 1, fields); err != nil {
		return nil, err
	}
	d := &Dataset{
		Shape:       ShapeSonnetDB,
		Measurement: "sonnetdb",
		Devices:     1,
		Steps:       points,
		Fields:      fieldKeys("value", fields),
		Start:       Start,
		Interval:    Interval,
		tags:        [][]engine.Tag{{{Key: "id", Value: "0"}}},
		values:      make([][]float64, fields),
	}
	for j := range fields {
		r := rand.New(rand.NewPCG(uint64(904+j), 0))
		vals := make([]float64, points)
		for s := range vals {
			vals[s] = round(r.Float64()*100, 1e4)
		}
		d.values[j] = vals
	}
	return d, nil
}

// NewDataset returns the dataset of the given shape; devices is ignored for
// ShapeSonnetDB.
func NewDataset(shape Shape, points, devices, fields int) (*Dataset, error) {
	switch shape {
	case ShapeIoT, "":
		return IoT(points, devices, fields)
	case ShapeSonnetDB:
		return SonnetDB(points, fields)
	case ShapeWide:
		d, err := IoT(points, devices, fields)
		if d != nil {
			d.Shape = ShapeWide
		}
		return d, err
	}
	return nil, fmt.Errorf("bench: unknown shape %q (want iot, sonnetdb or wide)", shape)
}

func checkSize(points, devices, fields int) error {
	switch {
	case points <= 0:
		return fmt.Errorf("bench: points must be positive, got %d", points)
	case devices <= 0:
		return fmt.Errorf("bench: devices must be positive, got %d", devices)
	case points%devices != 0:
		return fmt.Errorf("bench: points (%d) must be a multiple of devices (%d)", points, devices)
	case fields <= 0:
		return fmt.Errorf("bench: fields must be positive, got %d", fields)
	}
	return nil
}

func fieldKeys(base string, n int) []string {
	keys := make([]string, n)
	keys[0] = base
	for j := 1; j < n; j++ {
		keys[j] = base + strconv.Itoa(j+1)
	}
	return keys
}

// round rounds v to a multiple of 1/scale, as a decimal would be written:
// the result is the float64 nearest to an integer divided by scale.
func round(v, scale float64) float64 { return math.Round(v*scale) / scale }

// Len returns the number of points.
func (d *Dataset) Len() int { return d.Devices * d.Steps }

// End returns the end of the dataset's time range (exclusive).
func (d *Dataset) End() int64 { return d.Time(d.Steps) }

// Time returns the timestamp of a step.
func (d *Dataset) Time(step int) int64 { return d.Start + int64(step)*d.Interval }

// Tags returns a device's tags, sorted by key. The slice is shared: do not
// modify it.
func (d *Dataset) Tags(device int) []engine.Tag { return d.tags[device] }

// Value returns the value of field j of a device at a step.
func (d *Dataset) Value(field, device, step int) float64 {
	if d.values == nil {
		return d.gen(field, device, step)
	}
	return d.values[field][step*d.Devices+device]
}

// SeriesKey returns the canonical key of field j of a device.
func (d *Dataset) SeriesKey(field, device int) string {
	return engine.SeriesKey(d.Measurement, d.tags[device], d.Fields[field])
}

// Point returns point i (device i%Devices at step i/Devices) in freshly
// allocated memory, apart from its shared tags.
func (d *Dataset) Point(i int) engine.Point {
	p := engine.Point{Fields: make([]engine.Field, len(d.Fields))}
	d.fill(&p, i)
	return p
}

func (d *Dataset) fill(p *engine.Point, i int) {
	device, step := i%d.Devices, i/d.Devices
	p.Measurement = d.Measurement
	p.Tags = d.tags[device]
	p.Time = d.Time(step)
	for j, key := range d.Fields {
		var v float64
		if d.values != nil {
			v = d.values[j][i]
		} else {
			v = d.gen(j, device, step)
		}
		p.Fields[j] = engine.Field{Key: key, Value: engine.Float(v)}
	}
}

// Stream returns the endless dataset of the mixed workload: the IoT
// layout (devices, tags, fields, times), Steps set to steps, and values
// computed on demand instead of held: field j of device i at step s is
// 20 + i%7 plus a uniform offset in [-5, 5) drawn from a hash of (j, i, s),
// rounded to 0.01. Random access lets any answer be checked against the
// stream without keeping what was written.
func Stream(steps, devices, fields int) (*Dataset, error) {
	if err := checkSize(devices, devices, fields); err != nil {
		return nil, err
	}
	d := &Dataset{
		Shape:       ShapeIoT,
		Measurement: "sensor",
		Devices:     devices,
		Steps:       steps,
		Fields:      fieldKeys("temperature", fields),
		Start:       Start,
		Interval:    Interval,
		tags:        make([][]engine.Tag, devices),
	}
	for i := range devices {
		d.tags[i] = []engine.Tag{
			{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)},
			{Key: "site", Value: fmt.Sprintf("site-%02d", i%10)},
		}
	}
	d.gen = func(field, device, step int) float64 {
		h := mix(uint64(field)<<48 ^ uint64(device)<<32 ^ uint64(step) ^ 0x9e3779b97f4a7c15)
		return round(20+float64(device%7)+float64(h>>11)/(1<<53)*10-5, 100)
	}
	return d, nil
}

// Batches yields the points in order, size at a time (the last batch may be
// shorter). The yielded slice and its points' Fields are reused by the next
// batch: a consumer must not keep them, as with io.Writer. Tags are shared
// and must not be modified. The points are built from precomputed values,
// so iterating costs a copy, no allocation after the first batch.
func (d *Dataset) Batches(size int) iter.Seq[[]engine.Point] {
	return func(yield func([]engine.Point) bool) {
		if size <= 0 {
			size = d.Len()
		}
		n := d.Len()
		buf := make([]engine.Point, min(size, n))
		nf := len(d.Fields)
		fields := make([]engine.Field, len(buf)*nf)
		for k := range buf {
			buf[k].Fields = fields[k*nf : (k+1)*nf : (k+1)*nf]
		}
		for off := 0; off < n; off += size {
			b := buf[:min(size, n-off)]
			for k := range b {
				d.fill(&b[k], off+k)
			}
			if !yield(b) {
				return
			}
		}
	}
}
