package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/engine"
)

func init() {
	commands["query"] = signalCommand("print raw samples or aggregates, optionally grouped by tag", queryMain)
	commands["verify"] = signalCommand("read every block of a database and check every checksum", verifyMain)
}

// queryMain is the query command: the selected series' samples or
// aggregates, streamed as CSV, JSON or a table. Exit status 0 on success,
// 1 on a failure (a database that cannot be opened, an unknown
// measurement), 2 on a usage error, found before the database is opened.
func queryMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("query", `usage: strata query --db DIR --measurement M [flags]

Print the samples (or aggregates) of the selected series, sorted by series key, then
time. With --agg and no --every, first, last, min and max report the time of the
sample they pick; count, sum and mean the range start. With --every, each bucket's
start. With --group-by, series sharing those tags' values are aggregated together
(InfluxQL GROUP BY tag). Times in the output are RFC 3339 (UTC).

examples:
  strata query --db ./data --measurement sensor --match 'device_id=~dev-1.*' --start -1h
  strata query --db ./data --measurement sensor --field temperature --agg mean --every 1d --start 2024-05-01
  strata query --db ./data --measurement sensor --agg mean --group-by site --format table

Exit status: 0 success (an empty answer included), 1 failure (a directory that holds no
database, a measurement it holds no data for), 2 bad usage (an unknown flag, a bad value,
--every or --group-by without --agg, --start not before --end, a missing --db or
--measurement, an extra argument).`, stderr)
	sf := addSelectorFlags(fs, "measurement (required)")
	agg := fs.String("agg", "none", "none, count, sum, mean, min, max, first or last (any case)")
	var every durationFlag
	fs.Var(&every, "every", "bucket width for --agg: 30s, 5m, 1h, 1d, 1w (Prometheus durations); 0 = one bucket")
	var groupBy groupFlag
	fs.Var(&groupBy, "group-by", "comma-separated tag keys to aggregate across series by (needs --agg);\n"+
		"an empty value puts all series of a field in one group")
	format := addFormatFlag(fs)
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	switch {
	case *sf.db == "":
		return usageErr("--db is required")
	case *sf.measurement == "":
		return usageErr("--measurement is required (list them with 'strata measurements')")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	sel, err := sf.selector(time.Now())
	if err != nil {
		return usageErr("%v", err)
	}
	q := engine.Query{Selector: sel, Every: int64(every)}
	if groupBy.set {
		q.GroupBy = groupBy.keys
	}
	if q.Agg, err = engine.ParseAggregate(strings.ToLower(*agg)); err != nil {
		return usageErr("unknown --agg %q: want none, count, sum, mean, min, max, first or last", *agg)
	}
	if q.Every > 0 && q.Agg == engine.AggNone {
		return usageErr("--every needs --agg (for example --agg mean)")
	}
	if groupBy.set && q.Agg == engine.AggNone {
		return usageErr("--group-by needs --agg (for example --agg mean)")
	}
	f, err := resolveFormat(*format, stdout)
	if err != nil {
		return usageErr("%v", err)
	}
	fail := failWith(stderr, "query", exitFailure)
	db, err := openExisting(*sf.db)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	if err := checkMeasurement(ctx, db, q.Measurement); err != nil {
		return fail(err)
	}
	w := newSeriesWriter(f, stdout)
	for s, err := range db.QuerySeq(ctx, q) {
		if err != nil {
			w.close()
			return fail(err)
		}
		if err := w.write(s); err != nil {
			return fail(err)
		}
	}
	if err := w.close(); err != nil {
		return fail(err)
	}
	if err := db.Close(); err != nil {
		return fail(err)
	}
	return 0
}

// checkMeasurement reports a measurement the database has no data for, so
// that a typo is an error rather than an empty answer.
func checkMeasurement(ctx context.Context, db *engine.DB, m string) error {
	ms, err := db.Measurements(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(ms, m) {
		return nil
	}
	if len(ms) == 0 {
		return fmt.Errorf("unknown measurement %q: the database holds no data", m)
	}
	const show = 10
	list := strings.Join(ms[:min(len(ms), show)], ", ")
	if len(ms) > show {
		list += fmt.Sprintf(", ... (%d in all)", len(ms))
	}
	return fmt.Errorf("unknown measurement %q; measurements: %s", m, list)
}

// groupFlag is --group-by: comma-separated keys; set even when empty.
type groupFlag struct {
	keys []string
	set  bool
}

func (g *groupFlag) String() string { return strings.Join(g.keys, ",") }

func (g *groupFlag) Set(s string) error {
	g.set = true
	g.keys = []string{}
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			g.keys = append(g.keys, k)
		}
	}
	return nil
}

// verifyMain is the verify command: exit 0 when every block reads back
// intact, 1 when damage is found, 2 when the database cannot be opened or
// on a usage error.
func verifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("verify", "usage: strata verify --db DIR\n\n"+
		"Open the database read-only (replaying its WAL in memory; nothing on disk changes,\n"+
		"and a running writer may keep the database open), read every block of every segment\n"+
		"and check every checksum. Exit status: 0 intact, 1 damage found (run strata repair),\n"+
		"2 cannot open, or bad usage.\n\n"+
		"example:\n  strata verify --db ./data", stderr)
	dir := fs.String("db", "", "database directory (required)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	switch {
	case *dir == "":
		return usageErr("--db is required")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	db, err := openExisting(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "strata verify: %v\n", err)
		if errors.Is(err, engine.ErrCorrupt) {
			return 1
		}
		return 2
	}
	defer db.Close()
	start := time.Now()
	rep, err := db.Verify(ctx)
	fmt.Fprintf(stdout, "segments %d, series %d, blocks %d, samples %d, bytes %d, wal samples %d, in %v\n",
		rep.Segments, rep.Series, rep.Blocks, rep.Samples, rep.Bytes, rep.MemTableSamples, time.Since(start).Round(time.Millisecond))
	if err != nil {
		fmt.Fprintf(stderr, "strata verify: %v\n", err)
		if errors.Is(err, engine.ErrCorrupt) {
			return 1
		}
		return 2
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}
