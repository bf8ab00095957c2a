package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Report is the outcome of Run.
type Report struct {
	Machine Machine     `json:"machine"`
	Dataset DatasetInfo `json:"dataset"`
	Results []Result    `json:"results"`
}

// Machine describes where the bench ran.
type Machine struct {
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	OS    string `json:"os"`
	Go    string `json:"go"`
	// LoadAvg is the 1, 5 and 15-minute load averages when the report
	// was made (Linux), so a reader knows whether the machine was busy
	// with more than the bench.
	LoadAvg string `json:"load_avg,omitempty"`
}

// loadNote is the load averages as a clause of the machine line.
func (m Machine) loadNote() string {
	if m.LoadAvg == "" {
		return ""
	}
	return ", load average " + m.LoadAvg + " at the end"
}

// DatasetInfo describes what was inserted.
type DatasetInfo struct {
	Points  int   `json:"points"`
	Devices int   `json:"devices"`
	Batch   int   `json:"batch"`
	Shape   Shape `json:"shape"`
	Fields  int   `json:"fields"`
}

// Result holds the figures of one engine, configuration and durability.
// Times are medians over the runs unless named otherwise; so are the memory
// and disk figures. The ratio is nil when SQLite did not run in the same
// configuration and durability, the query times are nil when queries were
// skipped.
type Result struct {
	Engine              string     `json:"engine"`
	Config              Config     `json:"config"`
	Durability          Durability `json:"durability"`
	Points              int        `json:"points"`
	Runs                int        `json:"runs"`
	InsertMsMedian      float64    `json:"insert_ms_median"`
	InsertMsMin         float64    `json:"insert_ms_min"`
	InsertMsMax         float64    `json:"insert_ms_max"`
	PointsPerSec        float64    `json:"points_per_sec"`
	AllocBytes          int64      `json:"alloc_bytes"`
	PeakRSSBytes        int64      `json:"peak_rss_bytes"`
	DiskBytes           int64      `json:"disk_bytes"`
	BytesPerPoint       float64    `json:"bytes_per_point"`
	InsertRatioVsSQLite *float64   `json:"insert_ratio_vs_sqlite"`
	PointQueryMs        *float64   `json:"point_query_ms"`
	RangeScanMs         *float64   `json:"range_scan_ms"`
	AggMeanMs           *float64   `json:"agg_mean_ms"`
}

// Mode is the result's configuration and durability, e.g. "default/fast".
func (r *Result) Mode() string { return string(r.Config) + "/" + string(r.Durability) }

func summarize(eng string, cfg Config, dur Durability, points int, queries bool, runs []jobResult) Result {
	r := Result{Engine: eng, Config: cfg, Durability: dur, Points: points, Runs: len(runs)}
	if len(runs) == 0 {
		return r
	}
	pick := func(f func(jobResult) float64) []float64 {
		v := make([]float64, len(runs))
		for i, jr := range runs {
			v[i] = f(jr)
		}
		return v
	}
	ms := pick(func(jr jobResult) float64 { return float64(jr.InsertNS) / 1e6 })
	r.InsertMsMedian = median(ms)
	r.InsertMsMin, r.InsertMsMax = slices.Min(ms), slices.Max(ms)
	r.PointsPerSec = float64(points) / (r.InsertMsMedian / 1e3)
	r.AllocBytes = int64(median(pick(func(jr jobResult) float64 { return float64(jr.AllocBytes) })))
	r.PeakRSSBytes = int64(median(pick(func(jr jobResult) float64 { return float64(jr.PeakRSS) })))
	r.DiskBytes = int64(median(pick(func(jr jobResult) float64 { return float64(jr.DiskBytes) })))
	r.BytesPerPoint = float64(r.DiskBytes) / float64(points)
	if queries {
		q := func(name string) *float64 {
			m := median(pick(func(jr jobResult) float64 {
				for _, qr := range jr.Queries {
					if qr.Name == name {
						return float64(qr.NS) / 1e6
					}
				}
				return 0
			}))
			return &m
		}
		r.PointQueryMs, r.RangeScanMs, r.AggMeanMs = q(QueryPoint), q(QueryRange), q(QueryAgg)
	}
	return r
}

