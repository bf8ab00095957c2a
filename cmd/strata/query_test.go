package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

func writeTestDB(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pts []engine.Point
	for i := range 120 {
		pts = append(pts, engine.Point{
			Measurement: "sensor",
			Tags:        []engine.Tag{{Key: "site", Value: "s1"}, {Key: "device_id", Value: "d1"}},
			Fields:      []engine.Field{{Key: "temp", Value: engine.Float(float64(i))}},
			Time:        int64(i) * 1e9,
		})
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestQueryCommand(t *testing.T) {
	dir := writeTestDB(t)
	f := func(want int, wantOut string, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		if got := queryMain(context.Background(), args, &out, &errb); got != want {
			t.Fatalf("query %v = %d, want %d (stderr %q)", args, got, want, errb.String())
		}
		if !strings.Contains(out.String(), wantOut) {
			t.Fatalf("query %v printed %q, want it to contain %q", args, out.String(), wantOut)
		}
	}
	f(0, "series,time,value\n\"sensor,device_id=d1,site=s1 temp\",1970-01-01T00:00:02Z,2\n\"sensor,device_id=d1,site=s1 temp\",1970-01-01T00:00:03Z,3\n",
		"--db", dir, "--measurement", "sensor", "--tag", "device_id=d1", "--start", "2000000000", "--end", "1970-01-01T00:00:04Z")
	f(0, "\"sensor,device_id=d1,site=s1 temp\",1970-01-01T00:00:00Z,29.5\n\"sensor,device_id=d1,site=s1 temp\",1970-01-01T00:01:00Z,89.5\n",
		"--db", dir, "--measurement", "sensor", "--agg", "mean", "--every", "1m")
	f(0, "series,time,value\n", "--db", dir, "--measurement", "sensor", "--tag", "device_id=nope")
	// Usage errors exit 2, failures 1.
	f(2, "", "--db", dir)                                                      // no measurement
	f(2, "", "--db", dir, "--measurement", "sensor", "--agg", "median")        // unknown aggregate
	f(2, "", "--db", dir, "--measurement", "sensor", "--start", "yesterday")   // bad time
	f(1, "", "--db", filepath.Join(dir, "missing"), "--measurement", "sensor") // no database
	f(1, "", "--db", dir, "--measurement", "sensr")                            // unknown measurement
	f(2, "", "--db", dir, "--measurement", "sensor", "--every", "1m")          // --every without --agg
	f(2, "", "--db", dir, "--measurement", "sensor", "--every", "soon")        // bad duration
	f(2, "", "--db", dir, "--nosuchflag")                                      // unknown flag
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatal("query created a database")
	}
}

func TestVerifyCommand(t *testing.T) {
	dir := writeTestDB(t)
	var out, errb bytes.Buffer
	if got := verifyMain(context.Background(), []string{"--db", dir}, &out, &errb); got != 0 {
		t.Fatalf("verify = %d (stderr %q)", got, errb.String())
	}
	if !strings.Contains(out.String(), "samples 120") || !strings.Contains(out.String(), "ok") {
		t.Fatalf("verify printed %q", out.String())
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	data, _ := os.ReadFile(segs[0])
	data[40] ^= 0xff
	os.WriteFile(segs[0], data, 0o644)
	out.Reset()
	errb.Reset()
	if got := verifyMain(context.Background(), []string{"--db", dir}, &out, &errb); got != 1 {
		t.Fatalf("verify of a damaged segment = %d, want 1 (stdout %q stderr %q)", got, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), filepath.Base(segs[0])) {
		t.Fatalf("verify error %q does not name the segment", errb.String())
	}
}
