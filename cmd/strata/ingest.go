package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

func init() {
	commands["ingest"] = command{
		summary: "write InfluxDB line protocol from a file or stdin into a database",
		run:     runIngest,
	}
}

// *engine.DB is what lineproto writes to.
var _ lineproto.DB = (*engine.DB)(nil)

// ingestShowRejected is how many rejected lines the summary lists.
const ingestShowRejected = 10

func runIngest(args []string) int {
	return ingestSignals(args, os.Stdin, os.Stdout, os.Stderr)
}

// ingestSignals runs the ingest command until its input ends or SIGINT or
// SIGTERM arrives. The first signal stops the ingest: what was read is
// written and the database closed. A second one, while that is under way,
// kills the process as usual.
func ingestSignals(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore the default action for a second signal
	}()
	return ingestMain(ctx, args, stdin, stdout, stderr)
}

// Exit statuses of the ingest command.
const (
	ingestOK          = 0 // every line written
	ingestRejected    = 1 // some lines rejected, the rest written
	ingestFailed      = 2 // bad usage, a file or database that cannot be opened, I/O or database error
	ingestInterrupted = 3 // a FILE ingest stopped by SIGINT/SIGTERM before the end of the file
)

// ingestMain is the ingest command. It prints the summary on stdout and
// returns one of the ingest exit statuses. Cancelling ctx (a signal) stops
// the ingest: every line read is written and the summary printed; an
// ingest of a FILE that had not been read to its end then exits
// ingestInterrupted, so that a script can tell it from a complete one. On
// stdin a signal is the usual way to end, and the status is that of the
// lines read.
func ingestMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("ingest", "usage: strata ingest --db DIR [flags] [FILE|-]\n\n"+
		"Write the InfluxDB line protocol in FILE (or stdin, for - or no FILE) into the database\n"+
		"in DIR, creating it if missing. Valid lines are written, invalid ones reported with their\n"+
		"line numbers. Lines are written in batches, and after --linger when the input is idle.\n"+
		"SIGINT or SIGTERM stops the ingest: every complete line read is written first.\n"+
		"Exit status: 0 all lines written, 1 some lines rejected, 2 failure or bad usage, 3 a FILE ingest\n"+
		"interrupted by SIGINT or SIGTERM before the end of the file (what was read is written;\n"+
		"on stdin a signal ends the input and the status is that of the lines read).\n"+
		"Memory is bounded: the rejected lines are counted and the first 10 kept, and the Go\n"+
		"heap has a soft limit (GOMEMLIMIT, when set, replaces it).\n\n"+
		"example:\n  strata ingest --db ./data --precision s metrics.lp", stderr)
	dir := fs.String("db", "", "database directory (required)")
	precision := fs.String("precision", "ns", "unit of the timestamps: ns, us, ms or s")
	batch := fs.Int("batch", lineproto.DefaultBatchSize, "points per write")
	linger := fs.Duration("linger", lineproto.DefaultLinger, "longest a line read waits for its batch to fill before it is written")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	if *dir == "" {
		return usageErr("--db is required")
	}
	prec, err := lineproto.ParsePrecision(*precision)
	if err != nil {
		return usageErr("--precision must be ns, us, ms or s, not %q", *precision)
	}
	if *batch <= 0 {
		return usageErr("--batch must be positive")
	}
	if *linger <= 0 {
		return usageErr("--linger must be positive")
	}
	if fs.NArg() > 1 {
		return usageErr("unexpected argument %q", fs.Arg(1))
	}
	fail := failWith(stderr, "ingest", 2)

	name, in, size := "stdin", stdin, int64(-1)
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		name, in = fs.Arg(0), f
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
	}
	db, err := engine.Open(*dir, nil)
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", *dir, err))
	}
	defer setIngestMemoryLimit(nil)()

	start := time.Now()
	prog := newIngestProgress(stderr, in, size)
	res, err := lineproto.Write(ctx, db, prog, lineproto.Options{
		Precision:    prec,
		BatchSize:    *batch,
		Linger:       *linger,
		MaxRejected:  ingestShowRejected,
		MaxLineBytes: lpMaxLineBytes,
	})
	prog.finish()
	elapsed := time.Since(start)
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if interrupted {
		err = nil
	}
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", *dir, cerr)
	}

	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(res.Lines) / s
	}
	fmt.Fprintf(stdout, "%s: %d lines, %d points written, %d rejected in %v (%.0f lines/s)\n",
		name, res.Lines, res.Points, res.RejectedCount, elapsed.Round(time.Millisecond), rate)
	if n := res.RejectedCount; n > 0 {
		if n > len(res.Rejected) {
			fmt.Fprintf(stdout, "first %d of %d rejected lines:\n", len(res.Rejected), n)
		} else {
			fmt.Fprintln(stdout, "rejected lines:")
		}
		for _, le := range res.Rejected {
			fmt.Fprintf(stdout, "  %v\n", le)
		}
	}
	if interrupted {
		fmt.Fprintf(stderr, "strata ingest: interrupted: stopped reading %s; every complete line read was written\n", name)
	}
	if err != nil {
		return fail(err)
	}
	if interrupted && name != "stdin" {
		return ingestInterrupted
	}
	if res.RejectedCount > 0 {
		return ingestRejected
	}
	return ingestOK
}

// setIngestMemoryLimit gives the process a soft heap limit for an ingest
// (unless GOMEMLIMIT sets one): what the engine may hold by design (the
// active and the immutable memtables) plus room for the input's buffers
// and the garbage of rejected lines. The collector then runs when the heap
// nears it whatever CPU the machine has to spare, so the ingest's memory is
// bounded by construction, not by how fast the collector keeps up. opts nil
// means the engine's defaults. It returns a function restoring the limit.
func setIngestMemoryLimit(opts *engine.Options) func() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	o := opts.Clone()
	o.EnsureDefaults()
	limit := o.MemTableBytes*int64(o.MaxImmutableMemTables+1) + ingestHeapSlack
	old := debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(old) }
}

// ingestHeapSlack is the heap an ingest may use beyond the memtables.
const ingestHeapSlack = 64 << 20

// ingestProgress reads the input and, when stderr is a terminal, shows a
// progress bar of the bytes read with the lines per second. Read may still
// run after an interrupted ingest returned (lineproto does not wait for a
// Read that blocks), hence the lock.
type ingestProgress struct {
	r     io.Reader
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	start time.Time
	last  time.Time // last description update
	lines int64     // newlines read
}

func newIngestProgress(stderr io.Writer, r io.Reader, size int64) *ingestProgress {
	p := &ingestProgress{r: r, start: time.Now()}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("ingest"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *ingestProgress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && n > 0 {
		p.lines += int64(bytes.Count(b[:n], []byte{'\n'}))
		if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
			p.last = now
			p.bar.Describe(fmt.Sprintf("%d lines, %.0f lines/s", p.lines, float64(p.lines)/now.Sub(p.start).Seconds()))
		}
		p.bar.Add(n)
	}
	return n, err
}

func (p *ingestProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}
