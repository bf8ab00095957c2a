package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// A test binary started by Run with Options.Child = os.Args[:1] is a child:
// it runs the job on its stdin and exits before any test runs.
func init() {
	if os.Getenv(ChildEnv) == "1" {
		if err := RunChild(context.Background(), os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
}

const testPoints = 20_000

func testOptions(t *testing.T) Options {
	return Options{
		Points: testPoints, Devices: 20, Batch: 5_000, Runs: 1,
		Engines: testEngines(t), Dir: t.TempDir(),
	}
}

func TestRunInProcess(t *testing.T) {
	o := testOptions(t)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, o, 1)
	checkJSON(t, rep)
	checkCSV(t, rep)
	checkSVG(t, rep)
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(md.String(), "\n| "); n != 1+len(rep.Results) {
		t.Errorf("markdown has %d table rows, want header + %d:\n%s", n, len(rep.Results), md.String())
	}
	if !strings.Contains(md.String(), "Machine: ") || !strings.Contains(md.String(), rep.Machine.Go) {
		t.Errorf("markdown lacks the machine line:\n%s", md.String())
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("scratch directory left behind: %v %v", entries, err)
	}
}

func TestRunChildProcess(t *testing.T) {
	o := testOptions(t)
	o.Child = os.Args[:1]
	o.Runs = 2
	// SQLite for the ratio and one other engine: the child path is the
	// same for all.
	other := slices.DeleteFunc(o.Engines, func(e string) bool { return e == EngineSQLite })[0]
	o.Engines = []string{EngineSQLite, other}
	o.Configs, o.Durabilities = []Config{ConfigEqualMemory}, []Durability{Durable}
	type key struct {
		label string
		phase Phase
	}
	events := map[key]int{}
	maxDone := map[string]int{}
	o.Progress = func(ev Event) {
		events[key{ev.Label(), ev.Phase}]++
		maxDone[ev.Label()] = max(maxDone[ev.Label()], ev.Done)
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, o, 2)
	checkJSON(t, rep)
	for _, r := range rep.Results {
		for run := 1; run <= 2; run++ {
			label := Event{Engine: r.Engine, Config: r.Config, Durability: r.Durability, Run: run, Runs: 2}.Label()
			// Insert progress comes from the child's stderr: one per batch.
			if events[key{label, PhaseStart}] != 1 || events[key{label, PhaseInsert}] != testPoints/o.Batch ||
				events[key{label, PhaseQueries}] != 1 || events[key{label, PhaseDone}] != 1 || maxDone[label] != testPoints {
				t.Errorf("%s: events %v, max done %d", label, events, maxDone[label])
			}
		}
		// A child's peak RSS is its own: far below a test binary's
		// accumulated one, far above zero.
		if r.PeakRSSBytes < 4<<20 || r.PeakRSSBytes > 1<<30 {
			t.Errorf("%s: peak RSS %d", r.Engine, r.PeakRSSBytes)
		}
	}
}

func TestRunChildFailure(t *testing.T) {
	for _, c := range []struct {
		script, want string
	}{
		{"echo engine exploded >&2; exit 3", "engine exploded"},
		{"cat >/dev/null; echo not json", "child result"},
	} {
		o := testOptions(t)
		o.Child = []string{"/bin/sh", "-c", c.script}
		o.Engines = []string{EngineSQLite}
		_, err := Run(context.Background(), o)
		if err == nil || errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("child %q: Run = %v, want an error saying %q", c.script, err, c.want)
		}
	}
}

