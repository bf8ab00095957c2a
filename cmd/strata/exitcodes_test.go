package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The exit status convention of every command (docs/operations.md, "The
// command line"): 2 for a usage error (an unknown flag, a bad flag value,
// flags that do not go together, a missing or extra argument), found
// before anything is opened or created; 1 for a failure at run time; 0 for
// success. --help exits 0 and prints to stderr, as any usage does.

// usageCase is a command line that is wrong: the command must exit 2,
// print nothing on stdout and say why on stderr.
type usageCase struct {
	name string
	main func(context.Context, []string, io.Writer, io.Writer) int
	want string // in stderr
	args []string
}

func checkUsage(t *testing.T, c usageCase) {
	t.Helper()
	var out, errb bytes.Buffer
	code := c.main(context.Background(), c.args, &out, &errb)
	if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), c.want) {
		t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want exit 2, no stdout, %q in stderr",
			c.name, c.args, code, out.String(), firstLine(errb.String()), c.want)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestReadCommandsUsageExit2: the read commands exited 1 for usage errors
// (a missing --measurement, a bad --agg, --format or time, flags that need
// another, extra arguments) while they exit 2 for an unknown flag; and they
// opened the database before checking, so that with a missing database a
// bad flag was reported as the missing database.
func TestReadCommandsUsageExit2(t *testing.T) {
	dir := writeFleetDB(t)
	missing := filepath.Join(t.TempDir(), "missing")
	q := func(want string, args ...string) usageCase { return usageCase{"query", queryMain, want, args} }
	for _, c := range []usageCase{
		q("--measurement is required", "--db", dir),
		q("--db is required", "--measurement", "sensor"),
		q(`unexpected argument "x"`, "--db", dir, "--measurement", "sensor", "x"),
		q(`unknown --agg "median"`, "--db", dir, "--measurement", "sensor", "--agg", "median"),
		q(`unknown --agg "median"`, "--db", missing, "--measurement", "sensor", "--agg", "median"),
		q(`unknown --format "xml"`, "--db", missing, "--measurement", "sensor", "--format", "xml"),
		q("--start", "--db", dir, "--measurement", "sensor", "--start", "yesterday"),
		q("is not before --end", "--db", dir, "--measurement", "sensor", "--start", "0", "--end", "0"),
		q("--every needs --agg", "--db", dir, "--measurement", "sensor", "--every", "1m"),
		q("--group-by needs --agg", "--db", dir, "--measurement", "sensor", "--group-by", "site"),
		{"tags", tagsMain, `unexpected argument "b"`, []string{"--db", dir, "a", "b"}},
		{"tags", tagsMain, `unexpected argument "b"`, []string{"--db", missing, "a", "b"}},
		{"series", seriesMain, `unknown --format "xml"`, []string{"--db", missing, "--format", "xml"}},
		{"series", seriesMain, "--db is required", nil},
		{"last", lastMain, "--end", []string{"--db", dir, "--end", "tomorrow"}},
		{"measurements", measurementsMain, `unexpected argument "x"`, []string{"--db", dir, "x"}},
		{"measurements", measurementsMain, `unknown --format "xml"`, []string{"--db", missing, "--format", "xml"}},
		{"measurements", measurementsMain, "--db is required", nil},
	} {
		checkUsage(t, c)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a usage error created %s", missing)
	}
}

// TestBadRegexpIsUsageError: a --match regexp that does not compile was
// only found by the engine, once the query ran: exit 1, and query had
// already printed its CSV header on stdout.
func TestBadRegexpIsUsageError(t *testing.T) {
	dir := writeFleetDB(t)
	for _, c := range []usageCase{
		{"query", queryMain, "bad regexp", []string{"--db", dir, "--measurement", "sensor", "--match", "site=~("}},
		{"series", seriesMain, "bad regexp", []string{"--db", dir, "--match", "site!~a)"}},
		{"export", exportMain, "bad regexp", []string{"--db", dir, "--format", "lp", "--match", "site=~[z-a]"}},
	} {
		checkUsage(t, c)
	}
}

