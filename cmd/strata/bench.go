package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stratadb/strata/bench"
)

func init() {
	commands["bench"] = command{
		summary: "run the 1M-point IoT insert baseline: strata vs SQLite, LevelDB, Pebble",
		run:     runBench,
	}
}

// runBench is the bench command. A process started by the bench itself for
// one job (bench.ChildEnv set) runs that job instead.
func runBench(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv(bench.ChildEnv) == "1" {
		if err := bench.RunChild(ctx, os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata bench:", err)
		return 2
	}
	return benchMain(ctx, args, []string{exe, "bench"}, os.Stdout, os.Stderr)
}

// benchMain parses the flags, runs the bench with child as the command line
// of each job's process, prints the table on stdout and writes the files.
// It returns 0 on success, 1 when an engine returned a wrong query result
// and 2 on any other error.
func benchMain(ctx context.Context, args, child []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench", "usage: strata bench [flags]\n\n"+
		"Insert the same deterministic IoT dataset into strata, SQLite, LevelDB and Pebble,\n"+
		"each engine and run in a fresh directory and process, then time three queries and\n"+
		"check that every engine returns the same answers. Prints a Markdown table.", stderr)
	points := fs.Int("points", 1_000_000, "points to insert (a multiple of --devices)")
	devices := fs.Int("devices", 1000, "devices, one series per field each (shape iot)")
	batch := fs.Int("batch", 10_000, "points per write call")
	runs := fs.Int("runs", 3, "runs per engine, config and durability; figures are medians")
	engines := fs.String("engines", strings.Join(bench.Engines(), ","), "comma-separated engines")
	durability := fs.String("durability", "both", "fast (no fsync per batch), durable (fsync per batch) or both")
	config := fs.String("config", "both", "default (library defaults), equal-memory (64 MiB each) or both")
	dir := fs.String("dir", "", "scratch directory (default: the system's temp dir); removed afterwards")
	jsonFile := fs.String("json", "", "write the results as JSON to this file")
	csvFile := fs.String("csv", "", "write the results as CSV to this file")
	svgFile := fs.String("svg", "", "draw bar charts of points/s and bytes/point to this SVG file")
	queries := fs.Bool("queries", true, "time and cross-check the point, range and aggregate queries")
	fields := fs.Int("fields", 1, "float fields per point (temperature, temperature2, ...)")
	shape := fs.String("shape", "iot", "dataset: iot (devices x timestamps) or sonnetdb (one series)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata bench: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	o := bench.Options{
		Points: *points, Devices: *devices, Batch: *batch, Runs: *runs, Fields: *fields,
		Shape: bench.Shape(*shape), Dir: *dir, SkipQueries: !*queries, Child: child,
	}
	if *points <= 0 || *devices <= 0 || *batch <= 0 || *runs <= 0 || *fields <= 0 {
		return usageErr("--points, --devices, --batch, --runs and --fields must be positive")
	}
	for e := range strings.SplitSeq(*engines, ",") {
		e = strings.TrimSpace(e)
		if !slices.Contains(bench.Engines(), e) {
			return usageErr("unknown engine %q (known: %s)", e, strings.Join(bench.Engines(), ", "))
		}
		if !slices.Contains(o.Engines, e) {
			o.Engines = append(o.Engines, e)
		}
	}
	switch *durability {
	case "both":
	case string(bench.Fast), string(bench.Durable):
		o.Durabilities = []bench.Durability{bench.Durability(*durability)}
	default:
		return usageErr("--durability must be fast, durable or both, not %q", *durability)
	}
	switch *config {
	case "both":
	case string(bench.ConfigDefault), string(bench.ConfigEqualMemory):
		o.Configs = []bench.Config{bench.Config(*config)}
	default:
		return usageErr("--config must be default, equal-memory or both, not %q", *config)
	}
	if o.Shape != bench.ShapeIoT && o.Shape != bench.ShapeSonnetDB {
		return usageErr("--shape must be iot or sonnetdb, not %q", *shape)
	}
	if o.Shape == bench.ShapeIoT && *points%*devices != 0 {
		return usageErr("--points (%d) must be a multiple of --devices (%d)", *points, *devices)
	}

	prog := newBenchProgress(stderr)
	o.Progress = prog.event
	rep, err := bench.Run(ctx, o)
	prog.stop()
	if rep != nil {
		if werr := writeReports(rep, stdout, *jsonFile, *csvFile, *svgFile); werr != nil {
			fmt.Fprintln(stderr, "strata bench:", werr)
			if err == nil {
				return 2
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "strata bench:", err)
		if errors.Is(err, bench.ErrMismatch) {
			return 1
		}
		return 2
	}
	return 0
}

func writeReports(rep *bench.Report, stdout io.Writer, jsonFile, csvFile, svgFile string) error {
	if err := rep.WriteMarkdown(stdout); err != nil {
		return err
	}
	for _, f := range []struct {
		path  string
		write func(io.Writer) error
	}{{jsonFile, rep.WriteJSON}, {csvFile, rep.WriteCSV}, {svgFile, rep.WriteSVG}} {
		if f.path == "" {
			continue
		}
		if err := writeFile(f.path, f.write); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchProgress shows a progress bar per job on a terminal and one plain
// line per finished job otherwise.
type benchProgress struct {
	w   io.Writer
	tty bool
	bar *progressbar.ProgressBar
}

func newBenchProgress(w io.Writer) *benchProgress {
	p := &benchProgress{w: w}
	if f, ok := w.(*os.File); ok {
		p.tty = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *benchProgress) event(ev bench.Event) {
	switch ev.Phase {
	case bench.PhaseStart:
		if p.tty {
			p.bar = progressbar.NewOptions64(int64(ev.Total),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(ev.Label()),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
	case bench.PhaseInsert:
		if p.bar != nil {
			p.bar.Set64(int64(ev.Done))
		}
	case bench.PhaseQueries:
		if p.bar != nil {
			p.bar.Describe(ev.Label() + ": queries")
		}
	case bench.PhaseDone:
		if p.bar != nil {
			p.bar.Finish()
			p.bar = nil
		}
		secs := ev.Insert.Seconds()
		fmt.Fprintf(p.w, "%s: %d points in %.2fs (%.0f points/s)\n", ev.Label(), ev.Total, secs, float64(ev.Total)/secs)
	}
}

// stop leaves the terminal tidy after a failed job.
func (p *benchProgress) stop() {
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}
