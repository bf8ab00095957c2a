package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func limitPoint(m, host string, field string, t int64) Point {
	return Point{Measurement: m, Tags: []Tag{{Key: "host", Value: host}}, Fields: []Field{{Key: field, Value: Float(float64(t))}}, Time: t}
}

// wantLimit checks that err is a *PointError at index wrapping ErrSeriesLimit.
func wantLimit(t *testing.T, err error, index int) {
	t.Helper()
	var pe *PointError
	if !errors.Is(err, ErrSeriesLimit) || !errors.As(err, &pe) || pe.Index != index {
		t.Fatalf("err = %v, want a PointError at %d wrapping ErrSeriesLimit", err, index)
	}
}

func countSeries(t *testing.T, db *DB, m string) (series, samples int) {
	t.Helper()
	res, err := db.Query(context.Background(), Query{Selector: Selector{Measurement: m}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res {
		samples += len(s.Samples)
	}
	return len(res), samples
}

func TestMaxSeries(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.MaxSeries = 3
	db := openDB(t, dir, opts)
	// Two points of one new tag set with two fields: two series.
	if err := db.Write([]Point{
		{Measurement: "cpu", Tags: []Tag{{Key: "host", Value: "a"}}, Fields: []Field{{Key: "u", Value: Float(1)}, {Key: "s", Value: Float(2)}}, Time: 1},
	}); err != nil {
		t.Fatal(err)
	}
	// A call creating two series more fails whole: the first new series of
	// it fits, the second does not, and nothing of the call is stored.
	err := db.Write([]Point{limitPoint("cpu", "a", "u", 2), limitPoint("mem", "b", "v", 2), limitPoint("mem", "c", "v", 2)})
	wantLimit(t, err, 2)
	if n, smp := countSeries(t, db, "cpu"); n != 2 || smp != 2 {
		t.Fatalf("cpu: %d series, %d samples after a refused write; want 2, 2", n, smp)
	}
	if n, _ := countSeries(t, db, "mem"); n != 0 {
		t.Fatalf("mem: %d series after a refused write", n)
	}
	if got := db.Stats().SeriesLimitRefusals; got != 1 {
		t.Fatalf("SeriesLimitRefusals = %d, want 1", got)
	}
	// The third series fits; existing series keep taking writes.
	if err := db.Write([]Point{limitPoint("mem", "b", "v", 3), limitPoint("cpu", "a", "u", 3)}); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, db.Write([]Point{limitPoint("cpu", "a", "u", 4), limitPoint("cpu", "z", "u", 4)}), 1)
	for i := range 100 {
		if err := db.Write([]Point{limitPoint("cpu", "a", "u", int64(10+i)), limitPoint("mem", "b", "v", int64(10+i))}); err != nil {
			t.Fatalf("write to existing series: %v", err)
		}
	}
	// The limit holds across a flush and a restart: the catalog counts.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, dir, opts)
	wantLimit(t, db.Write([]Point{limitPoint("new", "x", "v", 1)}), 0)
	if err := db.Write([]Point{limitPoint("cpu", "a", "s", 500)}); err != nil {
		t.Fatal(err)
	}
	// Raised at the next Open, the limit lets new series in again.
	opts.MaxSeries = 4
	db = reopen(t, db, dir, opts)
	if err := db.Write([]Point{limitPoint("new", "x", "v", 1)}); err != nil {
		t.Fatal(err)
	}
}

func TestMaxSeriesPerMeasurement(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions()
	opts.MaxSeriesPerMeasurement = 2
	db := openDB(t, dir, opts)
	if err := db.Write([]Point{limitPoint("cpu", "a", "v", 1), limitPoint("mem", "a", "v", 1), limitPoint("mem", "b", "v", 1)}); err != nil {
		t.Fatal(err)
	}
	// Two new cpu series in one call: the second passes the limit.
	wantLimit(t, db.Write([]Point{limitPoint("cpu", "b", "v", 2), limitPoint("disk", "a", "v", 2), limitPoint("cpu", "c", "v", 2)}), 2)
	wantLimit(t, db.Write([]Point{limitPoint("mem", "c", "v", 2)}), 0)
	// Other measurements have their own count.
	if err := db.Write([]Point{limitPoint("cpu", "b", "v", 3), limitPoint("disk", "a", "v", 3), limitPoint("disk", "b", "v", 3)}); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, db, dir, opts)
	for _, m := range []string{"cpu", "mem", "disk"} {
		wantLimit(t, db.Write([]Point{limitPoint(m, "zz", "v", 9)}), 0)
		if err := db.Write([]Point{limitPoint(m, "a", "v", 9)}); err != nil {
			t.Fatalf("%s: write to an existing series: %v", m, err)
		}
	}
	if got := db.Stats().SeriesLimitRefusals; got != 3 {
		t.Fatalf("SeriesLimitRefusals = %d after reopen, want 3 (this handle's)", got)
	}
}