// checkReport checks that every figure is present and consistent.
func checkReport(t *testing.T, rep *Report, o Options, runs int) {
	t.Helper()
	o.ensureDefaults()
	want := 0
	for _, e := range o.Engines {
		for _, c := range o.Configs {
			for _, d := range o.Durabilities {
				if Supports(e, c, d) {
					want++
				}
			}
		}
	}
	if len(rep.Results) != want {
		t.Fatalf("%d results, want %d", len(rep.Results), want)
	}
	if rep.Machine.Cores <= 0 || rep.Machine.CPU == "" || rep.Machine.OS == "" || rep.Machine.Go == "" {
		t.Errorf("machine %+v", rep.Machine)
	}
	if d := rep.Dataset; d.Points != testPoints || d.Devices != 20 || d.Batch != 5_000 || d.Shape != ShapeIoT || d.Fields != 1 {
		t.Errorf("dataset %+v", d)
	}
	sqlite := map[string]float64{}
	for _, r := range rep.Results {
		if r.Engine == EngineSQLite {
			sqlite[r.Mode()] = r.InsertMsMedian
		}
	}
	for _, r := range rep.Results {
		name := r.Engine + " " + r.Mode()
		if r.Points != testPoints || r.Runs != runs {
			t.Errorf("%s: %d points, %d runs", name, r.Points, r.Runs)
		}
		for fname, v := range map[string]float64{
			"insert_ms_median": r.InsertMsMedian, "insert_ms_min": r.InsertMsMin, "insert_ms_max": r.InsertMsMax,
			"points_per_sec": r.PointsPerSec, "alloc_bytes": float64(r.AllocBytes), "peak_rss_bytes": float64(r.PeakRSSBytes),
			"disk_bytes": float64(r.DiskBytes), "bytes_per_point": r.BytesPerPoint,
		} {
			if IsFloor(r.Engine) && (fname == "disk_bytes" || fname == "bytes_per_point") {
				if v != 0 {
					t.Errorf("%s: the floor wrote %s = %v", name, fname, v)
				}
				continue
			}
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s: %s = %v", name, fname, v)
			}
		}
		for fname, v := range map[string]*float64{
			"insert_ratio_vs_sqlite": r.InsertRatioVsSQLite, "point_query_ms": r.PointQueryMs,
			"range_scan_ms": r.RangeScanMs, "agg_mean_ms": r.AggMeanMs,
		} {
			if v == nil || !(*v > 0) || math.IsInf(*v, 0) {
				t.Errorf("%s: %s = %v", name, fname, v)
			}
		}
		if !(r.InsertMsMin <= r.InsertMsMedian && r.InsertMsMedian <= r.InsertMsMax) {
			t.Errorf("%s: min %v, median %v, max %v", name, r.InsertMsMin, r.InsertMsMedian, r.InsertMsMax)
		}
		if want := testPoints / (r.InsertMsMedian / 1000); !near(r.PointsPerSec, want) {
			t.Errorf("%s: %v points/s, want %v", name, r.PointsPerSec, want)
		}
		if want := float64(r.DiskBytes) / testPoints; r.BytesPerPoint != want {
			t.Errorf("%s: %v B/point, want %v", name, r.BytesPerPoint, want)
		}
		if r.InsertRatioVsSQLite != nil {
			want := r.InsertMsMedian / sqlite[r.Mode()]
			if r.Engine == EngineSQLite {
				want = 1
			}
			if *r.InsertRatioVsSQLite != want {
				t.Errorf("%s: ratio %v, want %v", name, *r.InsertRatioVsSQLite, want)
			}
		}
		// A step of the walk takes one of about 50 values: 5.6 bits of
		// entropy, so no lossless engine stores a point in under 0.7 bytes.
		// Nor does any need 1 KiB.
		if !IsFloor(r.Engine) && (r.BytesPerPoint < 0.6 || r.BytesPerPoint > 1024) {
			t.Errorf("%s: %v bytes per point", name, r.BytesPerPoint)
		}
	}
}

// checkJSON checks that the JSON output has every field, sane.
func checkJSON(t *testing.T, rep *Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	positive := func(where string, obj any, keys ...string) {
		m, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("%s: %T, want an object", where, obj)
		}
		for _, k := range keys {
			if IsFloor(fmt.Sprint(m["engine"])) && (k == "disk_bytes" || k == "bytes_per_point") && m[k] == 0.0 {
				continue
			}
			switch v := m[k].(type) {
			case float64:
				if !(v > 0) {
					t.Errorf("%s.%s = %v", where, k, v)
				}
			case string:
				if v == "" {
					t.Errorf("%s.%s is empty", where, k)
				}
			default:
				t.Errorf("%s.%s = %v (%T)", where, k, m[k], m[k])
			}
		}
	}
	positive("machine", doc["machine"], "cpu", "cores", "os", "go")
	positive("dataset", doc["dataset"], "points", "devices", "batch", "shape", "fields")
	results, ok := doc["results"].([]any)
	if !ok || len(results) != len(rep.Results) {
		t.Fatalf("results: %v", doc["results"])
	}
	for i, r := range results {
		positive(fmt.Sprintf("results[%d]", i), r, csvHeader...)
		if n := len(r.(map[string]any)); n != len(csvHeader) {
			t.Errorf("results[%d] has %d fields, want %d", i, n, len(csvHeader))
		}
	}
}

func checkCSV(t *testing.T, rep *Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(rep.Results) {
		t.Fatalf("%d CSV records, want header + %d", len(recs), len(rep.Results))
	}
	if strings.Join(recs[0], ",") != strings.Join(csvHeader, ",") || recs[0][0] != "engine" {
		t.Errorf("CSV header %v", recs[0])
	}
	for i, r := range rep.Results {
		if rec := recs[i+1]; rec[0] != r.Engine || rec[1] != string(r.Config) || rec[2] != string(r.Durability) {
			t.Errorf("CSV row %d: %v, want %s %s", i+1, rec, r.Engine, r.Mode())
		}
	}
}

