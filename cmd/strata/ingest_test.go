package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/bench"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
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
	f(2, "--linger must be positive", "--db", dbDir, "--linger", "0s")
	f(2, "invalid value", "--db", dbDir, "--linger", "1")
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

	// An interrupt before anything was read is no failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out.Reset()
	errOut.Reset()
	code = ingestMain(ctx, []string{"--db", dir}, strings.NewReader("m v=1 1\n"), &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "stdin: 0 lines, 0 points written, 0 rejected") ||
		!strings.Contains(errOut.String(), "strata ingest: interrupted: stopped reading stdin") {
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

// queryAll returns every sample of measurement m in dir as "field time value".
func queryAll(t *testing.T, db *engine.DB, m string) []string {
	t.Helper()
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{
		Measurement: m, Start: math.MinInt64, End: math.MaxInt64,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res {
		for _, smp := range s.Samples {
			got = append(got, fmt.Sprintf("%s %d %s", s.Field, smp.Time, smp.Value.String()))
		}
	}
	return got
}

// enterReader tells a channel each time a Read starts: once the next Read
// starts, the bytes of the previous one are in the reader's hands.
type enterReader struct {
	r       io.Reader
	entered chan struct{}
}

func (r *enterReader) Read(p []byte) (int, error) {
	r.entered <- struct{}{}
	return r.r.Read(p)
}

// notifyDB tells a channel about each write to the engine.
// notifyDB is a lineproto.DB that reports each write. It holds the engine
// rather than embedding it, so that lineproto cannot find the engine's
// appender through it and write around Write.
type notifyDB struct {
	db    *engine.DB
	wrote chan int
}

func (db notifyDB) Write(points []engine.Point) error {
	err := db.db.Write(points)
	if err == nil {
		db.wrote <- len(points)
	}
	return err
}

// TestIngestLinger checks, with the real engine, that three lines piped in
// are queryable after the linger time while the pipe stays open.
func TestIngestLinger(t *testing.T) {
	db, err := engine.Open(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pr, pw := io.Pipe()
	ndb := notifyDB{db: db, wrote: make(chan int, 10)}
	done := make(chan error, 1)
	go func() {
		_, err := lineproto.Write(context.Background(), ndb, pr, lineproto.Options{Linger: 100 * time.Millisecond})
		done <- err
	}()
	if _, err := pw.Write([]byte("m v=1 1\nm v=2 2\nm v=3 3\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-ndb.wrote:
		if n != 3 {
			t.Fatalf("wrote %d points, want 3", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lines were not written while the input stayed open")
	}
	if got := queryAll(t, db, "m"); strings.Join(got, ",") != "v 1 1,v 2 2,v 3 3" {
		t.Errorf("query: %q", got)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestIngestSignal sends SIGTERM to the process while the ingest command
// waits on an idle stdin that holds three unwritten lines: the command
// returns promptly, with the lines written and the database closed.
func TestIngestSignal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	pr, pw := io.Pipe()
	defer pw.Close()
	in := &enterReader{r: pr, entered: make(chan struct{}, 10)}
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		// No linger before the signal: only the signal can write the lines.
		done <- ingestSignals([]string{"--db", dir, "--linger", "1h"}, in, &out, &errOut)
	}()
	if _, err := pw.Write([]byte("m v=1 1\nm v=2 2\nm v=3 3\n")); err != nil {
		t.Fatal(err)
	}
	<-in.entered
	<-in.entered // the three lines are read; stdin is idle
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ingest did not stop on SIGTERM")
	}
	if code != 0 || !strings.Contains(out.String(), "stdin: 3 lines, 3 points written, 0 rejected") ||
		!strings.Contains(errOut.String(), "interrupted") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := queryAll(t, db, "m"); strings.Join(got, ",") != "v 1 1,v 2 2,v 3 3" {
		t.Errorf("query: %q", got)
	}
}

// TestMain runs the command itself, in place of the tests, when
// STRATA_TEST_ARGS holds its arguments (separated by newlines): a test can
// run the real command as a process.
func TestMain(m *testing.M) {
	if args := os.Getenv("STRATA_TEST_ARGS"); args != "" {
		os.Args = append([]string{"strata"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestIngestSignalProcess runs 'strata ingest' as a process reading a pipe
// that stays open, and sends it SIGTERM once it has read three lines: it
// exits promptly with status 0 and the lines written.
func TestIngestSignalProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "STRATA_TEST_ARGS="+strings.Join([]string{"ingest", "--db", dir, "--linger", "1h", "-"}, "\n"))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	// Three lines, then comment lines that the process can only have taken
	// from the pipe once it has read the three lines: far more than the
	// pipe and the process's buffers hold, so that the write returns only
	// after the process has read the lines.
	in := []byte("m v=1 1\nm v=2 2\nm v=3 3\n")
	for len(in) < 4<<20 {
		in = append(in, "# padding padding padding padding padding padding padding padding\n"...)
	}
	if _, err := pw.Write(in); err != nil {
		t.Fatalf("write: %v\nstderr:\n%s", err, errOut.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("strata ingest did not exit on SIGTERM while its input was open")
	}
	if !strings.Contains(out.String(), "stdin: 3 lines, 3 points written, 0 rejected") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := queryAll(t, db, "m"); strings.Join(got, ",") != "v 1 1,v 2 2,v 3 3" {
		t.Errorf("query: %q", got)
	}
}

// baselineLP renders the 1M-point baseline dataset (bench.IoT: 1,000
// devices x 1,000 steps) as line protocol with nanosecond timestamps.
func baselineLP(b *testing.B) []byte {
	ds, err := bench.IoT(1_000_000, 1000, 1)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, ds.Len()*80)
	for i := range ds.Len() {
		p := ds.Point(i)
		buf = append(buf, p.Measurement...)
		for _, t := range p.Tags {
			buf = append(buf, ',')
			buf = append(buf, t.Key...)
			buf = append(buf, '=')
			buf = append(buf, t.Value...)
		}
		for j, f := range p.Fields {
			buf = append(buf, " ,"[min(j, 1)])
			buf = append(buf, f.Key...)
			buf = append(buf, '=')
			buf = strconv.AppendFloat(buf, f.Value.Float(), 'f', -1, 64)
		}
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, p.Time, 10)
		buf = append(buf, '\n')
	}
	return buf
}

// BenchmarkIngestEngine measures lineproto.Write of the baseline dataset
// into the real engine (SyncNever), from Open to Close.
func BenchmarkIngestEngine(b *testing.B) {
	data := baselineLP(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	lines := 0
	for b.Loop() {
		db, err := engine.Open(b.TempDir(), &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		res, err := lineproto.Write(context.Background(), db, bytes.NewReader(data), lineproto.Options{})
		if err != nil || res.Points != 1_000_000 || res.RejectedCount != 0 {
			b.Fatalf("Write: %+v, %v", res, err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		lines += res.Lines
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
}