func TestSeriesLimitOptionsValidated(t *testing.T) {
	for _, o := range []Options{{MaxSeries: -1}, {MaxSeriesPerMeasurement: -1}, {MaxDiskBytes: -1}} {
		o.Logger = quietOptions().Logger
		if _, err := Open(t.TempDir(), &o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}

// BenchmarkWriteExistingSeriesLimited measures writes to existing series
// with and without limits set: the limit costs nothing on them.
func BenchmarkWriteExistingSeriesLimited(b *testing.B) {
	for _, limited := range []bool{false, true} {
		b.Run(fmt.Sprintf("limited=%v", limited), func(b *testing.B) {
			opts := quietOptions()
			opts.Sync = SyncNever
			if limited {
				opts.MaxSeries, opts.MaxSeriesPerMeasurement = 1_000_000, 1_000_000
			}
			db := openDB(b, b.TempDir(), opts)
			pts := make([]Point, 1000)
			for i := range pts {
				pts[i] = limitPoint("cpu", fmt.Sprintf("h%04d", i), "v", 0)
			}
			b.ResetTimer()
			for n := range b.N {
				for i := range pts {
					pts[i].Time = int64(n)
				}
				if err := db.Write(pts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAppenderSeriesLimit: the Appender creates series at Commit under the
// same limits as Write: a Commit that would pass one fails whole, naming
// the sample that created the refused series, and appends by ref to
// existing series go on.
func TestAppenderSeriesLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Options)
	}{
		{"MaxSeries", func(o *Options) { o.MaxSeries = 2 }},
		{"MaxSeriesPerMeasurement", func(o *Options) { o.MaxSeriesPerMeasurement = 2 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := quietOptions()
			c.set(opts)
			db := openDB(t, t.TempDir(), opts)
			app := db.Appender()
			host := func(h string) []Tag { return []Tag{{Key: "host", Value: h}} }
			ra, err := app.Append(0, "cpu", host("a"), "u", 1, Float(1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := app.Append(0, "cpu", host("b"), "u", 1, Float(1)); err != nil {
				t.Fatal(err)
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			// A third series of cpu: the whole Commit is refused.
			if _, err := app.Append(ra, "", nil, "", 2, Float(2)); err != nil {
				t.Fatal(err)
			}
			if _, err := app.Append(0, "cpu", host("c"), "u", 2, Float(2)); err != nil {
				t.Fatal(err)
			}
			wantLimit(t, app.Commit(), 1)
			if n, smp := countSeries(t, db, "cpu"); n != 2 || smp != 2 {
				t.Fatalf("cpu: %d series, %d samples after a refused Commit; want 2, 2", n, smp)
			}
			if got := db.Stats().SeriesLimitRefusals; got != 1 {
				t.Fatalf("SeriesLimitRefusals = %d, want 1", got)
			}
			// Existing series keep taking samples by ref.
			if _, err := app.Append(ra, "", nil, "", 3, Float(3)); err != nil {
				t.Fatal(err)
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, smp := countSeries(t, db, "cpu"); smp != 3 {
				t.Fatalf("cpu: %d samples, want 3", smp)
			}
		})
	}
}
