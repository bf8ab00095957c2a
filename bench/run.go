package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure Run. The zero value runs the default baseline.
type Options struct {
	Points  int   // points to insert; default 1,000,000; a multiple of Devices
	Devices int   // devices (series per field) for ShapeIoT; default 1000
	Batch   int   // points per write call; default 10,000
	Runs    int   // runs per engine, configuration and durability; default 3
	Fields  int   // float fields per point; default 1
	Shape   Shape // default ShapeIoT; ShapeSonnetDB ignores Devices; ShapeWide defaults to 12,000 points of 1,000 devices and 30 fields

	Engines      []string     // default Engines()
	Durabilities []Durability // default Fast and Durable
	Configs      []Config     // default ConfigDefault and ConfigEqualMemory

	// Dir is where the scratch directory is made; default os.TempDir().
	// The scratch directory is removed when Run returns.
	Dir string
	// SkipQueries skips the timed queries after the insert.
	SkipQueries bool

	// Child, when set, is the command line of a process that runs one job:
	// Run starts it with ChildEnv=1 in its environment, writes the job to
	// its stdin, and it must call RunChild. Each job then runs in a fresh
	// process, so its peak RSS and allocations are its engine's alone.
	// When nil, jobs run in this process.
	Child []string

	// Progress, when set, receives events as jobs progress, from one
	// goroutine at a time.
	Progress func(Event)
}

// ChildEnv is the environment variable that tells a process started by Run
// to call RunChild.
const ChildEnv = "STRATA_BENCH_CHILD"

func (o *Options) ensureDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if o.Shape == "" {
		o.Shape = ShapeIoT
	}
	if o.Shape == ShapeWide {
		def(&o.Points, WidePoints)
		def(&o.Devices, WideDevices)
		def(&o.Fields, WideFields)
	}
	def(&o.Points, 1_000_000)
	def(&o.Devices, 1000)
	def(&o.Batch, 10_000)
	def(&o.Runs, 3)
	def(&o.Fields, 1)
	if o.Shape == ShapeSonnetDB {
		o.Devices = 1
	}
	if len(o.Engines) == 0 {
		o.Engines = Engines()
	}
	if len(o.Durabilities) == 0 {
		o.Durabilities = []Durability{Fast, Durable}
	}
	if len(o.Configs) == 0 {
		o.Configs = []Config{ConfigDefault, ConfigEqualMemory}
	}
}

func (o *Options) validate() error {
	if o.Batch < 0 || o.Runs < 0 {
		return fmt.Errorf("bench: batch and runs must be positive")
	}
	for _, e := range o.Engines {
		if _, err := lookup(e); err != nil {
			return err
		}
	}
	for _, d := range o.Durabilities {
		if d != Fast && d != Durable {
			return fmt.Errorf("bench: unknown durability %q (want fast or durable)", d)
		}
	}
	for _, c := range o.Configs {
		if c != ConfigDefault && c != ConfigEqualMemory {
			return fmt.Errorf("bench: unknown config %q (want default or equal-memory)", c)
		}
	}
	if !slices.Contains(Shapes(), o.Shape) {
		return fmt.Errorf("bench: unknown shape %q (want iot, sonnetdb or wide)", o.Shape)
	}
	return checkSize(o.Points, o.Devices, o.Fields)
}

// Phase is the stage of a job an Event reports.
type Phase string

const (
	PhaseStart   Phase = "start"   // the job is starting; Total is known
	PhaseInsert  Phase = "insert"  // Done points were written
	PhaseQueries Phase = "queries" // the insert is done; queries are running
	PhaseDone    Phase = "done"    // the job finished; Insert is its time
)

// Event reports the progress of one job: one engine, configuration,
// durability and run.
type Event struct {
	Engine     string
	Config     Config
	Durability Durability
	Run, Runs  int
	Phase      Phase
	Done       int           // points written so far
	Total      int           // points to write
	Insert     time.Duration // for PhaseDone: the insert's wall time
	// Devices is the series count of a sweep's size; 0 outside sweeps,
	// where Run counts the runs. In a sweep, Run counts the sizes.
	Devices int
	// Mixed marks the mixed workload: Run counts the engines, Done and
	// Total are seconds of the mixed phase.
	Mixed bool
}

