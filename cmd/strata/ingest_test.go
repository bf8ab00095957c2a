package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

func runIngestCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = ingestMain(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestIngestUsage(t *testing.T) {
	if _, ok := commands["ingest"]; !ok {
		t.Fatal("ingest is not registered")
	}
	tmp := t.TempDir()
	dbDir := filepath.Join(tmp, "db")
	f := func(code int, stderr string, args ...string) {
		t.Helper()
		gotCode, _, gotErr := runIngestCmd(t, "", args...)
		if gotCode != code || !strings.Contains(gotErr, stderr) {
			t.Errorf("ingest %q: exit %d, stderr:\n%s\nwant exit %d and %q", args, gotCode, gotErr, code, stderr)
		}
	}
	f(0, "usage: strata ingest --db DIR", "-h")
	f(2, "flag provided but not defined: -nope", "--nope")
	f(2, "--db is required")
	f(2, "--db is required", "file.lp")
	f(2, `--precision must be ns, us, ms or s, not "h"`, "--db", dbDir, "--precision", "h")
	f(2, "--batch must be positive", "--db", dbDir, "--batch", "0")
	f(2, "invalid value", "--db", dbDir, "--batch", "x")
	f(2, `unexpected argument "b.lp"`, "--db", dbDir, "a.lp", "b.lp")
	f(2, "no such file or directory", "--db", dbDir, filepath.Join(tmp, "missing.lp"))
	// None of these got as far as creating the database.
	if _, err := os.Stat(dbDir); !os.IsNotExist(err) {
		t.Errorf("a failed command created %s: %v", dbDir, err)
	}
	// A database that cannot be opened: its directory is a file.
	notDir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f(2, "strata ingest: open "+notDir, "--db", notDir, "-")
}

// TestIngestEndToEnd ingests into a real database and reads the data back.
// It needs a working engine.
func TestIngestEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	file := filepath.Join(t.TempDir(), "in.lp")
	in := "# sensors\n" +
		"sensor,device_id=dev-0001,site=site-01 temperature=21.5 1700000000\n" +
		"sensor,device_id=dev-0001,site=site-01 temperature=21.7 1700000001\n" +
		"sensor,device_id=dev-0001,site=site-01 temperature=oops 1700000002\n" +
		"\n" +
		"sensor,device_id=dev-0001,site=site-01 temperature=22i 1700000003\n" +
		"sensor,site=site-02,device_id=dev-0002 temperature=19.25,note=\"door\nopen\" 1700000004\n"
	if err := os.WriteFile(file, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runIngestCmd(t, "", "--db", dir, "--precision", "s", "--batch", "2", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (rejected lines)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		file + ": 5 lines, 3 points written, 2 rejected in ",
		"rejected lines:\n  line 4: column 52: field value has unrecognized type\n",
		"  line 6: strata: field type conflict: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	// All good, from stdin.
	code, stdout, stderr = runIngestCmd(t, "sensor,device_id=dev-0001,site=site-01 temperature=23 1700000005000\n",
		"--db", dir, "--precision", "ms", "-")
	if code != 0 || !strings.Contains(stdout, "stdin: 1 lines, 1 points written, 0 rejected in ") {
		t.Fatalf("stdin: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{
		Measurement: "sensor", Start: math.MinInt64, End: math.MaxInt64,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res {
		for _, smp := range s.Samples {
			got = append(got, fmt.Sprintf("%v %s %d %q", s.Tags, s.Field, smp.Time/1e9, smp.Value.String()))
		}
	}
	want := []string{
		`[{device_id dev-0001} {site site-01}] temperature 1700000000 "21.5"`,
		`[{device_id dev-0001} {site site-01}] temperature 1700000001 "21.7"`,
		`[{device_id dev-0001} {site site-01}] temperature 1700000005 "23"`,
		`[{device_id dev-0002} {site site-02}] note 1700000004 "door\nopen"`,
		`[{device_id dev-0002} {site site-02}] temperature 1700000004 "19.25"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("query:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIngestManyRejected checks that the summary lists the first ten
// rejected lines.
func TestIngestManyRejected(t *testing.T) {
	var in strings.Builder
	for i := range 12 {
		fmt.Fprintf(&in, "m v=%di %d\nbad\n", i, i)
	}
	code, stdout, stderr := runIngestCmd(t, in.String(), "--db", filepath.Join(t.TempDir(), "db"))
	if code != 1 || !strings.Contains(stdout, "stdin: 24 lines, 12 points written, 12 rejected in ") ||
		!strings.Contains(stdout, "first 10 of 12 rejected lines:\n  line 2: ") ||
		!strings.Contains(stdout, "\n  line 20: ") || strings.Contains(stdout, "line 22") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestIngestFailures checks that a read error or an interrupt exits 2.
func TestIngestFailures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	var out, errOut bytes.Buffer
	r := io.MultiReader(strings.NewReader("m v=1 1\n"), errReader{})
	code := ingestMain(context.Background(), []string{"--db", dir}, r, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "strata ingest: lineproto: read input: device gone") {
		t.Errorf("read error: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out.Reset()
	errOut.Reset()
	code = ingestMain(ctx, []string{"--db", dir}, strings.NewReader("m v=1 1\n"), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "strata ingest: context canceled") {
		t.Errorf("interrupted: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	// The database was closed: it opens again.
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("device gone") }
