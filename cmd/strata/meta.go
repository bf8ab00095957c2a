package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/stratadb/strata/engine"
)

// The metadata commands: what a database holds, for people exploring it
// and for dashboard variables. Each opens the database read-only and
// considers only series with a visible sample in the range.

func init() {
	commands["measurements"] = signalCommand("list the measurements that hold data", measurementsMain)
	commands["tags"] = signalCommand("list tag keys, or the values of one key", tagsMain)
	commands["series"] = signalCommand("list the series a selector picks, with their kinds", seriesMain)
	commands["last"] = signalCommand("print the newest sample of every selected series", lastMain)
}

// metaRun is the shared skeleton, once the flags are checked: open
// read-only, run f, close. Exit status 0 on success, 1 on a failure (a
// database that cannot be opened included); the usage errors (2) come
// before it.
func metaRun(name, dir string, stderr io.Writer, f func(db *engine.DB) error) int {
	fail := failWith(stderr, name, exitFailure)
	db, err := openExisting(dir)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	if err := f(db); err != nil {
		return fail(err)
	}
	if err := db.Close(); err != nil {
		return fail(err)
	}
	return exitOK
}

// metaUsage checks what the metadata commands share: --db, at most maxArgs
// arguments and the output format. It returns the format, or done with
// the exit status after a usage error.
func metaUsage(fs *flag.FlagSet, dir, format string, maxArgs int, stdout, stderr io.Writer) (f string, status int, done bool) {
	usageErr := usageFail(fs, stderr)
	switch {
	case dir == "":
		return "", usageErr("--db is required"), true
	case fs.NArg() > maxArgs:
		return "", usageErr("unexpected argument %q", fs.Arg(maxArgs)), true
	}
	f, err := resolveFormat(format, stdout)
	if err != nil {
		return "", usageErr("%v", err), true
	}
	return f, exitOK, false
}

func measurementsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("measurements", `usage: strata measurements --db DIR [--format F]

List the measurements that have at least one visible sample, sorted.

example:
  strata measurements --db ./data

Exit status: 0 success, 1 failure (a directory that holds no database), 2 bad usage.`, stderr)
	dir := fs.String("db", "", "database directory (required)")
	format := addFormatFlag(fs)
	if st, done := parseFlags(fs, args); done {
		return st
	}
	f, st, done := metaUsage(fs, *dir, *format, 0, stdout, stderr)
	if done {
		return st
	}
	return metaRun("measurements", *dir, stderr, func(db *engine.DB) error {
		ms, err := db.Measurements(ctx)
		if err != nil {
			return err
		}
		return writeStrings(f, stdout, "measurement", ms)
	})
}

func tagsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tags", `usage: strata tags --db DIR [--measurement M] [selector flags] [KEY]

Without KEY, list the tag keys of the selected series; with KEY, the values that
key takes among them (never empty), as a dashboard variable needs. Only series with
a visible sample in the range count. Without --measurement, every measurement.

examples:
  strata tags --db ./data --measurement sensor
  strata tags --db ./data --measurement sensor site
  strata tags --db ./data --measurement sensor --match 'site=~north-.*' --start -1d device_id

Exit status: 0 success, 1 failure (a directory that holds no database), 2 bad usage.`, stderr)
	return selectorRun("tags", fs, args, 1, stdout, stderr, func(db *engine.DB, f string, sel engine.Selector) error {
		if fs.NArg() == 0 {
			keys, err := db.TagKeys(ctx, sel)
			if err != nil {
				return err
			}
			return writeStrings(f, stdout, "key", keys)
		}
		vals, err := db.TagValues(ctx, fs.Arg(0), sel)
		if err != nil {
			return err
		}
		return writeStrings(f, stdout, "value", vals)
	})
}

func seriesMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("series", `usage: strata series --db DIR [selector flags]

List the series the selector picks that have a visible sample in the range, sorted
by series key, with their field kinds. No sample is read.

examples:
  strata series --db ./data --measurement sensor --match 'device_id=~dev-00.*'
  strata series --db ./data --start -1h --format json

Exit status: 0 success, 1 failure (a directory that holds no database), 2 bad usage.`, stderr)
	return selectorRun("series", fs, args, 0, stdout, stderr, func(db *engine.DB, f string, sel engine.Selector) error {
		infos, err := db.SeriesInfo(ctx, sel)
		if err != nil {
			return err
		}
		if f == formatJSON {
			type jsonInfo struct {
				Measurement string            `json:"measurement"`
				Tags        map[string]string `json:"tags"`
				Field       string            `json:"field"`
				Kind        string            `json:"kind"`
			}
			out := make([]jsonInfo, len(infos))
			for i, s := range infos {
				out[i] = jsonInfo{s.Measurement, tagMap(s.Tags), s.Field, s.Kind.String()}
			}
			b, err := json.Marshal(out)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "%s\n", b)
			return err
		}
		rw := newRowWriter(f, stdout, "series", "kind")
		for _, s := range infos {
			rw.row(engine.SeriesKey(s.Measurement, s.Tags, s.Field), s.Kind.String())
		}
		return rw.close()
	})
}

func lastMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("last", `usage: strata last --db DIR [selector flags]

Print the newest visible sample of every selected series (in the range, all time by
default): the current value of every device.

examples:
  strata last --db ./data --measurement sensor --field temperature
  strata last --db ./data --match 'site=north' --format table

Exit status: 0 success, 1 failure (a directory that holds no database), 2 bad usage.`, stderr)
	return selectorRun("last", fs, args, 0, stdout, stderr, func(db *engine.DB, f string, sel engine.Selector) error {
		res, err := db.Last(ctx, sel)
		if err != nil {
			return err
		}
		w := newSeriesWriter(f, stdout)
		for _, s := range res {
			if err := w.write(s); err != nil {
				return err
			}
		}
		return w.close()
	})
}

// selectorRun parses the selector and format flags of command name, which
// takes at most maxArgs arguments, opens the database read-only and calls
// run with the output format and the selector.
func selectorRun(name string, fs *flag.FlagSet, args []string, maxArgs int, stdout, stderr io.Writer, run func(db *engine.DB, format string, sel engine.Selector) error) int {
	sf := addSelectorFlags(fs, "measurement; empty = every measurement")
	format := addFormatFlag(fs)
	if st, done := parseFlags(fs, args); done {
		return st
	}
	f, st, done := metaUsage(fs, *sf.db, *format, maxArgs, stdout, stderr)
	if done {
		return st
	}
	sel, err := sf.selector(time.Now())
	if err != nil {
		return usageFail(fs, stderr)("%v", err)
	}
	return metaRun(name, *sf.db, stderr, func(db *engine.DB) error {
		return run(db, f, sel)
	})
}