// Label names the job, e.g. "sqlite default/fast run 1/3", or in a sweep
// "sqlite default/fast size 2/3 (10,000,000 points, 1,000 series)".
func (e Event) Label() string {
	if e.Mixed {
		return fmt.Sprintf("%s %s/%s mixed (engine %d/%d)", e.Engine, e.Config, e.Durability, e.Run, e.Runs)
	}
	if e.Devices > 0 {
		return fmt.Sprintf("%s %s/%s size %d/%d (%s points, %s series)", e.Engine, e.Config, e.Durability,
			e.Run, e.Runs, thousands(float64(e.Total)), thousands(float64(e.Devices)))
	}
	return fmt.Sprintf("%s %s/%s run %d/%d", e.Engine, e.Config, e.Durability, e.Run, e.Runs)
}

// job is one engine, configuration, durability and run: what a child
// process receives as JSON.
type job struct {
	Engine     string     `json:"engine"`
	Config     Config     `json:"config"`
	Durability Durability `json:"durability"`
	Shape      Shape      `json:"shape"`
	Points     int        `json:"points"`
	Devices    int        `json:"devices"`
	Fields     int        `json:"fields"`
	Batch      int        `json:"batch"`
	Dir        string     `json:"dir"`
	Queries    bool       `json:"queries"`
	Mixed      *mixedJob  `json:"mixed,omitempty"` // a mixed workload instead of the insert
}

// jobResult is what a job measured: what a child process returns as JSON.
type jobResult struct {
	InsertNS   int64         `json:"insert_ns"`
	AllocBytes uint64        `json:"alloc_bytes"`
	PeakRSS    int64         `json:"peak_rss_bytes"`
	DiskBytes  int64         `json:"disk_bytes"`
	Queries    []queryResult `json:"queries"`
	Mixed      *mixedResult  `json:"mixed,omitempty"`
}

type queryResult struct {
	Name     string `json:"name"`
	NS       int64  `json:"ns"`
	Digest   Digest `json:"digest"`
	Mismatch string `json:"mismatch,omitempty"` // the first row that differs from the dataset
}

// Run inserts the dataset into every selected engine, configuration and
// durability, Runs times each, times the queries and checks their results
// against the dataset. It returns the report and, when some engine returned
// a wrong query result, an error matching ErrMismatch (one *CheckError per
// engine, configuration, durability and query, joined) along with the
// report. Any other failure stops Run and returns a nil report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.ensureDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	ds, err := NewDataset(o.Shape, o.Points, o.Devices, o.Fields)
	if err != nil {
		return nil, err
	}
	want, err := references(ds, !o.SkipQueries)
	if err != nil {
		return nil, err
	}
	scratch, err := scratchDir(o.Dir, "strata-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)

	type cell struct {
		engine string
		cfg    Config
		dur    Durability
	}
	measured := map[cell][]jobResult{}
	var mismatches []error
	type failure struct {
		cell
		query string
	}
	seen := map[failure]bool{}
	for run := 1; run <= o.Runs; run++ {
		for _, cfg := range o.Configs {
			for _, dur := range o.Durabilities {
				for _, eng := range o.Engines {
					if !Supports(eng, cfg, dur) {
						continue
					}
					ev := Event{Engine: eng, Config: cfg, Durability: dur, Run: run, Runs: o.Runs, Total: ds.Len()}
					j := job{
						Engine: eng, Config: cfg, Durability: dur,
						Shape: o.Shape, Points: o.Points, Devices: o.Devices, Fields: o.Fields, Batch: o.Batch,
						Dir:     filepath.Join(scratch, fmt.Sprintf("%s-%s-%s-%d", eng, cfg, dur, run)),
						Queries: !o.SkipQueries,
					}
					res, err := o.runJob(ctx, j, ev)
					os.RemoveAll(j.Dir)
					forgetMem(j.Dir)
					if err != nil {
						return nil, fmt.Errorf("bench: %s: %w", ev.Label(), err)
					}
					c := cell{eng, cfg, dur}
					measured[c] = append(measured[c], res)
					for _, ce := range checkJob(res, want, ev) {
						// One error per engine, mode and query, from its first run.
						if k := (failure{c, ce.Query}); !seen[k] {
							seen[k] = true
							mismatches = append(mismatches, ce)
						}
					}
				}
			}
		}
	}

	rep := &Report{
		Machine: CurrentMachine(), // at the end: its load average covers the run
		Dataset: DatasetInfo{Points: ds.Len(), Devices: ds.Devices, Batch: o.Batch, Shape: o.Shape, Fields: o.Fields},
	}
	for _, cfg := range o.Configs {
		for _, dur := range o.Durabilities {
			for _, eng := range o.Engines {
				if !Supports(eng, cfg, dur) {
					continue
				}
				rep.Results = append(rep.Results, summarize(eng, cfg, dur, ds.Len(), !o.SkipQueries, measured[cell{eng, cfg, dur}]))
			}
		}
	}
	rep.computeRatios()
	return rep, errors.Join(mismatches...)
}

