package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stratadb/strata/engine"
)

// The questions a gateway's dashboard asks: the current value of every
// device, the mean per site, the values of a tag for a dashboard variable,
// and a regexp filter.
func Example_dashboard() {
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

	// Three devices at two sites, one reading a minute; dev-3 has no site.
	t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	devices := []struct{ id, site string }{{"dev-1", "north"}, {"dev-2", "north"}, {"dev-3", ""}, {"dev-10", "south"}}
	var points []engine.Point
	for step := range 3 {
		for i, d := range devices {
			tags := []engine.Tag{{Key: "device_id", Value: d.id}}
			if d.site != "" {
				tags = append(tags, engine.Tag{Key: "site", Value: d.site})
			}
			points = append(points, engine.Point{Measurement: "sensor", Tags: tags,
				Fields: []engine.Field{{Key: "temperature", Value: engine.Float(float64(20 + i + step))}},
				Time:   t0.Add(time.Duration(step) * time.Minute).UnixNano()})
		}
	}
	if err := db.Write(points); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	all := engine.Selector{Measurement: "sensor"} // Start == End == 0: all time
	show := func(title string, res []engine.Series) {
		fmt.Println(title)
		for _, s := range res {
			for _, smp := range s.Samples {
				fmt.Printf("  %s %s %v\n", s.Key(), time.Unix(0, smp.Time).UTC().Format(time.TimeOnly), smp.Value)
			}
		}
	}

	// 1. The current value of every device.
	last, err := db.Last(ctx, all)
	if err != nil {
		log.Fatal(err)
	}
	show("current value:", last)

	// 2. The mean temperature per site (InfluxQL GROUP BY site). A device
	// without the tag forms the group with no site.
	perSite, err := db.Query(ctx, engine.Query{Selector: all, Agg: engine.AggMean, GroupBy: []string{"site"}})
	if err != nil {
		log.Fatal(err)
	}
	show("mean per site:", perSite)

	// 3. The values of a tag, for a dashboard variable.
	sites, err := db.TagValues(ctx, "site", all)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sites:", sites)

	// 4. A regexp filter, anchored as in PromQL: dev-1.* matches dev-1 and
	// dev-10; the hottest reading of each and when it was taken.
	hot, err := db.Query(ctx, engine.Query{Agg: engine.AggMax, Selector: engine.Selector{Measurement: "sensor",
		Matchers: []engine.Matcher{{Key: "device_id", Op: engine.MatchRegexp, Value: "dev-1.*"}}}})
	if err != nil {
		log.Fatal(err)
	}
	show("max of dev-1.*:", hot)

	// Output:
	// current value:
	//   sensor,device_id=dev-1,site=north temperature 12:02:00 22
	//   sensor,device_id=dev-10,site=south temperature 12:02:00 25
	//   sensor,device_id=dev-2,site=north temperature 12:02:00 23
	//   sensor,device_id=dev-3 temperature 12:02:00 24
	// mean per site:
	//   sensor temperature 00:00:00 23
	//   sensor,site=north temperature 00:00:00 21.5
	//   sensor,site=south temperature 00:00:00 24
	// sites: [north south]
	// max of dev-1.*:
	//   sensor,device_id=dev-1,site=north temperature 12:02:00 22
	//   sensor,device_id=dev-10,site=south temperature 12:02:00 25
}
