package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/bench"
	"github.com/stratadb/strata/engine"
)

// tamperEnv makes a child started by the tests report a wrong range scan
// row count when it ran the engine the variable names.
const tamperEnv = "STRATA_BENCH_TEST_TAMPER"

// A test binary started by the bench is a child: it runs its job, as the
// strata binary does for "strata bench" with bench.ChildEnv set, and exits
// before any test runs.
func init() {
	if os.Getenv(bench.ChildEnv) != "1" {
		return
	}
	victim := os.Getenv(tamperEnv)
	if victim == "" {
		os.Exit(runBench(nil))
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(2)
	}
	var out bytes.Buffer
	if err := bench.RunChild(context.Background(), bytes.NewReader(in), &out, os.Stderr); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	var job struct{ Engine string }
	json.Unmarshal(in, &job)
	if job.Engine == victim {
		var res map[string]any
		json.Unmarshal(out.Bytes(), &res)
		for _, q := range res["queries"].([]any) {
			if q := q.(map[string]any); q["name"] == bench.QueryRange {
				d := q["digest"].(map[string]any)
				d["rows"] = d["rows"].(float64) + 1
			}
		}
		out.Reset()
		json.NewEncoder(&out).Encode(res)
	}
	os.Stdout.Write(out.Bytes())
	os.Exit(0)
}

// testEngines is every engine but strata while its Open is the "not
// implemented" stub.
func testEngines(t *testing.T) []string {
	db, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		if strings.Contains(err.Error(), "not implemented") {
			t.Logf("strata left out: %v", err)
			return []string{bench.EngineSQLite, bench.EngineLevelDB, bench.EnginePebble}
		}
		t.Fatalf("strata: open: %v", err)
	}
	db.Close()
	return bench.Engines()
}

func runBenchCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = benchMain(context.Background(), args, os.Args[:1], &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	engines := testEngines(t)
	code, stdout, stderr := runBenchCmd(t,
		"--points", "20000", "--devices", "2", "--batch", "5000", "--runs", "1",
		"--engines", strings.Join(engines, ","), "--durability", "fast", "--config", "default",
		"--dir", dir, "--json", dir+"/out.json", "--csv", dir+"/out.csv", "--svg", dir+"/out.svg")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, e := range engines {
		if !strings.Contains(stdout, "| "+e+" | default | fast | ") {
			t.Errorf("table lacks %s:\n%s", e, stdout)
		}
		// Not a terminal: one plain line per job.
		if !strings.Contains(stderr, e+" default/fast run 1/1: 20000 points in ") {
			t.Errorf("stderr lacks %s's line:\n%s", e, stderr)
		}
	}
	if !strings.HasPrefix(stdout, "Machine: ") {
		t.Errorf("stdout does not start with the machine line:\n%s", stdout)
	}

	// JSON: every field present and sane, ratios consistent.
	b, err := os.ReadFile(dir + "/out.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Machine map[string]any
		Dataset map[string]any
		Results []map[string]any
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Dataset["points"] != 20000.0 || doc.Dataset["devices"] != 2.0 || doc.Dataset["shape"] != "iot" ||
		doc.Machine["cores"] == nil || doc.Machine["cpu"] == "" || len(doc.Results) != len(engines) {
		t.Fatalf("JSON: %s", b)
	}
	numbers := []string{"points", "runs", "insert_ms_median", "insert_ms_min", "insert_ms_max", "points_per_sec",
		"alloc_bytes", "peak_rss_bytes", "disk_bytes", "bytes_per_point", "insert_ratio_vs_sqlite",
		"point_query_ms", "range_scan_ms", "agg_mean_ms"}
	var sqliteMs float64
	for _, r := range doc.Results {
		if r["engine"] == bench.EngineSQLite {
			sqliteMs = r["insert_ms_median"].(float64)
		}
	}
	for _, r := range doc.Results {
		if len(r) != len(numbers)+3 {
			t.Errorf("%v: %d fields", r["engine"], len(r))
		}
		for _, k := range numbers {
			if bench.IsFloor(r["engine"].(string)) && (k == "disk_bytes" || k == "bytes_per_point") && r[k] == 0.0 {
				continue
			}
			if v, ok := r[k].(float64); !ok || !(v > 0) {
				t.Errorf("%v: %s = %v", r["engine"], k, r[k])
			}
		}
		want := r["insert_ms_median"].(float64) / sqliteMs
		if r["engine"] == bench.EngineSQLite {
			want = 1
		}
		if r["insert_ratio_vs_sqlite"] != want {
			t.Errorf("%v: ratio %v, want %v", r["engine"], r["insert_ratio_vs_sqlite"], want)
		}
	}

	f, err := os.Open(dir + "/out.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(engines) || recs[0][0] != "engine" || !slices.Contains(recs[0], "bytes_per_point") {
		t.Errorf("CSV: %v", recs)
	}

	svg, err := os.ReadFile(dir + "/out.svg")
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("SVG: %v", err)
		}
	}
	for _, e := range engines {
		want := ">" + e + "<"
		if bench.IsFloor(e) {
			want = ">" + e + " (in memory, " // a dashed line, not a bar
		}
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %s", e)
		}
	}
	// The scratch directory is gone; the outputs stay.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("left in --dir: %v", entries)
	}
}

