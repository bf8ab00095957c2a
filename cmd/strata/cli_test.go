package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// writeFleetDB writes two sites of devices, one of them without a site tag.
func writeFleetDB(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pts []engine.Point
	for d := range 4 {
		tags := []engine.Tag{{Key: "device_id", Value: "dev-" + string(rune('0'+d))}}
		if d < 3 {
			tags = append(tags, engine.Tag{Key: "site", Value: []string{"north", "south"}[d%2]})
		}
		for i := range 3 {
			pts = append(pts, engine.Point{Measurement: "sensor", Tags: tags,
				Fields: []engine.Field{{Key: "temp", Value: engine.Float(float64(10*d + i))}}, Time: int64(i) * int64(time.Hour)})
		}
	}
	pts = append(pts, engine.Point{Measurement: "power", Fields: []engine.Field{{Key: "watts", Value: engine.Int(7)}}, Time: 5})
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runWant(t *testing.T, main func(context.Context, []string, io.Writer, io.Writer) int, want int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if got := main(context.Background(), args, &out, &errb); got != want {
		t.Fatalf("%v = %d, want %d (stdout %q, stderr %q)", args, got, want, out.String(), errb.String())
	}
	return out.String()
}

func TestQueryMatchGroupFormats(t *testing.T) {
	dir := writeFleetDB(t)
	// Regexp matchers are anchored; negative ones keep series without the tag.
	out := runWant(t, queryMain, 0, "--db", dir, "--measurement", "sensor", "--match", "site!~nor.*", "--agg", "LAST")
	if strings.Count(out, "\n") != 3 || strings.Contains(out, "north") || !strings.Contains(out, "device_id=dev-3 temp\",1970-01-01T02:00:00Z,32") {
		t.Fatalf("negative regexp, last with the sample's time:\n%s", out)
	}
	// Mean by site: a device without the tag forms its own group.
	out = runWant(t, queryMain, 0, "--db", dir, "--measurement", "sensor", "--agg", "mean", "--group-by", "site")
	want := "series,time,value\nsensor temp,1970-01-01T00:00:00Z,31\n\"sensor,site=north temp\",1970-01-01T00:00:00Z,11\nsensor,site=south temp,1970-01-01T00:00:00Z,11\n"
	if strings.ReplaceAll(out, "\"", "") != strings.ReplaceAll(want, "\"", "") {
		t.Fatalf("group by site:\n%s\nwant\n%s", out, want)
	}
	// JSON carries tags as an object and values as numbers.
	out = runWant(t, queryMain, 0, "--db", dir, "--measurement", "sensor", "--match", "device_id=dev-1", "--format", "json", "--agg", "max", "--every", "1d")
	var js []jsonSeries
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("json %q: %v", out, err)
	}
	if len(js) != 1 || js[0].Tags["site"] != "south" || len(js[0].Samples) != 1 || js[0].Samples[0].Value != 12.0 {
		t.Fatalf("json: %+v", js)
	}
	out = runWant(t, queryMain, 0, "--db", dir, "--measurement", "sensor", "--match", "device_id=dev-2", "--format", "table")
	if !strings.HasPrefix(out, "SERIES") || strings.Count(out, "\n") != 4 {
		t.Fatalf("table:\n%s", out)
	}
	runWant(t, queryMain, 2, "--db", dir, "--measurement", "sensor", "--match", "site=~(")            // bad regexp
	runWant(t, queryMain, 2, "--db", dir, "--measurement", "sensor", "--group-by", "site")            // group without agg
	runWant(t, queryMain, 2, "--db", dir, "--measurement", "sensor", "--format", "xml")               // bad format
	runWant(t, queryMain, 2, "--db", dir, "--measurement", "sensor", "--start", "1h", "--end", "-1h") // bad time
	runWant(t, queryMain, 0, "--help")
}

