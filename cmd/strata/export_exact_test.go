package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// writeStringsDB writes one string series per value, each at time 1.
func writeStringsDB(t *testing.T, vals ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pts []engine.Point
	for i, v := range vals {
		pts = append(pts, engine.Point{Measurement: "log", Tags: []engine.Tag{{Key: "n", Value: string(rune('a' + i))}},
			Fields: []engine.Field{{Key: "msg", Value: engine.String(v)}}, Time: 1})
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportCSVStringCRLF: a CSV reader (import's included) reads a quoted
// "\r\n" back as "\n", so a CSV export of a string holding one would not
// load back into the same database. Export refuses it, naming the series,
// rather than writing a file that silently changes the value; lp and
// parquet carry it exactly.
func TestExportCSVStringCRLF(t *testing.T) {
	src := writeStringsDB(t, "plain", "windows\r\nline", "lone\rcr", "\r\n")
	want := dumpDB(t, src)
	for _, format := range []string{"lp", "parquet"} {
		file := filepath.Join(t.TempDir(), "out."+format)
		runWant(t, exportMain, 0, "--db", src, "--format", format, "--out", file)
		dst := filepath.Join(t.TempDir(), "dst")
		runWant(t, importMain, 0, "--db", dst, file)
		if got := dumpDB(t, dst); got != want {
			t.Errorf("%s: imported database differs\ngot:\n%s\nwant:\n%s", format, got, want)
		}
	}
	file := filepath.Join(t.TempDir(), "out.csv")
	var o, e bytes.Buffer
	code := exportMain(context.Background(), []string{"--db", src, "--format", "csv", "--out", file}, &o, &e)
	if code != 1 || !strings.Contains(e.String(), "log,n=b msg") || !strings.Contains(e.String(), "parquet") {
		dst := filepath.Join(t.TempDir(), "dst")
		var o2, e2 bytes.Buffer
		importMain(context.Background(), []string{"--db", dst, file}, &o2, &e2)
		t.Fatalf("csv export: exit %d, stderr %q; want 1 naming the series\nimported:\n%s\nwant:\n%s", code, e.String(), dumpDB(t, dst), want)
	}
	// Without such a string, CSV round trips (a lone "\r" included).
	src = writeStringsDB(t, "plain", "lone\rcr", "cr at end\r", "lf\nonly")
	want = dumpDB(t, src)
	runWant(t, exportMain, 0, "--db", src, "--format", "csv", "--out", file)
	dst := filepath.Join(t.TempDir(), "dst")
	runWant(t, importMain, 0, "--db", dst, file)
	if got := dumpDB(t, dst); got != want {
		t.Errorf("csv: imported database differs\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// TestImportLongLPString: export writes a string value of any length the
// engine holds (MaxStringLen) on one line-protocol line; import loads it
// back rather than rejecting every line longer than lineproto's default
// 64 KiB.
func TestImportLongLPString(t *testing.T) {
	src := writeStringsDB(t, strings.Repeat("x", 100<<10), strings.Repeat(`"\`, 40<<10), "short")
	want := dumpDB(t, src)
	file := filepath.Join(t.TempDir(), "out.lp")
	runWant(t, exportMain, 0, "--db", src, "--format", "lp", "--out", file)
	dst := filepath.Join(t.TempDir(), "dst")
	out := runWant(t, importMain, 0, "--db", dst, file)
	if !strings.Contains(out, "3 points written, 0 rejected") {
		t.Errorf("import output: %s", out)
	}
	if got := dumpDB(t, dst); got != want {
		t.Errorf("imported database differs (%d bytes, want %d)", len(got), len(want))
	}
	// strata ingest reads an lp export back too.
	dst2 := filepath.Join(t.TempDir(), "dst2")
	var stdout, stderr strings.Builder
	if code := ingestMain(context.Background(), []string{"--db", dst2, file}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr.String())
	}
	if got := dumpDB(t, dst2); got != want {
		t.Errorf("ingested database differs (%d bytes, want %d)", len(got), len(want))
	}
}

// TestSelectorTimeBeyondInt64: a --start or --end date (or relative time)
// outside what int64 ns hold (1677 to 2262) is the first or last time,
// not a value wrapped around to the other end of time, which selected
// nothing (or refused the range) without saying why.
func TestSelectorTimeBeyondInt64(t *testing.T) {
	now := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"2300-01-01", math.MaxInt64},
		{"9999-12-31T23:59:59Z", math.MaxInt64},
		{"+250y", math.MaxInt64},
		{"1600-01-01", math.MinInt64},
		{"0001-01-01T00:00:00Z", math.MinInt64},
		{"2262-04-11T23:47:16.854775807Z", math.MaxInt64},
		{"1677-09-21T00:12:43.145224192Z", math.MinInt64},
		{"2024-05-01", now.UnixNano()},
	} {
		got, err := parseTime(c.in, 0, now)
		if err != nil || got != c.want {
			t.Errorf("parseTime(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	// End to end: every sample is before 2300 and after 1600.
	dir := writeFleetDB(t)
	out := runWant(t, exportMain, 0, "--db", dir, "--format", "csv", "--start", "1600-01-01", "--end", "2300-01-01")
	if n := strings.Count(out, "\n"); n != 1+13 {
		t.Errorf("export from 1600 to 2300: %d lines, want 14:\n%s", n, out)
	}
}