// TestSignWithoutDurationIsNoTime: "--start -" (or "+") parsed as now,
// silently selecting nothing from now on, instead of a bad time.
func TestSignWithoutDurationIsNoTime(t *testing.T) {
	dir := writeFleetDB(t)
	for _, c := range []usageCase{
		{"query", queryMain, "--start", []string{"--db", dir, "--measurement", "sensor", "--start", "-"}},
		{"last", lastMain, "--end", []string{"--db", dir, "--end", "+"}},
		{"export", exportMain, "--start", []string{"--db", dir, "--format", "lp", "--start", " - "}},
	} {
		checkUsage(t, c)
	}
}

// TestVerifyUsageExit2: verify ignored extra arguments ('strata verify
// --db a b' checked a and said nothing of b) and reported a missing --db
// without its usage.
func TestVerifyUsageExit2(t *testing.T) {
	dir := writeTestDB(t)
	checkUsage(t, usageCase{"verify", verifyMain, `unexpected argument "extra"`, []string{"--db", dir, "extra"}})
	checkUsage(t, usageCase{"verify", verifyMain, "usage: strata verify", nil})
	checkUsage(t, usageCase{"repair", repairMain, `unexpected argument "extra"`, []string{"--db", dir, "extra"}})
	checkUsage(t, usageCase{"repair", repairMain, "usage: strata repair", nil})
}

// TestBackupTimeoutMustBePositive: --timeout 0 or below was accepted; the
// request to a running server then failed at once with a context deadline
// error (exit 1), and without a server the value was silently ignored.
func TestBackupTimeoutMustBePositive(t *testing.T) {
	src := writeTestDB(t)
	out := filepath.Join(t.TempDir(), "bk")
	for _, v := range []string{"0", "-1s"} {
		checkUsage(t, usageCase{"backup", backupMain, "--timeout must be positive", []string{"--db", src, "--out", out, "--timeout", v}})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a usage error made a backup in %s", out)
	}
}

