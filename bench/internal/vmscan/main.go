// Command vmscan stores the range-scan dataset in VictoriaMetrics'
// lib/storage and times a scan of it after a reopen, for the bench
// module's BenchmarkRangeScanVsVictoriaMetrics. It is a module of its own
// (built with GOWORK=off) so that VictoriaMetrics never enters the bench
// module's dependencies.
//
//	vmscan -dir DIR -write -series 1000 -points 600   # store, flush, close
//	vmscan -dir DIR -scans 5                          # reopen, scan, print JSON
//
// The dataset is the bench's: series sensor{device_id="dev-NNNN"}, one
// sample a second from t0, device i starting at 20 + i%7 and moving by a
// uniform step in [-0.25, 0.25) drawn from PCG(904, i), rounded to 0.01.
// The scan reads every sample of every series (metric names resolved,
// blocks decoded, as a query must); the first scan after the reopen is
// reported as cold, the median of the following ones as warm.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/logger"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

var (
	dir    = flag.String("dir", "", "storage directory")
	write  = flag.Bool("write", false, "store the dataset, flush and close")
	series = flag.Int("series", 1000, "series")
	points = flag.Int("points", 600, "samples per series")
	t0     = flag.Int64("t0", 0, "first timestamp, Unix ms")
	scans  = flag.Int("scans", 5, "warm scans to time after the cold one")
)

// result is what a scan run prints.
type result struct {
	Samples int64   `json:"samples"`
	Series  int     `json:"series"`
	ColdMS  float64 `json:"cold_ms"`
	WarmMS  float64 `json:"warm_ms"` // median
	Sum     float64 `json:"sum"`     // of every value, to check against strata's
}

func main() {
	flag.Parse()
	logger.Init()
	if *dir == "" || *t0 == 0 {
		fmt.Fprintln(os.Stderr, "vmscan: -dir and -t0 are required")
		os.Exit(2)
	}
	s := storage.MustOpenStorage(*dir, storage.OpenOptions{})
	if *write {
		store(s)
		s.DebugFlush()
		s.MustClose()
		return
	}
	var res result
	var times []float64
	for i := range *scans + 1 {
		start := time.Now()
		n, nser, sum := scan(s)
		ms := float64(time.Since(start).Nanoseconds()) / 1e6
		if i == 0 {
			res.ColdMS, res.Samples, res.Series, res.Sum = ms, n, nser, sum
			continue
		}
		times = append(times, ms)
	}
	s.MustClose()
	slices.Sort(times)
	res.WarmMS = times[len(times)/2]
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "vmscan:", err)
		os.Exit(1)
	}
}

func store(s *storage.Storage) {
	var mrs []storage.MetricRow
	for i := range *series {
		labels := []prompb.Label{{Name: "__name__", Value: "sensor"}, {Name: "device_id", Value: fmt.Sprintf("dev-%04d", i)}}
		name := storage.MarshalMetricNameRaw(nil, labels)
		rng := rand.New(rand.NewPCG(904, uint64(i)))
		v := 20.0 + float64(i%7)
		for p := range *points {
			if p > 0 {
				v += rng.Float64()*0.5 - 0.25
			}
			mrs = append(mrs, storage.MetricRow{MetricNameRaw: name, Timestamp: *t0 + int64(p)*1000, Value: math.Round(v*100) / 100})
		}
		if len(mrs) >= 10_000 {
			s.AddRows(mrs, 64)
			mrs = mrs[:0]
		}
	}
	s.AddRows(mrs, 64)
}

// scan reads every sample of the sensor series in the dataset's range.
func scan(s *storage.Storage) (samples int64, nseries int, sum float64) {
	tfs := storage.NewTagFilters()
	if err := tfs.Add(nil, []byte("sensor"), false, false); err != nil {
		panic(err)
	}
	tr := storage.TimeRange{MinTimestamp: *t0, MaxTimestamp: *t0 + int64(*points)*1000 - 1}
	var sr storage.Search
	sr.Init(nil, s, []*storage.TagFilters{tfs}, tr, 1e9, uint64(time.Now().Add(time.Minute).Unix()))
	defer sr.MustClose()
	var b storage.Block
	var mn storage.MetricName
	var ts []int64
	var vs []float64
	var last string
	for sr.NextMetricBlock() {
		mbr := sr.MetricBlockRef
		if string(mbr.MetricName) != last {
			if err := mn.Unmarshal(mbr.MetricName); err != nil {
				panic(err)
			}
			last = string(mbr.MetricName)
			nseries++
		}
		mbr.BlockRef.MustReadBlock(&b)
		if err := b.UnmarshalData(); err != nil {
			panic(err)
		}
		ts, vs = b.AppendRowsWithTimeRangeFilter(ts[:0], vs[:0], tr)
		samples += int64(len(ts))
		for _, v := range vs {
			sum += v
		}
	}
	if err := sr.Error(); err != nil {
		panic(err)
	}
	return samples, nseries, sum
}