// checkJob compares a job's query digests with the reference.
func checkJob(res jobResult, want map[string]Digest, ev Event) []*CheckError {
	var errs []*CheckError
	got := map[string]queryResult{}
	for _, q := range res.Queries {
		got[q.Name] = q
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		w := want[name]
		ce := &CheckError{Engine: ev.Engine, Config: ev.Config, Durability: ev.Durability, Run: ev.Run, Query: name, Want: w}
		q, ok := got[name]
		if !ok {
			ce.Reason = "no result"
			errs = append(errs, ce)
			continue
		}
		ce.Got = q.Digest
		if ce.Reason = q.Mismatch; ce.Reason == "" {
			ce.Reason = compare(q.Digest, w, name != QueryAgg)
		}
		if ce.Reason != "" {
			errs = append(errs, ce)
		}
	}
	return errs
}

func (o *Options) runJob(ctx context.Context, j job, ev Event) (jobResult, error) {
	emit := func(phase Phase, done int) {
		if o.Progress != nil {
			ev.Phase, ev.Done = phase, done
			o.Progress(ev)
		}
	}
	emit(PhaseStart, 0)
	var res jobResult
	var err error
	if o.Child == nil {
		res, err = execute(ctx, j, emit)
	} else {
		res, err = runChild(ctx, o.Child, j, emit)
	}
	if err == nil && o.Progress != nil {
		ev.Phase, ev.Done, ev.Insert = PhaseDone, ev.Total, time.Duration(res.InsertNS)
		o.Progress(ev)
	}
	return res, err
}

// progressPrefix starts the stderr lines by which a child reports progress.
const progressPrefix = "strata-bench-progress "

// runChild runs j in a fresh process started from argv.
func runChild(ctx context.Context, argv []string, j job, emit func(Phase, int)) (jobResult, error) {
	var res jobResult
	in, err := json.Marshal(j)
	if err != nil {
		return res, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return res, err
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start child: %w", err)
	}
	// Everything the child says on stderr that is not progress is kept for
	// the error message.
	var tail []string
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, progressPrefix); ok {
			phase, n, _ := strings.Cut(rest, " ")
			done, _ := strconv.Atoi(n)
			emit(Phase(phase), done)
			continue
		}
		if tail = append(tail, line); len(tail) > 20 {
			tail = tail[1:]
		}
	}
	io.Copy(io.Discard, stderr) // after a scanner error, let the child finish
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(strings.Join(tail, "\n"))
		if msg == "" {
			return res, fmt.Errorf("child: %w", err)
		}
		return res, fmt.Errorf("child: %w: %s", err, msg)
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return res, fmt.Errorf("child result: %w", err)
	}
	return res, nil
}