func TestMetadataCommands(t *testing.T) {
	dir := writeFleetDB(t)
	if out := runWant(t, measurementsMain, 0, "--db", dir); out != "measurement\npower\nsensor\n" {
		t.Fatalf("measurements: %q", out)
	}
	if out := runWant(t, tagsMain, 0, "--db", dir, "--measurement", "sensor"); out != "key\ndevice_id\nsite\n" {
		t.Fatalf("tag keys: %q", out)
	}
	if out := runWant(t, tagsMain, 0, "--db", dir, "--format", "json", "site"); out != "[\"north\",\"south\"]\n" {
		t.Fatalf("tag values: %q", out)
	}
	// Only series with data in the range count.
	if out := runWant(t, tagsMain, 0, "--db", dir, "--start", "1970-01-01T01:30:00Z", "--end", "1970-01-01T01:45:00Z", "site"); out != "value\n" {
		t.Fatalf("tag values of an empty range: %q", out)
	}
	if out := runWant(t, seriesMain, 0, "--db", dir, "--match", "device_id=~dev-[01]"); out != "series,kind\n\"sensor,device_id=dev-0,site=north temp\",float\n\"sensor,device_id=dev-1,site=south temp\",float\n" {
		t.Fatalf("series: %q", out)
	}
	out := runWant(t, lastMain, 0, "--db", dir, "--measurement", "sensor", "--match", "site=")
	if out != "series,time,value\n\"sensor,device_id=dev-3 temp\",1970-01-01T02:00:00Z,32\n" {
		t.Fatalf("last: %q", out)
	}
	runWant(t, tagsMain, 2, "--db", dir, "a", "b") // an extra argument is a usage error
	for _, m := range []func(context.Context, []string, io.Writer, io.Writer) int{measurementsMain, tagsMain, seriesMain, lastMain} {
		if out := runWant(t, m, 0, "--help"); out != "" {
			t.Fatalf("--help wrote to stdout: %q", out)
		}
		runWant(t, m, 1, "--db", filepath.Join(dir, "missing"))
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	f := func(s string, want int64) {
		t.Helper()
		got, err := parseTime(s, math.MinInt64, now)
		if err != nil || got != want {
			t.Errorf("parseTime(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	f("", math.MinInt64)
	f("now", now.UnixNano())
	f("-1h", now.Add(-time.Hour).UnixNano())
	f("-1d", now.Add(-24*time.Hour).UnixNano())
	f("-1w", now.Add(-7*24*time.Hour).UnixNano())
	f("+30m", now.Add(30*time.Minute).UnixNano())
	f("2024-05-01", time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	f("2024-05-01T10:00:00Z", time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	f("2024-05-01T10:00:00.5+02:00", time.Date(2024, 5, 1, 8, 0, 0, 5e8, time.UTC).UnixNano())
	f("1714521600000000000", 1714521600000000000)
	f("-5", -5)
	for _, bad := range []string{"yesterday", "-1x", "2024-13-01", "1h", "-", "+", "- "} {
		if _, err := parseTime(bad, 0, now); err == nil {
			t.Errorf("parseTime(%q) accepted", bad)
		}
	}
	for s, want := range map[string]time.Duration{"1d": 24 * time.Hour, "1w": 7 * 24 * time.Hour, "1h30m": 90 * time.Minute, "90s": 90 * time.Second, "1.5h": 90 * time.Minute, "0": 0} {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
}

func TestParseMatcher(t *testing.T) {
	for s, want := range map[string]engine.Matcher{
		"k=v":         {Key: "k", Op: engine.MatchEqual, Value: "v"},
		"k=":          {Key: "k", Op: engine.MatchEqual},
		"k!=v":        {Key: "k", Op: engine.MatchNotEqual, Value: "v"},
		"k=~a.*":      {Key: "k", Op: engine.MatchRegexp, Value: "a.*"},
		"k!~a|b":      {Key: "k", Op: engine.MatchNotRegexp, Value: "a|b"},
		`k="a=b"`:     {Key: "k", Op: engine.MatchEqual, Value: "a=b"},
		"k=~x=~y":     {Key: "k", Op: engine.MatchRegexp, Value: "x=~y"},
		`site=~"n.*"`: {Key: "site", Op: engine.MatchRegexp, Value: "n.*"},
	} {
		got, err := parseMatcher(s)
		if err != nil || got != want {
			t.Errorf("parseMatcher(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "=v", "k~v", "!=v"} {
		if _, err := parseMatcher(bad); err == nil {
			t.Errorf("parseMatcher(%q) accepted", bad)
		}
	}
}

func TestVersion(t *testing.T) {
	v := versionString()
	if !strings.HasPrefix(v, "strata ") || !strings.Contains(v, "go1.") {
		t.Fatalf("version %q lacks the version or the Go version", v)
	}
}

// TestEveryCommandHasExample runs each command's --help and checks that it
// exits 0 and shows an example.
func TestEveryCommandHasExample(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = f
	defer func() { os.Stderr = saved }()
	for name, c := range commands {
		f.Truncate(0)
		f.Seek(0, 0)
		if code := c.run([]string{"--help"}); code != 0 {
			t.Errorf("%s --help exited %d", name, code)
		}
		help, _ := os.ReadFile(f.Name())
		if !strings.Contains(string(help), "example") || !strings.Contains(string(help), "strata "+name) {
			t.Errorf("%s --help shows no example:\n%s", name, help)
		}
	}
}

// TestQueryJSONLongSeries queries a series longer than one QuerySeq part:
// JSON still holds one object per series, its samples in order.
func TestQueryJSONLongSeries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	const long = engine.PartSamples*2 + 100
	var pts []engine.Point
	for i := range long {
		pts = append(pts, engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "d", Value: "a"}},
			Fields: []engine.Field{{Key: "v", Value: engine.Int(int64(i))}}, Time: int64(i)})
	}
	pts = append(pts, engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "d", Value: "b"}},
		Fields: []engine.Field{{Key: "v", Value: engine.Int(-1)}}, Time: 1})
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out := runWant(t, queryMain, 0, "--db", dir, "--measurement", "m", "--format", "json")
	var js []jsonSeries
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("json: %v", err)
	}
	if len(js) != 2 || js[0].Tags["d"] != "a" || len(js[0].Samples) != long || js[1].Tags["d"] != "b" || len(js[1].Samples) != 1 {
		t.Fatalf("got %d series", len(js))
	}
	for i, s := range js[0].Samples {
		if s.UnixNs != int64(i) || s.Value != float64(i) {
			t.Fatalf("sample %d: %+v", i, s)
		}
	}
}
