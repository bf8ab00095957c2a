package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ScaleKind selects what a sweep grows.
type ScaleKind string

const (
	// ScalePoints grows the data: 1M, 10M and 100M points at 1,000 series.
	ScalePoints ScaleKind = "points"
	// ScaleSeries grows the series count: 1k, 10k, 100k and 1M series at
	// 10 points each (3 at 1M).
	ScaleSeries ScaleKind = "series"
)

// ScaleSize is one step of a sweep: Points points of Devices series
// (ShapeIoT, one field).
type ScaleSize struct {
	Points  int `json:"points"`
	Devices int `json:"devices"`
}

// DefaultScaleSizes returns the steps of a sweep.
func DefaultScaleSizes(kind ScaleKind) []ScaleSize {
	switch kind {
	case ScalePoints:
		return []ScaleSize{{1_000_000, 1000}, {10_000_000, 1000}, {100_000_000, 1000}}
	case ScaleSeries:
		return []ScaleSize{{10_000, 1000}, {100_000, 10_000}, {1_000_000, 100_000}, {3_000_000, 1_000_000}}
	}
	return nil
}

// DefaultScaleLimit is how long one engine may take for one size (insert
// and queries) before the sweep stops growing it.
const DefaultScaleLimit = 10 * time.Minute

// ScaleOptions configure RunScale. The zero value of a field takes the
// default named beside it.
type ScaleOptions struct {
	Kind       ScaleKind
	Sizes      []ScaleSize   // default DefaultScaleSizes(Kind), run in this order
	Engines    []string      // default Engines()
	Config     Config        // default ConfigDefault
	Durability Durability    // default Fast
	Batch      int           // default 10,000
	Limit      time.Duration // default DefaultScaleLimit
	Dir        string        // as Options.Dir
	Child      []string      // as Options.Child
	Progress   func(Event)   // as Options.Progress; Run is the size's index
	// SkipQueries skips the queries after each insert.
	SkipQueries bool
}

// ScaleReport is the outcome of RunScale: one result per engine and size
// it ran, including the one that hit the limit.
type ScaleReport struct {
	Machine    Machine       `json:"machine"`
	Kind       ScaleKind     `json:"kind"`
	Config     Config        `json:"config"`
	Durability Durability    `json:"durability"`
	Batch      int           `json:"batch"`
	LimitSec   float64       `json:"limit_sec"`
	Results    []ScaleResult `json:"results"`
}

// ScaleResult is one engine at one size: the figures of Result from a
// single run, the size's series count, and its status: "ok", or
// "over limit" when the engine did not finish within the limit (then its
// figures are zero and it ran no larger size).
type ScaleResult struct {
	Result
	Devices int    `json:"devices"`
	Status  string `json:"status"`
}

// Scale statuses.
const (
	ScaleOK        = "ok"
	ScaleOverLimit = "over limit"
)

