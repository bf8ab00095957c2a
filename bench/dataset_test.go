package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/testutil"
)

// specWalk returns the first n values of field 0 of device i from the
// dataset's shared definition (testutil.IoTWalk), independently of the
// generator.
func specWalk(i, n int) []float64 {
	w := testutil.NewIoTWalk(i + 1)
	out := make([]float64, n)
	for s := range out {
		_, vals := w.Next()
		out[s] = vals[i]
	}
	return out
}

func TestIoTFirstValues(t *testing.T) {
	ds, err := IoT(1_000_000, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Golden values: a change to the generator changes the baseline.
	golden := map[int][]float64{
		0:   {20, 20.05, 20.03, 20.26, 20.27, 20.29},
		42:  {20, 19.85, 19.94, 20.17, 20.3, 20.09},
		999: {25, 24.96, 24.82, 24.9, 24.77, 24.94},
	}
	for dev, want := range golden {
		if spec := specWalk(dev, len(want)); !slices.Equal(spec, want) {
			t.Fatalf("device %d: spec gives %v, golden %v", dev, spec, want)
		}
		for s, w := range want {
			if got := ds.Value(0, dev, s); got != w {
				t.Errorf("device %d step %d: %v, want %v", dev, s, got, w)
			}
		}
	}
	// The walk is rounded at every step: every value is a whole number of
	// hundredths, and consecutive values differ by at most 0.25 + rounding.
	for s := 1; s < ds.Steps; s++ {
		prev, v := ds.Value(0, 42, s-1), ds.Value(0, 42, s)
		if math.Abs(v-prev) > 0.255 || v != math.Round(v*100)/100 {
			t.Fatalf("step %d: %v after %v", s, v, prev)
		}
	}
	if got := specWalk(42, 1000)[999]; got != ds.Value(0, 42, 999) {
		t.Errorf("device 42 step 999: %v, spec %v", ds.Value(0, 42, 999), got)
	}

	if ds.Len() != 1_000_000 || ds.Steps != 1000 || ds.Measurement != "sensor" || !slices.Equal(ds.Fields, []string{"temperature"}) {
		t.Fatalf("dataset %d points, %d steps, %q %v", ds.Len(), ds.Steps, ds.Measurement, ds.Fields)
	}
	p := ds.Point(1042) // device 42 at step 1
	want := engine.Point{
		Measurement: "sensor",
		Tags:        []engine.Tag{{Key: "device_id", Value: "dev-0042"}, {Key: "site", Value: "site-02"}},
		Fields:      []engine.Field{{Key: "temperature", Value: engine.Float(19.85)}},
		Time:        1_700_000_001_000_000_000,
	}
	if !pointsEqual(p, want) {
		t.Errorf("point 1042 = %+v, want %+v", p, want)
	}
	if k := ds.SeriesKey(0, 42); k != "sensor,device_id=dev-0042,site=site-02 temperature" {
		t.Errorf("series key %q", k)
	}
}

func pointsEqual(a, b engine.Point) bool {
	return a.Measurement == b.Measurement && a.Time == b.Time && slices.Equal(a.Tags, b.Tags) &&
		slices.EqualFunc(a.Fields, b.Fields, func(x, y engine.Field) bool { return x.Key == y.Key && x.Value.Equal(y.Value) })
}

func TestDatasetDeterministic(t *testing.T) {
	a, err := IoT(50_000, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := IoT(50_000, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	var pa []engine.Point
	for batch := range a.Batches(7_000) {
		for _, p := range batch {
			p.Fields = slices.Clone(p.Fields) // the batch is reused
			pa = append(pa, p)
		}
	}
	if len(pa) != 50_000 {
		t.Fatalf("%d points from Batches", len(pa))
	}
	for i, p := range pa {
		if !pointsEqual(p, b.Point(i)) {
			t.Fatalf("point %d differs between two generations: %+v vs %+v", i, p, b.Point(i))
		}
	}
	// Extra fields have their own seeds.
	if !slices.Equal(a.Fields, []string{"temperature", "temperature2", "temperature3"}) {
		t.Fatalf("fields %v", a.Fields)
	}
	same := true
	for s := range a.Steps {
		same = same && a.Value(0, 5, s) == a.Value(1, 5, s)
	}
	if same {
		t.Error("temperature2 repeats temperature")
	}
}

func TestBatches(t *testing.T) {
	ds, err := IoT(2_500, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	i := 0
	for b := range ds.Batches(1_000) {
		sizes = append(sizes, len(b))
		for _, p := range b {
			if !pointsEqual(p, ds.Point(i)) {
				t.Fatalf("point %d: %+v, want %+v", i, p, ds.Point(i))
			}
			i++
		}
	}
	if !slices.Equal(sizes, []int{1000, 1000, 500}) {
		t.Errorf("batch sizes %v", sizes)
	}
	// Stopping early is allowed.
	n := 0
	for range ds.Batches(100) {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("stopped after %d batches", n)
	}
}

func TestSonnetDB(t *testing.T) {
	ds, err := SonnetDB(10_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Devices != 1 || ds.Steps != 10_000 || ds.Measurement != "sonnetdb" || ds.Fields[0] != "value" {
		t.Fatalf("dataset %+v", ds)
	}
	if k := ds.SeriesKey(0, 0); k != "sonnetdb,id=0 value" {
		t.Errorf("series key %q", k)
	}
	r := rand.New(rand.NewPCG(904, 0))
	for s := range ds.Steps {
		want := math.Round(r.Float64()*100*1e4) / 1e4
		if got := ds.Value(0, 0, s); got != want || got < 0 || got > 100 {
			t.Fatalf("step %d: %v, want %v", s, got, want)
		}
	}
	if got := ds.Value(0, 0, 0); got != 59.5175 {
		t.Errorf("first value %v, want 59.5175", got)
	}
}

func TestDatasetErrors(t *testing.T) {
	for _, c := range []struct{ points, devices, fields int }{
		{1001, 1000, 1}, {0, 10, 1}, {100, 0, 1}, {100, 10, 0}, {-10, 10, 1},
	} {
		if _, err := IoT(c.points, c.devices, c.fields); err == nil {
			t.Errorf("IoT(%d, %d, %d) succeeded", c.points, c.devices, c.fields)
		}
	}
	if _, err := NewDataset("csv", 10, 1, 1); err == nil {
		t.Error("unknown shape accepted")
	}
}