// TestBackupEmptyTokenFile: an empty --token-file was taken as "no token",
// as serve refuses it.
func TestBackupEmptyTokenFile(t *testing.T) {
	src := writeTestDB(t)
	empty := filepath.Join(t.TempDir(), "token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	var out, errb bytes.Buffer
	if code := backupMain(context.Background(), []string{"--db", src, "--out", filepath.Join(t.TempDir(), "bk"), "--token-file", empty}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "is empty") {
		t.Errorf("backup with an empty token file: exit %d, stderr %q; want 1 and 'is empty'", code, errb.String())
	}
}

// TestServeRefusesBadFlagsBeforeOpen: serve accepted values that make no
// sense and then misbehaved (a zero --query-timeout became the 2m default,
// a negative --read-timeout no limit, a zero --forward-batch-size or
// --forward-timeout the library default), and found other errors (MQTT and
// forwarding flags, a negative --retention) only after it had created the
// database directory, some of them reported as failures rather than usage
// errors; --mqtt-password-file silently won over --mqtt-password.
func TestServeRefusesBadFlagsBeforeOpen(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a serve that starts stops at once rather than hang the test
	tmp := t.TempDir()
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--retention", []string{"--retention", "-1h"}},
		{"--memtable-bytes", []string{"--memtable-bytes", "-5"}},
		{"--memtable-bytes", []string{"--memtable-bytes", "0"}},
		{"--sync-interval", []string{"--sync", "interval", "--sync-interval", "0s"}},
		{"--sync-interval needs --sync interval", []string{"--sync-interval", "1s"}},
		{"--sync-interval needs --sync interval", []string{"--sync", "never", "--sync-interval", "1s"}},
		{"--query-timeout", []string{"--query-timeout", "0s"}},
		{"--query-timeout", []string{"--query-timeout", "-1m"}},
		{"--read-timeout", []string{"--read-timeout", "-1s"}},
		{"--read-header-timeout", []string{"--read-header-timeout", "-1s"}},
		{"--write-timeout", []string{"--write-timeout", "-1s"}},
		{"--idle-timeout", []string{"--idle-timeout", "-1s"}},
		{"--shutdown-timeout", []string{"--shutdown-timeout", "-1s"}},
		{"--mqtt-topic needs --mqtt-broker", []string{"--mqtt-topic", "a/#"}},
		{"--mqtt-format needs --mqtt-broker", []string{"--mqtt-format", "json"}},
		{"--mqtt-client-id needs --mqtt-broker", []string{"--mqtt-client-id", "x"}},
		{"--mqtt-json-tags needs --mqtt-broker", []string{"--mqtt-json-tags", "a"}},
		{"--mqtt-password-file needs --mqtt-broker", []string{"--mqtt-password-file", "/nonexistent"}},
		{"--mqtt-max-batch needs --mqtt-broker", []string{"--mqtt-max-batch", "0"}},
		{"--mqtt-precision", []string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-topic", "a/#", "--mqtt-precision", "h"}},
		{"exclusive", []string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-topic", "a/#", "--mqtt-password", "p", "--mqtt-password-file", "pw"}},
		{"--mqtt-client-id", []string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-topic", "a/#", "--mqtt-client-id", ""}},
		{"# must be the last level", []string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-topic", "a/#/b"}},
		{"--forward-protocol", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-protocol", "bogus"}},
		{"--forward-batch-size", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-batch-size", "0"}},
		{"--forward-timeout", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-timeout", "0s"}},
		{"--forward-max-backlog-age", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-max-backlog-age", "-1h"}},
		{"--forward-segment-bytes", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-segment-bytes", "-1"}},
		{"--forward-min-backoff", []string{"--forward-url", "http://127.0.0.1:1/w", "--forward-min-backoff", "1m", "--forward-max-backoff", "1s"}},
		{"--forward-url", []string{"--forward-url", "http://[::1"}},
		{"needs --forward-url", []string{"--forward-header", "X-A: b"}},
	} {
		dir := filepath.Join(tmp, "db")
		var errb bytes.Buffer
		args := append([]string{"--db", dir, "--listen", "127.0.0.1:0"}, c.args...)
		code := serveMain(ctx, args, &errb)
		if code != 2 || !strings.Contains(firstLine(errb.String()), c.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want 2 and %q", c.args, code, firstLine(errb.String()), c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("serve %q created the database before refusing its flags", c.args)
			os.RemoveAll(dir)
		}
	}
}

// TestBenchFlagConflicts: flags of one bench mode given to another were
// silently ignored (--mixed beside --scale ran the sweep, --points with
// --scale or --duration without --mixed changed nothing), and --share NaN
// passed the (0, 1] check.
func TestBenchFlagConflicts(t *testing.T) {
	for _, c := range []struct {
		want string
		args []string
	}{
		// Each line would also fail on a later check, so that an old
		// binary fails this test rather than run a bench.
		{"--share", []string{"--mixed", "--share", "NaN", "--fields", "2"}},
		{"--scale and --mixed", []string{"--scale", "points", "--mixed", "--sizes", "x"}},
		{"--points", []string{"--scale", "points", "--points", "5000", "--sizes", "x"}},
		{"--runs", []string{"--scale", "series", "--runs", "2", "--sizes", "x"}},
		{"--duration", []string{"--duration", "1s", "--points", "1001"}},
		{"--readers", []string{"--readers", "4", "--points", "1001"}},
		{"--limit", []string{"--mixed", "--limit", "1m", "--fields", "2"}},
	} {
		code, stdout, stderr := runBenchCmd(t, c.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestHelpEveryCommand runs -h and --help of every command as main does:
// exit 0, the usage on stderr, nothing on stdout.
func TestHelpEveryCommand(t *testing.T) {
	stdout, stderr := redirectStd(t)
	for name, c := range commands {
		for _, h := range []string{"-h", "--help", "-help"} {
			stdout.Truncate(0)
			stdout.Seek(0, 0)
			stderr.Truncate(0)
			stderr.Seek(0, 0)
			code := c.run([]string{h})
			out, _ := os.ReadFile(stdout.Name())
			help, _ := os.ReadFile(stderr.Name())
			if code != 0 || len(out) != 0 || !strings.HasPrefix(string(help), "usage: strata "+name+" ") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr starts %q", name, h, code, out, firstLine(string(help)))
			}
		}
	}
}

// TestTopLevel: 'strata help CMD' printed the list of commands and
// ignored CMD; it is now CMD's help, as 'strata CMD --help'.
func TestTopLevel(t *testing.T) {
	stdout, stderr := redirectStd(t)
	for _, c := range []struct {
		args []string
		code int
		err  string // stderr starts with it
	}{
		{nil, 2, "usage: strata <command>"},
		{[]string{"--help"}, 0, "usage: strata <command>"},
		{[]string{"help"}, 0, "usage: strata <command>"},
		{[]string{"help", "query"}, 0, "usage: strata query "},
		{[]string{"help", "nosuch"}, 2, `strata: unknown command "nosuch"`},
		{[]string{"help", "query", "x"}, 2, `strata help: unexpected argument "x"`},
		{[]string{"nosuch"}, 2, `strata: unknown command "nosuch"`},
		{[]string{"query", "--nosuch"}, 2, "flag provided but not defined: -nosuch"},
	} {
		stdout.Truncate(0)
		stdout.Seek(0, 0)
		stderr.Truncate(0)
		stderr.Seek(0, 0)
		code := runMain(c.args)
		out, _ := os.ReadFile(stdout.Name())
		errs, _ := os.ReadFile(stderr.Name())
		if code != c.code || len(out) != 0 || !strings.HasPrefix(string(errs), c.err) {
			t.Errorf("strata %q: exit %d, stdout %q, stderr starts %q; want %d and %q", c.args, code, out, firstLine(string(errs)), c.code, c.err)
		}
	}
}

// redirectStd points os.Stdout and os.Stderr at files for the test.
func redirectStd(t *testing.T) (stdout, stderr *os.File) {
	t.Helper()
	var err error
	if stdout, err = os.CreateTemp(t.TempDir(), "stdout"); err != nil {
		t.Fatal(err)
	}
	if stderr, err = os.CreateTemp(t.TempDir(), "stderr"); err != nil {
		t.Fatal(err)
	}
	saveOut, saveErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = stdout, stderr
	t.Cleanup(func() { os.Stdout, os.Stderr = saveOut, saveErr })
	return stdout, stderr
}

// TestImportMissingFileLeavesNothing checks that import of a file that is
// not there fails before the database is created, and prints no summary
// of a file it never read.
func TestImportMissingFileLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	good := filepath.Join(t.TempDir(), "good.lp")
	if err := os.WriteFile(good, []byte("m v=1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{{"missing.lp"}, {good, "missing.lp"}, {t.TempDir()}} {
		code, stdout, stderr := runCmd(t, importMain, append([]string{"--db", dir}, files...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "strata import:") {
			t.Errorf("import %v: exit %d, stdout %q, stderr %q; want 2, nothing on stdout", files, code, stdout, stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("import %v created the database (%v)", files, err)
		}
	}
}

// TestExportFormatAnyCase: export's --format takes any case, as query's.
func TestExportFormatAnyCase(t *testing.T) {
	src := writeStringsDB(t, "plain")
	want := dumpDB(t, src)
	for _, format := range []string{"LP", "Csv", "PARQUET"} {
		file := filepath.Join(t.TempDir(), "out")
		runWant(t, exportMain, 0, "--db", src, "--format", format, "--out", file)
		dst := filepath.Join(t.TempDir(), "dst")
		runWant(t, importMain, 0, "--db", dst, file)
		if got := dumpDB(t, dst); got != want {
			t.Errorf("--format %s: imported database differs\ngot:\n%s\nwant:\n%s", format, got, want)
		}
	}
}