// RunScale runs a sweep: for each size in turn, each engine still in the
// sweep inserts the IoT dataset of that size into a fresh directory (in a
// fresh process when Child is set) in one configuration and durability,
// then runs and cross-checks the queries. An engine that does not finish a
// size within Limit is stopped, reported over limit and left out of the
// larger sizes. Like Run, it returns the report with an error matching
// ErrMismatch when an answer was wrong.
func RunScale(ctx context.Context, so ScaleOptions) (*ScaleReport, error) {
	if so.Kind != ScalePoints && so.Kind != ScaleSeries {
		return nil, fmt.Errorf("bench: unknown scale %q (want points or series)", so.Kind)
	}
	if len(so.Sizes) == 0 {
		so.Sizes = DefaultScaleSizes(so.Kind)
	}
	if so.Config == "" {
		so.Config = ConfigDefault
	}
	if so.Durability == "" {
		so.Durability = Fast
	}
	if so.Limit <= 0 {
		so.Limit = DefaultScaleLimit
	}
	o := Options{Batch: so.Batch, Runs: 1, Engines: so.Engines, Dir: so.Dir, Child: so.Child,
		Configs: []Config{so.Config}, Durabilities: []Durability{so.Durability}, Progress: so.Progress,
		SkipQueries: so.SkipQueries}
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	for _, s := range so.Sizes {
		if err := checkSize(s.Points, s.Devices, 1); err != nil {
			return nil, err
		}
	}
	scratch, err := scratchDir(o.Dir, "strata-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)

	rep := &ScaleReport{Kind: so.Kind, Config: so.Config, Durability: so.Durability,
		Batch: o.Batch, LimitSec: so.Limit.Seconds()}
	stopped := map[string]bool{}
	var mismatches []error
	for i, size := range so.Sizes {
		var want map[string]Digest
		var ds *Dataset
		for _, eng := range o.Engines {
			if stopped[eng] || !Supports(eng, so.Config, so.Durability) {
				continue
			}
			if ds == nil {
				// The reference answers of this size, computed once, outside
				// every engine's clock.
				if ds, err = IoT(size.Points, size.Devices, 1); err != nil {
					return nil, err
				}
				if want, err = references(ds, !o.SkipQueries); err != nil {
					return nil, err
				}
			}
			ev := Event{Engine: eng, Config: so.Config, Durability: so.Durability, Run: i + 1, Runs: len(so.Sizes), Total: size.Points, Devices: size.Devices}
			j := job{Engine: eng, Config: so.Config, Durability: so.Durability, Shape: ShapeIoT,
				Points: size.Points, Devices: size.Devices, Fields: 1, Batch: o.Batch,
				Dir:     filepath.Join(scratch, fmt.Sprintf("%s-%d-%d", eng, size.Points, size.Devices)),
				Queries: !o.SkipQueries}
			jctx, cancel := context.WithTimeout(ctx, so.Limit)
			res, err := o.runJob(jctx, j, ev)
			over := jctx.Err() != nil && ctx.Err() == nil
			cancel()
			os.RemoveAll(j.Dir)
			forgetMem(j.Dir)
			if over {
				stopped[eng] = true
				rep.Results = append(rep.Results, ScaleResult{
					Result:  Result{Engine: eng, Config: so.Config, Durability: so.Durability, Points: size.Points},
					Devices: size.Devices, Status: ScaleOverLimit})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("bench: %s at %d points of %d series: %w", eng, size.Points, size.Devices, err)
			}
			for _, ce := range checkJob(res, want, ev) {
				mismatches = append(mismatches, ce)
			}
			rep.Results = append(rep.Results, ScaleResult{
				Result:  summarize(eng, so.Config, so.Durability, size.Points, !o.SkipQueries, []jobResult{res}),
				Devices: size.Devices, Status: ScaleOK})
		}
		ds = nil // let the collector have it before the next size
	}
	rep.Machine = CurrentMachine()
	return rep, errors.Join(mismatches...)
}

// references returns the digest of the reference answer of each query.
func references(ds *Dataset, queries bool) (map[string]Digest, error) {
	want := map[string]Digest{}
	if !queries {
		return want, nil
	}
	var rs resultSet
	for _, nq := range ds.Queries() {
		rs.reset()
		if err := ds.reference(nq.Query, &rs); err != nil {
			return nil, err
		}
		want[nq.Name] = rs.digest()
	}
	return want, nil
}

// WriteJSON writes the sweep as indented JSON.
func (rep *ScaleReport) WriteJSON(w io.Writer) error { return writeJSON(w, rep) }

// scaleCSVHeader names the sweep's CSV columns: the JSON names.
var scaleCSVHeader = []string{"engine", "points", "devices", "status", "insert_ms", "points_per_sec",
	"alloc_bytes", "peak_rss_bytes", "disk_bytes", "bytes_per_point", "point_query_ms", "range_scan_ms", "agg_mean_ms"}

// WriteCSV writes one row per engine and size after a header row.
func (rep *ScaleReport) WriteCSV(w io.Writer) error {
	rows := make([][]string, 0, len(rep.Results))
	for _, r := range rep.Results {
		rec := []string{r.Engine, itoa(int64(r.Points)), itoa(int64(r.Devices)), r.Status, ftoa(r.InsertMsMedian), ftoa(r.PointsPerSec),
			itoa(r.AllocBytes), itoa(r.PeakRSSBytes), itoa(r.DiskBytes), ftoa(r.BytesPerPoint),
			optional(r.PointQueryMs, ftoa, ""), optional(r.RangeScanMs, ftoa, ""), optional(r.AggMeanMs, ftoa, "")}
		if r.Status != ScaleOK {
			for k := 4; k < len(rec); k++ {
				rec[k] = ""
			}
		}
		rows = append(rows, rec)
	}
	return writeCSV(w, scaleCSVHeader, rows)
}

// WriteMarkdown writes the machine line and one table row per engine and
// size.
func (rep *ScaleReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := rep.Machine
	b.WriteString(m.markdownLine())
	fmt.Fprintf(&b, "Sweep of %s: IoT dataset, one run per size, %s/%s, batches of %s, limit %s per engine and size (insert and queries).\n\n",
		rep.Kind, rep.Config, rep.Durability, thousands(float64(rep.Batch)), time.Duration(rep.LimitSec*float64(time.Second)))
	b.WriteString("| engine | points | series | insert s | points/s | peak RSS MiB | disk MiB | B/point | point query ms | range scan ms | agg mean ms |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	opt := func(v *float64) string { return optional(v, millis, "-") }
	for _, r := range rep.Results {
		if r.Status != ScaleOK {
			fmt.Fprintf(&b, "| %s | %s | %s | over limit | - | - | - | - | - | - | - |\n", r.Engine,
				thousands(float64(r.Points)), thousands(float64(r.Devices)))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s | %s | %s | %.2f | %s | %s | %s |\n", r.Engine,
			thousands(float64(r.Points)), thousands(float64(r.Devices)), r.InsertMsMedian/1e3, thousands(r.PointsPerSec),
			mib(r.PeakRSSBytes), mib(r.DiskBytes), r.BytesPerPoint, opt(r.PointQueryMs), opt(r.RangeScanMs), opt(r.AggMeanMs))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
