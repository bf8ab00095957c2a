package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/server"
)

// extremeDB writes a database holding every kind with its extreme values,
// names that need escaping, tag keys that collide with the export's
// column names, and timestamps at both ends of time.
func extremeDB(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	strs := []string{"", `quote " here`, "new\nline", `back\slash\`, "comma, and = equals", "unicode ✓ 日本 🚀", "tab\tcr\r", `\"`, " lead and trail "}
	floats := []float64{0, math.Copysign(0, -1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
		-math.SmallestNonzeroFloat64, 1e-300, 123456789.123456789, 0.1, -2.5e17, 1}
	times := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, 1_700_000_000_000_000_001, math.MaxInt64 - 1, math.MaxInt64}
	tagSets := [][]engine.Tag{
		nil,
		{{Key: "host", Value: "a b,c=d"}},
		{{Key: "field", Value: "f"}, {Key: "kind", Value: "k"}, {Key: "tag_x", Value: "x"}, {Key: "time", Value: "t"}},
		{{Key: "ünï", Value: "✓"}, {Key: "value", Value: `v\w`}},
	}
	var pts []engine.Point
	add := func(m string, tags []engine.Tag, f string, i int, v engine.Value) {
		pts = append(pts, engine.Point{Measurement: m, Tags: tags, Fields: []engine.Field{{Key: f, Value: v}}, Time: times[i%len(times)]})
	}
	for ti, tags := range tagSets {
		m := []string{"plain", "with space,comma", "uni✓", "q\"uote"}[ti]
		for i, f := range floats {
			add(m, tags, "float field", i, engine.Float(f))
		}
		for i, v := range []int64{math.MaxInt64, math.MinInt64, 0, -1, 1} {
			add(m, tags, "i=nt", i, engine.Int(v))
		}
		for i, v := range []uint64{math.MaxUint64, 0, 1, math.MaxInt64 + 1} {
			add(m, tags, "u,int", i, engine.Uint(v))
		}
		for i, v := range []bool{true, false} {
			add(m, tags, "bool", i, engine.Bool(v))
		}
		for i, v := range strs {
			add(m, tags, "str\\ing", i, engine.String(v))
		}
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	// Some in segments, some in the WAL only.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	add("late", nil, "v", 3, engine.Int(42))
	if err := db.Write(pts[len(pts)-1:]); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dumpDB renders every sample of the database, values with their kinds and
// float bits, so that two databases compare exactly.
func dumpDB(t *testing.T, dir string) string {
	t.Helper()
	db, err := engine.Open(dir, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	ms, err := db.Measurements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		res, err := db.Query(ctx, engine.Query{Selector: engine.Selector{Measurement: m}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res {
			fmt.Fprintf(&b, "%q %q %q\n", s.Measurement, s.Tags, s.Field)
			for _, smp := range s.Samples {
				v := smp.Value
				fmt.Fprintf(&b, "  %d %v %q", smp.Time, v.Kind(), formatValue(v))
				if v.Kind() == engine.KindFloat {
					fmt.Fprintf(&b, " %x", math.Float64bits(v.Float()))
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// TestExportImportRoundTrip exports a database with extreme values in each
// format and imports it into a new one: the two hold the same samples,
// bit for bit. Line protocol also loads through 'strata ingest'.
func TestExportImportRoundTrip(t *testing.T) {
	src := extremeDB(t)
	want := dumpDB(t, src)
	if !strings.Contains(want, "9223372036854775807") || !strings.Contains(want, "18446744073709551615") {
		t.Fatalf("the source lacks its extremes:\n%s", want)
	}
	for _, format := range []string{"lp", "csv", "parquet"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "out."+format)
			runWant(t, exportMain, 0, "--db", src, "--format", format, "--out", file)
			dst := filepath.Join(t.TempDir(), "dst")
			out := runWant(t, importMain, 0, "--db", dst, file)
			if !strings.Contains(out, "("+format+")") || !strings.Contains(out, " 0 rejected") {
				t.Errorf("import output:\n%s", out)
			}
			if got := dumpDB(t, dst); got != want {
				t.Errorf("imported database differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			if format == "lp" {
				dst2 := filepath.Join(t.TempDir(), "ingested")
				var o, e bytes.Buffer
				if code := ingestMain(context.Background(), []string{"--db", dst2, file}, nil, &o, &e); code != 0 {
					t.Fatalf("ingest: exit %d\n%s%s", code, o.String(), e.String())
				}
				if got := dumpDB(t, dst2); got != want {
					t.Errorf("ingested database differs\ngot:\n%s\nwant:\n%s", got, want)
				}
			}
		})
	}
}

// TestExportSelection checks the selector flags and the CSV layout.
func TestExportSelection(t *testing.T) {
	dir := writeFleetDB(t)
	out := runWant(t, exportMain, 0, "--db", dir, "--measurement", "sensor", "--match", "site=north",
		"--start", "0", "--end", "3600000000001", "--format", "csv")
	want := "measurement,device_id,site,field,time,kind,value\n" +
		"sensor,dev-0,north,temp,0,float,0\nsensor,dev-0,north,temp,3600000000000,float,1\n" +
		"sensor,dev-2,north,temp,0,float,20\nsensor,dev-2,north,temp,3600000000000,float,21\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	runWant(t, exportMain, 2, "--db", dir, "--format", "xml")
	runWant(t, exportMain, 1, "--db", filepath.Join(t.TempDir(), "missing"), "--format", "lp")
}

// TestImportRejections checks that every rejection names its line or row,
// and that the other lines are written.
func TestImportRejections(t *testing.T) {
	tmp := t.TempDir()
	csvFile := filepath.Join(tmp, "in.csv")
	csvText := "measurement,host,field,time,kind,value\n" +
		"m,a,v,1,int,5\n" +
		"m,a,v,2,int,notanint\n" +
		"m,a,v,x,int,5\n" +
		"m,a,v,3,float,1.5\n" + // a kind conflict with line 2's series
		"m,a,w,\"4\",string,\"two\nlines\"\n" +
		"m,a,v,5,bool,true,extra\n" +
		"m,a,v,6,int,7\n"
	if err := os.WriteFile(csvFile, []byte(csvText), 0o644); err != nil {
		t.Fatal(err)
	}
	lpFile := filepath.Join(tmp, "in.lp")
	if err := os.WriteFile(lpFile, []byte("m v=1i 1\nbad line\nm v=2i 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(tmp, "db")
	out := runWant(t, importMain, 1, "--db", db, csvFile, lpFile)
	for _, w := range []string{
		"in.csv (csv): 7 lines, 3 points written, 4 rejected",
		"in.csv: line 3: value \"notanint\"",
		"in.csv: line 4: time \"x\"",
		"in.csv: line 5: ",
		"in.csv: line 8: wrong number of fields",
		"in.lp (lp): 3 lines, 2 points written, 1 rejected",
		"in.lp: line 2: ",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestBackupRestoreReadOnly backs up a database that a writer holds open
// (no server: a read-only copy), verifies and restores it, and checks the
// refusals: a non-empty target, a damaged backup (naming the file).
func TestBackupRestoreReadOnly(t *testing.T) {
	src := extremeDB(t)
	want := dumpDB(t, src)
	w, err := engine.Open(src, nil) // a writer keeps it open throughout
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bk := filepath.Join(t.TempDir(), "backup")
	out := runWant(t, backupMain, 0, "--db", src, "--out", bk)
	if !strings.Contains(out, "read-only copy") {
		t.Errorf("backup output: %s", out)
	}
	runWant(t, verifyMain, 0, "--db", bk)
	if got := dumpDB(t, bk); got != want {
		t.Errorf("backup differs\ngot:\n%s\nwant:\n%s", got, want)
	}
	// A non-empty target is refused, for both commands.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	runWant(t, backupMain, 1, "--db", src, "--out", full)
	runWant(t, restoreMain, 1, "--from", bk, "--db", full)

	dst := filepath.Join(t.TempDir(), "restored")
	runWant(t, restoreMain, 0, "--from", bk, "--db", dst)
	if got := dumpDB(t, dst); got != want {
		t.Errorf("restored database differs\ngot:\n%s\nwant:\n%s", got, want)
	}

	// Damage one byte in the middle of a segment of the backup: restore
	// refuses it, naming the file, and creates nothing.
	segs, _ := filepath.Glob(filepath.Join(bk, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("the backup has no segment")
	}
	// The backup's segments may be hard links to the source's: replace the
	// file before damaging it.
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	os.Remove(segs[0])
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst2 := filepath.Join(t.TempDir(), "restored2")
	var o, e bytes.Buffer
	if code := restoreMain(context.Background(), []string{"--from", bk, "--db", dst2}, &o, &e); code != 1 ||
		!strings.Contains(e.String(), filepath.Base(segs[0])) {
		t.Errorf("damaged backup: exit %d, stderr %s", code, e.String())
	}
	if _, err := os.Stat(dst2); !os.IsNotExist(err) {
		t.Errorf("restore of a damaged backup created %s", dst2)
	}
	runWant(t, verifyMain, 1, "--db", bk)
	// The source is intact.
	if got := dumpDB(t, src); got != want {
		t.Errorf("source changed")
	}
}

// TestBackupThroughServer backs up a database that a server owns: backup
// finds it through serve.json, asks it for a snapshot and moves it to
// --out. With the token missing it says so; with serve.json stale it takes
// a read-only copy.
func TestBackupThroughServer(t *testing.T) {
	src := extremeDB(t)
	want := dumpDB(t, src)
	db, err := engine.Open(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h, err := server.New(db, &server.Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	abs, _ := filepath.Abs(src)
	remove, err := writeServeInfo(src, serveInfo{PID: os.Getpid(), Addr: ts.Listener.Addr().String(), DB: abs,
		SnapshotDir: snapshotDirOf(abs), Token: true})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	runWant(t, backupMain, 1, "--db", src, "--out", filepath.Join(t.TempDir(), "b0"))
	bk := filepath.Join(t.TempDir(), "b1")
	out := runWant(t, backupMain, 0, "--db", src, "--out", bk, "--token", "s3cret")
	if !strings.Contains(out, "through the server at") {
		t.Errorf("backup output: %s", out)
	}
	if got := dumpDB(t, bk); got != want {
		t.Errorf("backup differs\ngot:\n%s\nwant:\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(bk, serveInfoName)); !os.IsNotExist(err) {
		t.Errorf("the backup holds %s", serveInfoName)
	}
	// Across filesystems the snapshot is checkpointed into --out (marked
	// incomplete until done), then removed.
	renameDir = func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: errors.New("invalid cross-device link")}
	}
	defer func() { renameDir = os.Rename }()
	bk3 := filepath.Join(t.TempDir(), "b3")
	runWant(t, backupMain, 0, "--db", src, "--out", bk3, "--token", "s3cret")
	if got := dumpDB(t, bk3); got != want {
		t.Errorf("backup across filesystems differs\ngot:\n%s\nwant:\n%s", got, want)
	}
	if left, _ := os.ReadDir(snapshotDirOf(abs)); len(left) != 0 {
		t.Errorf("snapshots left behind: %v", left)
	}
	renameDir = os.Rename

	// A stopped server leaves serve.json stale: a read-only copy.
	ts.Close()
	bk2 := filepath.Join(t.TempDir(), "b2")
	out = runWant(t, backupMain, 0, "--db", src, "--out", bk2)
	if !strings.Contains(out, "read-only copy") {
		t.Errorf("stale serve.json: %s", out)
	}
	if got := dumpDB(t, bk2); got != want {
		t.Errorf("read-only backup differs")
	}
}

// An import that fails part-way (here a quote never closed) writes the
// points it read before the failure, as a line-protocol import does, and
// says how many: it does not drop the batch it was building.
func TestImportFailureWritesWhatWasRead(t *testing.T) {
	tmp := t.TempDir()
	csvFile := filepath.Join(tmp, "in.csv")
	csvText := "measurement,host,field,time,kind,value\n" +
		"m,a,v,1,int,5\n" +
		"m,a,v,2,int,6\n" +
		"m,a,v,3,string,\"never closed\n"
	if err := os.WriteFile(csvFile, []byte(csvText), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(tmp, "db")
	var out, errb bytes.Buffer
	if code := importMain(context.Background(), []string{"--db", db, csvFile}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2 (stdout %q, stderr %q)", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String()+errb.String(), "2 points written") {
		t.Errorf("output does not count the points written:\n%s%s", out.String(), errb.String())
	}
	want := "\"m\" [{\"host\" \"a\"}] \"v\"\n  1 int \"5\"\n  2 int \"6\"\n"
	if got := dumpDB(t, db); got != want {
		t.Errorf("database holds\n%s\nwant\n%s", got, want)
	}
}