func checkSVG(t *testing.T, rep *Report) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	var texts []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not valid XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			texts = append(texts, string(tok))
		}
	}
	if root != "svg" {
		t.Errorf("root element %q", root)
	}
	all := strings.Join(texts, "\n")
	for _, r := range rep.Results {
		for _, want := range []string{r.Engine, r.Mode()} {
			if !strings.Contains(all, want) {
				t.Errorf("SVG text lacks %q", want)
			}
		}
	}
	for _, want := range []string{"points/s", "bytes/point", "Insert throughput"} {
		if !strings.Contains(all, want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
}

// TestReportWithoutSQLiteOrQueries checks the output when figures are
// absent: no ratio without SQLite, no query times when skipped.
func TestReportWithoutSQLiteOrQueries(t *testing.T) {
	o := testOptions(t)
	o.Engines = []string{EnginePebble}
	o.SkipQueries = true
	o.Configs = []Config{ConfigEqualMemory}
	o.Shape, o.Points = ShapeSonnetDB, 5_000
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.InsertRatioVsSQLite != nil || r.PointQueryMs != nil || r.RangeScanMs != nil || r.AggMeanMs != nil {
			t.Errorf("%s: figures that were not measured: %+v", r.Mode(), r)
		}
		if r.Points != 5_000 || r.Config != ConfigEqualMemory {
			t.Errorf("%s: %+v", r.Mode(), r)
		}
	}
	var js, cs, md bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"insert_ratio_vs_sqlite": null`) || !strings.Contains(js.String(), `"shape": "sonnetdb"`) {
		t.Errorf("JSON:\n%s", js.String())
	}
	if err := rep.WriteCSV(&cs); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(cs.String()), "\n"); len(lines) != 3 || !strings.HasSuffix(lines[1], ",,,,") {
		t.Errorf("CSV:\n%s", cs.String())
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| - | - | - |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	checkSVG(t, rep)
}

func TestSummarize(t *testing.T) {
	jr := func(ms, alloc, rss, disk int64, q ...float64) jobResult {
		r := jobResult{InsertNS: ms * 1e6, AllocBytes: uint64(alloc), PeakRSS: rss, DiskBytes: disk}
		for i, name := range []string{QueryPoint, QueryRange, QueryAgg} {
			r.Queries = append(r.Queries, queryResult{Name: name, NS: int64(q[i] * 1e6)})
		}
		return r
	}
	r := summarize("pebble", ConfigDefault, Fast, 1000, true, []jobResult{
		jr(300, 10, 100, 5000, 1, 2, 3), jr(100, 30, 300, 3000, 5, 6, 7), jr(200, 20, 200, 4000, 3, 4, 5),
	})
	if r.InsertMsMedian != 200 || r.InsertMsMin != 100 || r.InsertMsMax != 300 || r.PointsPerSec != 5000 ||
		r.AllocBytes != 20 || r.PeakRSSBytes != 200 || r.DiskBytes != 4000 || r.BytesPerPoint != 4 || r.Runs != 3 ||
		*r.PointQueryMs != 3 || *r.RangeScanMs != 4 || *r.AggMeanMs != 5 {
		t.Errorf("summary %+v", r)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count = %v", got)
	}
	rep := &Report{Results: []Result{
		r,
		summarize("sqlite", ConfigDefault, Fast, 1000, true, []jobResult{jr(800, 1, 1, 1, 1, 1, 1)}),
		summarize("pebble", ConfigDefault, Durable, 1000, true, []jobResult{jr(800, 1, 1, 1, 1, 1, 1)}),
	}}
	rep.computeRatios()
	if got := rep.Results[0].InsertRatioVsSQLite; got == nil || *got != 0.25 {
		t.Errorf("pebble's ratio %v, want 0.25", got)
	}
	if got := rep.Results[1].InsertRatioVsSQLite; got == nil || *got != 1 {
		t.Errorf("sqlite's ratio %v, want 1", got)
	}
	if got := rep.Results[2].InsertRatioVsSQLite; got != nil {
		t.Errorf("ratio %v without SQLite in the same mode", *got)
	}
}

// TestRunWide runs the wide shape (30 fields, 12 timestamps) at 50
// devices through every engine: the short dataset's queries must not be
// empty, and every engine's answers must match the reference.
func TestRunWide(t *testing.T) {
	o := Options{Shape: ShapeWide, Devices: 50, Points: 50 * 12, Runs: 1, Engines: testEngines(t),
		Configs: []Config{ConfigDefault}, Durabilities: []Durability{Fast}, Dir: t.TempDir()}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Dataset; d.Shape != ShapeWide || d.Fields != WideFields || d.Points != 600 || d.Devices != 50 {
		t.Errorf("dataset %+v", d)
	}
	if len(rep.Results) != len(o.Engines) {
		t.Errorf("%d results for %d engines", len(rep.Results), len(o.Engines))
	}
	ds, err := NewDataset(ShapeWide, 600, 50, WideFields)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{QueryPoint: 1, QueryRange: 50 * WideFields * (12 - 12/7), QueryAgg: 50}
	for _, nq := range ds.Queries() {
		var rs resultSet
		if err := ds.reference(nq.Query, &rs); err != nil {
			t.Fatal(err)
		}
		if got := rs.digest().Rows; got != want[nq.Name] {
			t.Errorf("%s: %d rows, want %d", nq.Name, got, want[nq.Name])
		}
	}
}