// RunChild runs one job described by the JSON on r, reports progress on
// progress and writes the result as JSON to w. A process started by Run
// (see Options.Child) must call it and exit non-zero when it fails.
func RunChild(ctx context.Context, r io.Reader, w, progress io.Writer) error {
	var j job
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("bench: read job: %w", err)
	}
	res, err := execute(ctx, j, func(phase Phase, done int) {
		fmt.Fprintf(progress, "%s%s %d\n", progressPrefix, phase, done)
	})
	if err != nil {
		return err // the parent names the job
	}
	return json.NewEncoder(w).Encode(res)
}

// execute runs a job in this process. The dataset is generated before the
// clock starts; the clock runs from before Open to after Close.
func execute(ctx context.Context, j job, emit func(Phase, int)) (jobResult, error) {
	if j.Mixed != nil {
		return executeMixed(ctx, j, emit)
	}
	var res jobResult
	open, err := lookup(j.Engine)
	if err != nil {
		return res, err
	}
	ds, err := NewDataset(j.Shape, j.Points, j.Devices, j.Fields)
	if err != nil {
		return res, err
	}
	// Start from a clean heap and, where the OS allows, a peak RSS reset to
	// the current RSS, so what follows is this insert's.
	debug.FreeOSMemory()
	resetPeakRSS()
	ins, err := insert(ctx, open, j.Dir, j.Config, j.Durability, ds, j.Batch, emit)
	if err != nil {
		return res, err
	}
	res.InsertNS, res.AllocBytes, res.PeakRSS = ins.elapsed.Nanoseconds(), ins.alloc, ins.peakRSS
	if res.DiskBytes, err = dirSize(j.Dir); err != nil {
		return res, err
	}
	if j.Queries {
		emit(PhaseQueries, ds.Len())
		if res.Queries, err = runQueries(ctx, open, j, ds); err != nil {
			return res, err
		}
	}
	return res, nil
}

type insertStats struct {
	elapsed time.Duration
	alloc   uint64 // Go heap bytes allocated
	peakRSS int64
}

// insert writes ds into a fresh database in dir and closes it. emit may be
// nil.
func insert(ctx context.Context, open opener, dir string, cfg Config, dur Durability, ds *Dataset, batch int, emit func(Phase, int)) (insertStats, error) {
	var st insertStats
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	db, err := open(dir, cfg, dur)
	if err != nil {
		return st, fmt.Errorf("open: %w", err)
	}
	done := 0
	write := db.write
	if p, ok := db.(pipeliner); ok {
		write = p.writeAsync
	}
	for b := range ds.Batches(batch) {
		if err := ctx.Err(); err != nil {
			db.close()
			return st, err
		}
		if err := write(b); err != nil {
			db.close()
			return st, fmt.Errorf("write batch at point %d: %w", done, err)
		}
		done += len(b)
		if emit != nil {
			emit(PhaseInsert, done)
		}
	}
	if err := db.close(); err != nil {
		return st, fmt.Errorf("close: %w", err)
	}
	st.elapsed = time.Since(start)
	runtime.ReadMemStats(&m1)
	st.alloc = m1.TotalAlloc - m0.TotalAlloc
	st.peakRSS = peakRSS()
	return st, nil
}

// runQueries reopens the database and times each query once.
func runQueries(ctx context.Context, open opener, j job, ds *Dataset) ([]queryResult, error) {
	db, err := open(j.Dir, j.Config, j.Durability)
	if err != nil {
		return nil, fmt.Errorf("reopen: %w", err)
	}
	var out []queryResult
	var rs resultSet
	for _, nq := range ds.Queries() {
		rs.reset()
		start := time.Now()
		err := db.query(ctx, nq.Query, &rs)
		elapsed := time.Since(start)
		if err != nil {
			db.close()
			return nil, fmt.Errorf("%s: %w", nq.Name, err)
		}
		out = append(out, queryResult{Name: nq.Name, NS: elapsed.Nanoseconds(), Digest: rs.digest(),
			Mismatch: ds.verify(nq.Query, &rs)})
	}
	if err := db.close(); err != nil {
		return nil, fmt.Errorf("close after queries: %w", err)
	}
	return out, nil
}

// dirSize returns the sum of the sizes of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage: %w", err)
	}
	return n, nil
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }
