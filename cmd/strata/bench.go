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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stratadb/strata/bench"
)

func init() {
	commands["bench"] = command{
		summary: "run the insert baseline, scale sweeps or a mixed workload: strata vs SQLite, LevelDB, Pebble, Prometheus",
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
		"Insert the same deterministic IoT dataset into strata, SQLite, LevelDB, Pebble and\n"+
		"Prometheus TSDB (and memlimit, an in-memory line, and strata-http, strata behind\n"+
		"strata serve's /api/v2/write), each engine and run in a fresh\n"+
		"directory and process, then time three queries and check that every engine returns\n"+
		"the same answers. Prints a Markdown table.\n\n"+
		"--scale points|series sweeps the data size or the series count instead; --mixed\n"+
		"runs writers and readers together for --duration. A flag of one mode is refused by\n"+
		"the others.\n\n"+
		"Exit status: 0 done, 1 an engine returned a wrong query answer, 2 failure or bad usage.\n\n"+
		"example:\n  strata bench --engines strata,sqlite --runs 1", stderr)
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
	shape := fs.String("shape", "iot", "dataset: iot (devices x timestamps), sonnetdb (one series) or wide (1,000 devices x 30 fields x 12 timestamps unless --points, --devices, --fields say otherwise)")
	scale := fs.String("scale", "", "sweep instead of the baseline: points (1M, 10M, 100M points at 1,000 series) or series (1k to 1M series, 10 points each, 3 at 1M)")
	sizes := fs.String("sizes", "", "with --scale: the sizes to sweep instead of the defaults, as points/series pairs, e.g. 1000000/1000,10000000/1000")
	limit := fs.Duration("limit", bench.DefaultScaleLimit, "with --scale: the time one engine may take for one size (insert and queries); it runs no larger size after")
	mixed := fs.Bool("mixed", false, "run the mixed workload instead: a writer at --share of each engine's peak rate while readers run the three queries")
	duration := fs.Duration("duration", bench.DefaultMixedDuration, "with --mixed: how long the writer and readers run (e.g. 30m for steady state, compaction running)")
	share := fs.Float64("share", 0.8, "with --mixed: the writer's rate as a share of the engine's peak rate, in (0, 1]")
	readers := fs.Int("readers", 2, "with --mixed: reader goroutines")
	calib := fs.Duration("calibrate", 0, "with --mixed: how long the unthrottled insert that measures the peak rate runs (default: a third of --duration, 2s to 30s)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata bench: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The flags of one mode, given to another, would be ignored.
	notFor := func(mode string, names ...string) (string, bool) {
		for _, n := range names {
			if set[n] {
				return fmt.Sprintf("--%s does not apply to %s", n, mode), true
			}
		}
		return "", false
	}
	switch {
	case *scale != "" && *mixed:
		return usageErr("--scale and --mixed are exclusive")
	case *scale != "":
		if msg, bad := notFor("--scale (give its sizes with --sizes)", "points", "devices", "fields", "shape", "runs",
			"duration", "share", "readers", "calibrate"); bad {
			return usageErr("%s", msg)
		}
	case *mixed:
		if msg, bad := notFor("--mixed", "runs", "limit", "sizes", "queries"); bad {
			return usageErr("%s", msg)
		}
	default:
		for _, n := range []string{"duration", "share", "readers", "calibrate"} {
			if set[n] {
				return usageErr("--%s needs --mixed", n)
			}
		}
		for _, n := range []string{"limit", "sizes"} {
			if set[n] {
				return usageErr("--%s needs --scale", n)
			}
		}
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
	if !slices.Contains(bench.Shapes(), o.Shape) {
		return usageErr("--shape must be iot, sonnetdb or wide, not %q", *shape)
	}
	if o.Shape == bench.ShapeWide {
		// The wide shape's own sizes, unless given.
		if !set["points"] {
			o.Points = bench.WidePoints
		}
		if !set["devices"] {
			o.Devices = bench.WideDevices
		}
		if !set["fields"] {
			o.Fields = bench.WideFields
		}
	}
	if o.Shape != bench.ShapeSonnetDB && o.Points%o.Devices != 0 {
		return usageErr("--points (%d) must be a multiple of --devices (%d)", o.Points, o.Devices)
	}
	if *limit <= 0 {
		return usageErr("--limit must be positive")
	}
	if *scale != "" {
		so := bench.ScaleOptions{Kind: bench.ScaleKind(*scale), Engines: o.Engines, Batch: o.Batch, Limit: *limit,
			Dir: o.Dir, Child: child, SkipQueries: o.SkipQueries}
		if so.Kind != bench.ScalePoints && so.Kind != bench.ScaleSeries {
			return usageErr("--scale must be points or series, not %q", *scale)
		}
		if set["durability"] {
			if len(o.Durabilities) != 1 {
				return usageErr("--scale runs one durability: --durability fast or durable")
			}
			so.Durability = o.Durabilities[0]
		}
		if set["config"] {
			if len(o.Configs) != 1 {
				return usageErr("--scale runs one configuration: --config default or equal-memory")
			}
			so.Config = o.Configs[0]
		}
		if *sizes != "" {
			var err error
			if so.Sizes, err = parseSizes(*sizes); err != nil {
				return usageErr("--sizes: %v", err)
			}
		}
		return scaleMain(ctx, so, stdout, stderr, *jsonFile, *csvFile, *svgFile)
	}
	if *sizes != "" {
		return usageErr("--sizes needs --scale")
	}
	if *mixed {
		// !(in range) rather than out of range, so that NaN is refused.
		if *duration <= 0 || !(*share > 0 && *share <= 1) || *readers <= 0 || *calib < 0 {
			return usageErr("--duration and --readers must be positive, --share in (0, 1]")
		}
		if o.Shape != bench.ShapeIoT || set["points"] || set["fields"] {
			return usageErr("--mixed writes the endless IoT stream: no --shape, --points or --fields")
		}
		if o.Batch%o.Devices != 0 {
			return usageErr("--mixed: --batch (%d) must be a multiple of --devices (%d)", o.Batch, o.Devices)
		}
		mo := bench.MixedOptions{Engines: o.Engines, Duration: *duration, Share: *share, Readers: *readers,
			Calibrate: *calib, Devices: o.Devices, Batch: o.Batch, Dir: o.Dir, Child: child}
		if len(o.Durabilities) == 1 {
			mo.Durability = o.Durabilities[0]
		} else if set["durability"] {
			return usageErr("--mixed runs one durability: --durability fast or durable")
		}
		if len(o.Configs) == 1 {
			mo.Config = o.Configs[0]
		} else if set["config"] {
			return usageErr("--mixed runs one configuration: --config default or equal-memory")
		}
		prog := newBenchProgress(stderr)
		mo.Progress = prog.event
		rep, err := bench.RunMixed(ctx, mo)
		prog.stop()
		if rep != nil {
			if werr := writeAll(stdout, rep.WriteMarkdown, *jsonFile, rep.WriteJSON, *csvFile, rep.WriteCSV, *svgFile, rep.WriteSVG); werr != nil {
				fmt.Fprintln(stderr, "strata bench:", werr)
				if err == nil {
					return 2
				}
			}
		}
		return exitCode(err, stderr)
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
	return exitCode(err, stderr)
}

// parseSizes parses "points/series,points/series,...".
func parseSizes(s string) ([]bench.ScaleSize, error) {
	var out []bench.ScaleSize
	for part := range strings.SplitSeq(s, ",") {
		p, d, ok := strings.Cut(strings.TrimSpace(part), "/")
		points, err1 := strconv.Atoi(p)
		devices, err2 := strconv.Atoi(d)
		if !ok || err1 != nil || err2 != nil || points <= 0 || devices <= 0 || points%devices != 0 {
			return nil, fmt.Errorf("%q is not points/series with points a positive multiple of series", part)
		}
		out = append(out, bench.ScaleSize{Points: points, Devices: devices})
	}
	return out, nil
}

// scaleMain runs a sweep and writes its table and files.
func scaleMain(ctx context.Context, so bench.ScaleOptions, stdout, stderr io.Writer, jsonFile, csvFile, svgFile string) int {
	prog := newBenchProgress(stderr)
	so.Progress = prog.event
	rep, err := bench.RunScale(ctx, so)
	prog.stop()
	if rep != nil {
		if werr := writeAll(stdout, rep.WriteMarkdown, jsonFile, rep.WriteJSON, csvFile, rep.WriteCSV, svgFile, rep.WriteSVG); werr != nil {
			fmt.Fprintln(stderr, "strata bench:", werr)
			if err == nil {
				return 2
			}
		}
	}
	return exitCode(err, stderr)
}

// exitCode reports err and returns the command's exit status: 1 for a
// wrong query answer, 2 for any other error.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "strata bench:", err)
	if errors.Is(err, bench.ErrMismatch) {
		return 1
	}
	return 2
}

func writeReports(rep *bench.Report, stdout io.Writer, jsonFile, csvFile, svgFile string) error {
	return writeAll(stdout, rep.WriteMarkdown, jsonFile, rep.WriteJSON, csvFile, rep.WriteCSV, svgFile, rep.WriteSVG)
}

type writer = func(io.Writer) error

// writeAll prints the table on stdout and writes the files that are named.
func writeAll(stdout io.Writer, md writer, jsonFile string, js writer, csvFile string, cs writer, svgFile string, svg writer) error {
	if err := md(stdout); err != nil {
		return err
	}
	for _, f := range []struct {
		path  string
		write writer
	}{{jsonFile, js}, {csvFile, cs}, {svgFile, svg}} {
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
			desc := ev.Label()
			if ev.Mixed {
				desc += ": calibrating, then seconds"
			}
			p.bar = progressbar.NewOptions64(int64(ev.Total),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
	case bench.PhaseInsert:
		if p.bar != nil {
			p.bar.Set64(int64(ev.Done))
		} else if ev.Mixed && ev.Done%60 == 0 {
			// A long mixed run logs a line a minute where no bar shows.
			fmt.Fprintf(p.w, "%s: %d of %d s\n", ev.Label(), ev.Done, ev.Total)
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
		if ev.Mixed {
			fmt.Fprintf(p.w, "%s: done (%d s)\n", ev.Label(), ev.Total)
			return
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
