package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratadb/strata/engine"
)

func init() {
	commands["query"] = command{
		summary: "print raw samples or aggregates of a database as CSV",
		run:     func(args []string) int { return withSignals(args, queryMain) },
	}
	commands["verify"] = command{
		summary: "read every block of a database and check every checksum",
		run:     func(args []string) int { return withSignals(args, verifyMain) },
	}
}

func withSignals(args []string, main func(context.Context, []string, io.Writer, io.Writer) int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return main(ctx, args, os.Stdout, os.Stderr)
}

// tagFlags collects repeated --tag k=v flags.
type tagFlags []engine.Tag

func (t *tagFlags) String() string { return fmt.Sprint(*t) }

func (t *tagFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	*t = append(*t, engine.Tag{Key: k, Value: v})
	return nil
}

// parseTime reads an RFC 3339 time or integer Unix nanoseconds.
func parseTime(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("time %q is neither RFC 3339 nor Unix nanoseconds", s)
	}
	return t.UnixNano(), nil
}

// openExisting opens the database in dir read-only: it creates, changes
// and locks nothing, so it works beside a running writer, and a directory
// that holds no database is engine.ErrNotDatabase.
func openExisting(dir string) (*engine.DB, error) {
	if dir == "" {
		return nil, errors.New("--db is required")
	}
	return engine.Open(dir, &engine.Options{ReadOnly: true})
}

// queryMain is the query command: CSV rows series,time,value on stdout.
// Exit status 0 on success, 2 on failure.
func queryMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("query", "usage: strata query --db DIR --measurement M [flags]\n\n"+
		"Print the samples (or per-bucket aggregates) of the selected series as CSV rows\n"+
		"series,time,value sorted by series key, then time. Times are RFC 3339 or Unix ns.", stderr)
	dir := fs.String("db", "", "database directory (required)")
	m := fs.String("measurement", "", "measurement (required)")
	field := fs.String("field", "", "field key; empty = every field")
	var tags tagFlags
	fs.Var(&tags, "tag", "key=value tag filter, repeatable (ANDed)")
	start := fs.String("start", "", "range start, inclusive (default: the beginning of time)")
	end := fs.String("end", "", "range end, exclusive (default: the end of time)")
	agg := fs.String("agg", "none", "none, count, sum, mean, min, max, first or last")
	every := fs.Duration("every", 0, "bucket width for --agg, e.g. 1m; 0 = one bucket")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "strata query: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	q := engine.Query{Selector: engine.Selector{Measurement: *m, Field: *field, Tags: tags}, Every: int64(*every)}
	var err error
	if q.Start, err = parseTime(*start, math.MinInt64); err != nil {
		return fail(err)
	}
	if q.End, err = parseTime(*end, math.MaxInt64); err != nil {
		return fail(err)
	}
	if q.Agg, err = engine.ParseAggregate(*agg); err != nil {
		return fail(err)
	}
	db, err := openExisting(*dir)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	series, err := db.Query(ctx, q)
	if err != nil {
		return fail(err)
	}
	w := csv.NewWriter(stdout)
	w.Write([]string{"series", "time", "value"})
	for _, s := range series {
		key := engine.SeriesKey(s.Measurement, s.Tags, s.Field) // canonical, escaped
		for _, smp := range s.Samples {
			w.Write([]string{key, time.Unix(0, smp.Time).UTC().Format(time.RFC3339Nano), smp.Value.String()})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fail(err)
	}
	if err := db.Close(); err != nil {
		return fail(err)
	}
	return 0
}

// verifyMain is the verify command: exit 0 when every block reads back
// intact, 1 when damage is found, 2 when the database cannot be opened.
func verifyMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("verify", "usage: strata verify --db DIR\n\n"+
		"Open the database read-only (replaying its WAL in memory; nothing on disk changes,\n"+
		"and a running writer may keep the database open), read every block of every segment\n"+
		"and check every checksum. Exit status: 0 intact, 1 damage found (run strata repair),\n"+
		"2 cannot open.", stderr)
	dir := fs.String("db", "", "database directory (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
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
