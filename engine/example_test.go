package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratadb/strata/engine"
)

// An edge gateway opens its database once, writes the readings it
// collects and answers queries from the same process.
func Example_open() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := engine.Open(dir, nil) // nil options: the defaults
	if err != nil {
		log.Fatal(err)
	}

	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tags := []engine.Tag{{Key: "device_id", Value: "dev-0001"}, {Key: "site", Value: "site-01"}}
	var points []engine.Point
	for i, celsius := range []float64{21.5, 21.7, 21.6, 22.0} {
		points = append(points, engine.Point{
			Measurement: "sensor",
			Tags:        tags,
			Fields:      []engine.Field{{Key: "temperature", Value: engine.Float(celsius)}},
			Time:        t0.Add(time.Duration(i) * 30 * time.Second).UnixNano(),
		})
	}
	if err := db.Write(points); err != nil { // durable when it returns
		log.Fatal(err)
	}

	ctx := context.Background()
	sel := engine.Selector{
		Measurement: "sensor",
		Tags:        []engine.Tag{{Key: "device_id", Value: "dev-0001"}},
		Start:       t0.UnixNano(),
		End:         t0.Add(time.Hour).UnixNano(),
	}
	raw, err := db.Query(ctx, engine.Query{Selector: sel})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range raw {
		for _, smp := range s.Samples {
			fmt.Println(s.Field, time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
		}
	}

	means, err := db.Query(ctx, engine.Query{Selector: sel, Agg: engine.AggMean, Every: int64(time.Minute)})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range means {
		for _, smp := range s.Samples {
			fmt.Println("mean", time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
		}
	}

	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// temperature 12:00:00 21.5
	// temperature 12:00:30 21.7
	// temperature 12:01:00 21.6
	// temperature 12:01:30 22
	// mean 12:00:00 21.6
	// mean 12:01:00 21.8
}

// openExample opens a database in a fresh temporary directory; the
// returned function closes it and removes the directory.
func openExample() (*engine.DB, func()) {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	return db, func() {
		if err := db.Close(); err != nil {
			log.Fatal(err)
		}
		os.RemoveAll(dir)
	}
}

// The hottest reading per device and 10-minute bucket at one site.
func ExampleDB_Query() {
	db, done := openExample()
	defer done()

	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var points []engine.Point
	for minute := range 20 {
		for dev := range 2 {
			points = append(points, engine.Point{
				Measurement: "sensor",
				Tags: []engine.Tag{
					{Key: "device_id", Value: fmt.Sprintf("dev-%04d", dev)},
					{Key: "site", Value: "site-01"},
				},
				Fields: []engine.Field{{Key: "temperature", Value: engine.Float(20 + float64(dev) + float64(minute)/10)}},
				Time:   t0.Add(time.Duration(minute) * time.Minute).UnixNano(),
			})
		}
	}
	if err := db.Write(points); err != nil {
		log.Fatal(err)
	}

	res, err := db.Query(context.Background(), engine.Query{
		Selector: engine.Selector{
			Measurement: "sensor",
			Field:       "temperature",
			Tags:        []engine.Tag{{Key: "site", Value: "site-01"}},
			Start:       t0.UnixNano(),
			End:         t0.Add(20 * time.Minute).UnixNano(),
		},
		Agg:   engine.AggMax,
		Every: int64(10 * time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range res {
		for _, smp := range s.Samples {
			fmt.Println(s.Tags[0].Value, time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
		}
	}
	// Output:
	// dev-0000 12:00:00 20.9
	// dev-0000 12:10:00 21.9
	// dev-0001 12:00:00 21.9
	// dev-0001 12:10:00 22.9
}

// Deleting readings taken while a sensor was miscalibrated. Readings
// written after the Delete, even inside its range, are kept.
func ExampleDB_Delete() {
	db, done := openExample()
	defer done()

	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(minute int) int64 { return t0.Add(time.Duration(minute) * time.Minute).UnixNano() }
	reading := func(minute int, celsius float64) engine.Point {
		return engine.Point{
			Measurement: "sensor",
			Tags:        []engine.Tag{{Key: "device_id", Value: "dev-0007"}},
			Fields:      []engine.Field{{Key: "temperature", Value: engine.Float(celsius)}},
			Time:        at(minute),
		}
	}
	if err := db.Write([]engine.Point{reading(0, 21.0), reading(1, 85.0), reading(2, 85.5), reading(3, 21.4)}); err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	bad := engine.Selector{
		Measurement: "sensor",
		Tags:        []engine.Tag{{Key: "device_id", Value: "dev-0007"}},
		Start:       at(1),
		End:         at(3), // half-open: minute 3 stays
	}
	if err := db.Delete(ctx, bad); err != nil {
		log.Fatal(err)
	}
	if err := db.Write([]engine.Point{reading(2, 21.2)}); err != nil { // a corrected value
		log.Fatal(err)
	}

	res, err := db.Query(ctx, engine.Query{Selector: engine.Selector{Measurement: "sensor", Start: at(0), End: at(60)}})
	if err != nil {
		log.Fatal(err)
	}
	for _, smp := range res[0].Samples {
		fmt.Println(time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
	}
	// Output:
	// 12:00:00 21
	// 12:02:00 21.2
	// 12:03:00 21.4
}

// A reader of many samples scans them column by column: nothing is
// allocated per sample, and the columns are reused from run to run.
func ExampleDB_Scan() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	var points []engine.Point
	for d := range 3 {
		tags := []engine.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%04d", d)}}
		for i := range 60 {
			points = append(points, engine.Point{Measurement: "sensor", Tags: tags, Time: t0 + int64(i)*int64(time.Second),
				Fields: []engine.Field{{Key: "temperature", Value: engine.Float(20 + float64(d) + float64(i)/100)}}})
		}
	}
	if err := db.Write(points); err != nil {
		log.Fatal(err)
	}

	sel := engine.Selector{Measurement: "sensor", Start: t0, End: t0 + int64(time.Minute)}
	for c, err := range db.Scan(context.Background(), sel) {
		if err != nil {
			log.Fatal(err)
		}
		sum := 0.0
		for _, v := range c.Floats {
			sum += v
		}
		fmt.Printf("%s %s: %d samples, mean %.3f\n", c.Tags[0].Value, c.Field, c.Len(), sum/float64(c.Len()))
	}
	// Output:
	// dev-0000 temperature: 60 samples, mean 20.295
	// dev-0001 temperature: 60 samples, mean 21.295
	// dev-0002 temperature: 60 samples, mean 22.295
}
