package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratadb/strata/engine"
)

// Example_readme is the example at the top of README.md, between the
// README markers, line for line (internal/lint checks that they agree): it
// writes four readings of one device and reads back their means per minute.
func Example_readme() {
	dir, err := os.MkdirTemp("", "strata-readme")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// README begin
	db, err := engine.Open(dir, nil) // nil options: the defaults
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

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
	if err := db.Write(points); err != nil { // all or nothing, durable when it returns
		log.Fatal(err)
	}

	means, err := db.Query(context.Background(), engine.Query{
		Selector: engine.Selector{Measurement: "sensor", Start: t0.UnixNano(), End: t0.Add(time.Hour).UnixNano()},
		Agg:      engine.AggMean,
		Every:    int64(time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range means {
		for _, smp := range s.Samples {
			fmt.Println(s.Key(), time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
		}
	}
	// README end

	// Output:
	// sensor,device_id=dev-0001,site=site-01 temperature 12:00:00 21.6
	// sensor,device_id=dev-0001,site=site-01 temperature 12:01:00 21.8
}