// computeRatios sets each result's insert time relative to SQLite's in the
// same configuration and durability.
func (rep *Report) computeRatios() {
	for i := range rep.Results {
		r := &rep.Results[i]
		for _, s := range rep.Results {
			if s.Engine == EngineSQLite && s.Config == r.Config && s.Durability == r.Durability && s.InsertMsMedian > 0 {
				ratio := r.InsertMsMedian / s.InsertMsMedian
				r.InsertRatioVsSQLite = &ratio
			}
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// CurrentMachine describes this machine: the CPU model from /proc/cpuinfo,
// the number of logical CPUs, the OS and kernel, and the Go version.
func CurrentMachine() Machine {
	m := Machine{CPU: runtime.GOARCH, Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += " " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error { return writeJSON(w, rep) }

// csvHeader names the CSV columns: the JSON names of Result's fields.
var csvHeader = []string{
	"engine", "config", "durability", "points", "runs",
	"insert_ms_median", "insert_ms_min", "insert_ms_max", "points_per_sec",
	"alloc_bytes", "peak_rss_bytes", "disk_bytes", "bytes_per_point",
	"insert_ratio_vs_sqlite", "point_query_ms", "range_scan_ms", "agg_mean_ms",
}

// WriteCSV writes one row per result after a header row. Absent figures
// are empty cells.
func (rep *Report) WriteCSV(w io.Writer) error {
	rows := make([][]string, 0, len(rep.Results))
	for _, r := range rep.Results {
		rows = append(rows, []string{
			r.Engine, string(r.Config), string(r.Durability), itoa(int64(r.Points)), itoa(int64(r.Runs)),
			ftoa(r.InsertMsMedian), ftoa(r.InsertMsMin), ftoa(r.InsertMsMax), ftoa(r.PointsPerSec),
			itoa(r.AllocBytes), itoa(r.PeakRSSBytes), itoa(r.DiskBytes), ftoa(r.BytesPerPoint),
			optional(r.InsertRatioVsSQLite, ftoa, ""), optional(r.PointQueryMs, ftoa, ""),
			optional(r.RangeScanMs, ftoa, ""), optional(r.AggMeanMs, ftoa, ""),
		})
	}
	return writeCSV(w, csvHeader, rows)
}

// WriteMarkdown writes the machine and dataset lines and the results table.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m, d := rep.Machine, rep.Dataset
	runs := 0
	if len(rep.Results) > 0 {
		runs = rep.Results[0].Runs
	}
	b.WriteString(m.markdownLine())
	series := "devices"
	if d.Devices == 1 {
		series = "series"
	}
	fmt.Fprintf(&b, "Dataset: %s points, shape %s (%s %s x %s timestamps at 1 s, %d float field(s) per point), batches of %s, median of %d run(s).\n\n",
		thousands(float64(d.Points)), d.Shape, thousands(float64(d.Devices)), series,
		thousands(float64(d.Points/max(d.Devices, 1))), d.Fields, thousands(float64(d.Batch)), runs)
	b.WriteString("| engine | config | durability | insert ms (median) | min | max | points/s | time vs sqlite | Go alloc MiB | peak RSS MiB | disk MiB | B/point | point query ms | range scan ms | agg mean ms |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	opt := func(v *float64, f func(float64) string) string { return optional(v, f, "-") }
	ratio := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "x" }
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %s | %s |\n",
			r.Engine, r.Config, r.Durability,
			millis(r.InsertMsMedian), millis(r.InsertMsMin), millis(r.InsertMsMax), thousands(r.PointsPerSec),
			opt(r.InsertRatioVsSQLite, ratio), mib(r.AllocBytes), mib(r.PeakRSSBytes), mib(r.DiskBytes), r.BytesPerPoint,
			opt(r.PointQueryMs, millis), opt(r.RangeScanMs, millis), opt(r.AggMeanMs, millis))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// millis formats milliseconds with three significant digits or more.
func millis(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// thousands formats a non-negative number rounded to an integer with comma
// separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	var b []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, c)
	}
	return string(b)
}