// TestBenchMismatch checks that a wrong query answer fails the command with
// exit status 1 and an error naming the engine.
func TestBenchMismatch(t *testing.T) {
	t.Setenv(tamperEnv, bench.EngineLevelDB)
	code, stdout, stderr := runBenchCmd(t,
		"--points", "2000", "--devices", "2", "--batch", "1000", "--runs", "1",
		"--engines", "sqlite,leveldb", "--durability", "fast", "--config", "default", "--dir", t.TempDir())
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "leveldb returned a wrong range_scan") || strings.Contains(stderr, "sqlite returned") {
		t.Errorf("stderr does not name leveldb alone:\n%s", stderr)
	}
	if !strings.Contains(stdout, "| leveldb |") {
		t.Errorf("the table is still printed; stdout:\n%s", stdout)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--points", "1001"},
		{"--engines", "sqlite,mysql"},
		{"--durability", "sometimes"},
		{"--config", "huge"},
		{"--shape", "csv"},
		{"--runs", "0"},
		{"--batch", "-5"},
		{"--no-such-flag"},
		{"extra"},
	} {
		code, stdout, stderr := runBenchCmd(t, args...)
		if code != 2 || stdout != "" || stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, stdout, stderr)
		}
	}
	code, _, stderr := runBenchCmd(t, "-h")
	if code != 0 || !strings.Contains(stderr, "--durability") && !strings.Contains(stderr, "-durability") {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
	if c, ok := commands["bench"]; !ok || c.summary == "" {
		t.Error("bench is not registered")
	}
}

// TestBenchScale runs a tiny series sweep through the command: every engine
// at both sizes, the table, the files and one progress line per job.
func TestBenchScale(t *testing.T) {
	dir := t.TempDir()
	engines := testEngines(t)
	code, stdout, stderr := runBenchCmd(t, "--scale", "series", "--sizes", "1000/10,4000/40", "--batch", "1000",
		"--engines", strings.Join(engines, ","), "--limit", "2m", "--dir", dir,
		"--json", dir+"/s.json", "--csv", dir+"/s.csv", "--svg", dir+"/s.svg")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, e := range engines {
		for _, size := range []string{"| 1,000 | 10 |", "| 4,000 | 40 |"} {
			if !strings.Contains(stdout, "| "+e+" "+size) {
				t.Errorf("table lacks %s %s:\n%s", e, size, stdout)
			}
		}
		if !strings.Contains(stderr, e+" default/fast size 2/2 (4,000 points, 40 series): 4000 points in ") {
			t.Errorf("stderr lacks %s's line:\n%s", e, stderr)
		}
	}
	var doc struct {
		Kind    string
		Results []struct {
			Engine string
			Status string
		}
	}
	b, err := os.ReadFile(dir + "/s.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Kind != "series" || len(doc.Results) != 2*len(engines) {
		t.Fatalf("JSON %v: %s", err, b)
	}
	for _, f := range []string{"s.csv", "s.svg"} {
		if fi, err := os.Stat(dir + "/" + f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, args := range [][]string{
		{"--scale", "bytes"},
		{"--scale", "points", "--sizes", "1000/7"},
		{"--scale", "points", "--durability", "both"},
		{"--sizes", "1000/10"},
		{"--limit", "-1s"},
	} {
		if code, _, stderr := runBenchCmd(t, args...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
}

// TestBenchMixed runs a one-second mixed workload through the command on
// two engines and checks the tables and files.
func TestBenchMixed(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runBenchCmd(t, "--mixed", "--duration", "1s", "--calibrate", "200ms",
		"--devices", "10", "--batch", "100", "--readers", "1", "--engines", "sqlite,memlimit", "--dir", dir,
		"--json", dir+"/m.json", "--csv", dir+"/m.csv", "--svg", dir+"/m.svg")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, e := range []string{"sqlite", "memlimit"} {
		if strings.Count(stdout, "| "+e+" | ") != 2 {
			t.Errorf("tables lack %s:\n%s", e, stdout)
		}
		if !strings.Contains(stderr, e+" default/fast mixed (engine ") {
			t.Errorf("stderr lacks %s's line:\n%s", e, stderr)
		}
	}
	var doc struct {
		Share   float64
		Results []struct {
			Engine     string
			Throughput []struct{ Points int64 }
			Queries    map[string]struct{ Count int64 }
		}
	}
	b, err := os.ReadFile(dir + "/m.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Share != 0.8 || len(doc.Results) != 2 {
		t.Fatalf("JSON %v: %s", err, b)
	}
	for _, r := range doc.Results {
		if len(r.Throughput) != 1 || r.Throughput[0].Points <= 0 || r.Queries[bench.QueryRange].Count <= 0 {
			t.Errorf("%s: %+v", r.Engine, r)
		}
	}
	for _, f := range []string{"m.csv", "m.svg"} {
		if fi, err := os.Stat(dir + "/" + f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, args := range [][]string{
		{"--mixed", "--share", "1.5"},
		{"--mixed", "--duration", "0s"},
		{"--mixed", "--shape", "wide"},
		{"--mixed", "--devices", "3"},
		{"--mixed", "--durability", "both"},
	} {
		if code, _, stderr := runBenchCmd(t, args...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
}
