package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/engine"
)

// MixedOptions configure RunMixed. The zero value of a field takes the
// default named beside it.
type MixedOptions struct {
	Engines    []string      // default Engines()
	Config     Config        // default ConfigDefault
	Durability Durability    // default Fast
	Duration   time.Duration // of the mixed phase; default DefaultMixedDuration
	// Share is the fraction of the engine's measured peak rate at which
	// the writer ingests; default 0.8.
	Share float64
	// Calibrate is how long the unthrottled insert that measures the
	// peak rate runs; default a third of Duration, at least 2 s, at most
	// 30 s.
	Calibrate time.Duration
	Readers   int // reader goroutines; default 2
	Devices   int // series; default 1000
	Batch     int // points per write; default 10,000
	Dir       string
	Child     []string
	// Progress receives PhaseStart, then PhaseInsert once a second with
	// Done the seconds elapsed of Total, then PhaseDone.
	Progress func(Event)
}

// DefaultMixedDuration is the default length of the mixed phase: short,
// for a first look; steady state needs minutes (--duration 30m).
const DefaultMixedDuration = 20 * time.Second

// mixedJob is the mixed part of a job sent to a child.
type mixedJob struct {
	DurationNS  int64   `json:"duration_ns"`
	CalibrateNS int64   `json:"calibrate_ns"`
	Share       float64 `json:"share"`
	Readers     int     `json:"readers"`
}

// MixedReport is the outcome of RunMixed.
type MixedReport struct {
	Machine     Machine       `json:"machine"`
	Config      Config        `json:"config"`
	Durability  Durability    `json:"durability"`
	Devices     int           `json:"devices"`
	Batch       int           `json:"batch"`
	Readers     int           `json:"readers"`
	Share       float64       `json:"share"`
	DurationSec float64       `json:"duration_sec"`
	CalibSec    float64       `json:"calibrate_sec"`
	Results     []MixedResult `json:"results"`
}

// Latency summarises the latencies of one kind of operation, in
// milliseconds: P50Ms and P99Ms to three significant digits (nearest rank,
// from a histogram of fixed size), MaxMs exact.
type Latency struct {
	Count int64   `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// MixedResult is one engine's mixed run.
type MixedResult struct {
	Engine string `json:"engine"`
	// PeakPointsPerSec is the unthrottled insert rate measured first, in a
	// directory of its own; TargetPointsPerSec is Share of it.
	PeakPointsPerSec     float64 `json:"peak_points_per_sec"`
	TargetPointsPerSec   float64 `json:"target_points_per_sec"`
	AchievedPointsPerSec float64 `json:"achieved_points_per_sec"`
	PointsWritten        int64   `json:"points_written"`
	// Write is the latency of the write calls; WriteLagMaxMs is how far
	// behind its schedule the writer fell at worst (a stalled write
	// delays every batch after it, which the call latency alone hides).
	Write         Latency `json:"write"`
	WriteLagMaxMs float64 `json:"write_lag_max_ms"`
	// WriteStalls counts write calls that took longer than a batch's
	// share of the schedule (Batch / TargetPointsPerSec): each put the
	// writer behind the target rate.
	WriteStalls int64 `json:"write_stalls"`
	// EngineWriteStalls is what the engine itself counts as stalled or
	// slowed writes (strata's Stats), nil where the engine does not say.
	EngineWriteStalls *int64 `json:"engine_write_stalls"`
	// Compactions is the number of compactions the engine ran during the
	// mixed phase, nil where the engine does not say (SQLite, LevelDB, the
	// floor).
	Compactions *int64 `json:"compactions"`
	// Queries holds the latency of each query, by name.
	Queries map[string]Latency `json:"queries"`
	// Throughput is points written and queries answered per second of the
	// mixed phase.
	Throughput   []ThroughputSample `json:"throughput"`
	DiskBytes    int64              `json:"disk_bytes"`
	PeakRSSBytes int64              `json:"peak_rss_bytes"`
	// Answers is the number of answers; every one's row and series counts
	// are checked as it comes, and AnswersCheckedInFull of them row by
	// row (through the digest) after the run: an evenly spread sample of
	// 2,000 to 4,000 point queries and 200 to 400 range scans and
	// aggregates each (all of them in a short run).
	Answers              int64 `json:"answers"`
	AnswersCheckedInFull int64 `json:"answers_checked_in_full"`
}

// ThroughputSample is one second of a mixed run. RSSBytes is the
// process' resident memory as the second ended (after the write that
// crossed into the next one; Linux only, 0 elsewhere): flat over a long
// run when the engine keeps to its budget.
type ThroughputSample struct {
	Second   int   `json:"second"`
	Points   int64 `json:"points"`
	Queries  int64 `json:"queries"`
	RSSBytes int64 `json:"rss_bytes"`
}

// mixedResult is what a mixed job returns: the figures and, when an
// answer was wrong, which and why.
type mixedResult struct {
	MixedResult
	MismatchQuery string `json:"mismatch_query,omitempty"`
	Mismatch      string `json:"mismatch,omitempty"`
}

// mixedAnswer is one query answered during the mixed phase: enough to
// recompute its reference after the run.
type mixedAnswer struct {
	name     string
	seq      int64 // the answer's rank among its query's answers
	device   int
	from, to int // steps, [from, to)
	digest   Digest
}

func (o *MixedOptions) ensureDefaults() {
	if len(o.Engines) == 0 {
		o.Engines = Engines()
	}
	if o.Config == "" {
		o.Config = ConfigDefault
	}
	if o.Durability == "" {
		o.Durability = Fast
	}
	if o.Duration <= 0 {
		o.Duration = DefaultMixedDuration
	}
	if o.Share <= 0 {
		o.Share = 0.8
	}
	if o.Calibrate <= 0 {
		o.Calibrate = min(max(o.Duration/3, 2*time.Second), 30*time.Second)
	}
	if o.Readers <= 0 {
		o.Readers = 2
	}
	if o.Devices <= 0 {
		o.Devices = 1000
	}
	if o.Batch <= 0 {
		o.Batch = 10_000
	}
}

// RunMixed runs the mixed workload on each engine in turn, in a fresh
// directory and (with Child) a fresh process: first an unthrottled insert
// for Calibrate measures the engine's peak rate, in a directory of its
// own; then, in a fresh directory, a writer ingests the endless stream at
// Share of that rate for Duration while Readers goroutines run the three
// queries in a loop over the latest data (the point query on the last 60 s
// of one device, the range scan on the last 600 s of all, the 1-minute
// means of all over the last 1,000 s). Every answer is checked against the
// stream after the run; a wrong one makes RunMixed return an error
// matching ErrMismatch along with the report.
func RunMixed(ctx context.Context, o MixedOptions) (*MixedReport, error) {
	o.ensureDefaults()
	if o.Share > 1 {
		return nil, fmt.Errorf("bench: share %v of the peak rate: want at most 1", o.Share)
	}
	if o.Batch%o.Devices != 0 {
		return nil, fmt.Errorf("bench: batch (%d) must be a multiple of devices (%d) in the mixed workload", o.Batch, o.Devices)
	}
	vo := Options{Engines: o.Engines, Configs: []Config{o.Config}, Durabilities: []Durability{o.Durability},
		Devices: o.Devices, Batch: o.Batch}
	vo.ensureDefaults()
	if err := vo.validate(); err != nil {
		return nil, err
	}
	scratch, err := scratchDir(o.Dir, "strata-bench-mixed-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	rep := &MixedReport{Config: o.Config, Durability: o.Durability, Devices: o.Devices,
		Batch: o.Batch, Readers: o.Readers, Share: o.Share, DurationSec: o.Duration.Seconds(), CalibSec: o.Calibrate.Seconds()}
	ro := Options{Child: o.Child, Progress: o.Progress}
	var mismatches []error
	for i, eng := range o.Engines {
		if !Supports(eng, o.Config, o.Durability) {
			continue
		}
		ev := Event{Engine: eng, Config: o.Config, Durability: o.Durability, Run: i + 1, Runs: len(o.Engines),
			Total: int(o.Duration.Seconds()), Mixed: true}
		j := job{Engine: eng, Config: o.Config, Durability: o.Durability, Shape: ShapeIoT, Devices: o.Devices,
			Points: o.Devices, Fields: 1, Batch: o.Batch, Dir: filepath.Join(scratch, eng),
			Mixed: &mixedJob{DurationNS: o.Duration.Nanoseconds(), CalibrateNS: o.Calibrate.Nanoseconds(),
				Share: o.Share, Readers: o.Readers}}
		res, err := ro.runJob(ctx, j, ev)
		os.RemoveAll(j.Dir)
		os.RemoveAll(j.Dir + "-calibrate")
		forgetMem(j.Dir)
		forgetMem(j.Dir + "-calibrate")
		if err != nil {
			return nil, fmt.Errorf("bench: %s mixed: %w", eng, err)
		}
		if res.Mixed == nil {
			return nil, fmt.Errorf("bench: %s mixed: no result", eng)
		}
		if res.Mixed.Mismatch != "" {
			mismatches = append(mismatches, &CheckError{Engine: eng, Config: o.Config, Durability: o.Durability,
				Run: 1, Query: res.Mixed.MismatchQuery, Reason: res.Mixed.Mismatch})
		}
		rep.Results = append(rep.Results, res.Mixed.MixedResult)
	}
	rep.Machine = CurrentMachine()
	return rep, errors.Join(mismatches...)
}

// mixedQueries returns the three queries over the stream once steps steps
// are written: the point query reads device dev over the last 60 s, the
// range scan every series over the last 600 s, the aggregate the 1-minute
// means of field 0 of every device over the last 1,000 s (each shorter
// while the stream is shorter).
func mixedQueries(dev, steps int) []mixedAnswer {
	return []mixedAnswer{
		{name: QueryPoint, device: dev, from: max(0, steps-60), to: steps},
		{name: QueryRange, from: max(0, steps-600), to: steps},
		{name: QueryAgg, from: max(0, steps-mixedWindow), to: steps},
	}
}

// mixedWindow is the widest window the mixed queries read, in steps back
// from the horizon: the aggregate's 1,000 s.
const mixedWindow = 1000

// query returns the engine query of an answer.
func (a *mixedAnswer) query(ds *Dataset) engine.Query {
	sel := engine.Selector{Measurement: ds.Measurement, Start: ds.Time(a.from), End: ds.Time(a.to)}
	switch a.name {
	case QueryPoint:
		sel.Field, sel.Tags = ds.Fields[0], ds.Tags(a.device)
		return engine.Query{Selector: sel}
	case QueryAgg:
		sel.Field = ds.Fields[0]
		return engine.Query{Selector: sel, Agg: engine.AggMean, Every: 60 * int64(time.Second)}
	}
	return engine.Query{Selector: sel}
}

// How many answers of a mixed run are checked row by row: an evenly
// spread sample of between fullChecks and twice as many of each query
// (fullPointChecks for the cheap point query), kept in bounded memory
// however long the run. The row and series counts of every answer are
// checked as it comes.
const (
	fullChecks      = 200
	fullPointChecks = 2000
)

// mixedAnswers collects the readers' answers in memory that does not grow
// with the run: the latency of each query, the first answer whose counts
// are wrong and a sample of the answers to check in full after the run.
// It is safe for concurrent use.
type mixedAnswers struct {
	ds       *Dataset
	mu       sync.Mutex
	lat      map[string]*latencyRecorder
	sample   map[string]*answerSample
	n        int64
	query    string // of the first answer whose counts are wrong
	mismatch string
}

func newMixedAnswers(ds *Dataset) *mixedAnswers {
	m := &mixedAnswers{ds: ds, lat: map[string]*latencyRecorder{}, sample: map[string]*answerSample{}}
	for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
		m.lat[name] = newLatencyRecorder()
		m.sample[name] = newAnswerSample(fullChecks)
	}
	m.sample[QueryPoint] = newAnswerSample(fullPointChecks)
	return m
}

// add records an answer and how long it took.
func (m *mixedAnswers) add(a mixedAnswer, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sample[a.name]
	a.seq = s.seen
	m.n++
	m.lat[a.name].record(d)
	if msg := countsMismatch(m.ds, &a); msg != "" && m.mismatch == "" {
		m.query, m.mismatch = a.name, msg
	}
	s.add(a)
}

// kept returns the sampled answers, query by query.
func (m *mixedAnswers) kept() []mixedAnswer {
	var out []mixedAnswer
	for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
		out = append(out, m.sample[name].kept...)
	}
	return out
}

// countsMismatch checks an answer's row and series counts against the
// stream: what a digest says without recomputing it. It returns what is
// wrong, or "".
func countsMismatch(ds *Dataset, a *mixedAnswer) string {
	rows, series := int64(a.to-a.from), int64(1)
	if a.name != QueryPoint {
		series = int64(ds.Devices)
		rows *= series
	}
	if a.name == QueryAgg {
		every := 60 * int64(time.Second)
		buckets := (bucket(ds.Time(a.to-1), every, 0)-bucket(ds.Time(a.from), every, 0))/every + 1
		rows = buckets * series
	}
	if a.digest.Rows != rows || a.digest.Series != series {
		return fmt.Sprintf("answer %d, steps [%d, %d): %d rows of %d series, want %d of %d",
			a.seq, a.from, a.to, a.digest.Rows, a.digest.Series, rows, series)
	}
	return ""
}

// checkMixed checks answers against the stream row by row (through the
// digest of the stream's own answer). It returns how many it checked and,
// for the first wrong answer, its query and what is wrong.
func checkMixed(ds *Dataset, answers []mixedAnswer) (full int64, query, mismatch string) {
	var rs resultSet
	for _, a := range answers {
		if msg := countsMismatch(ds, &a); msg != "" {
			return full, a.name, msg
		}
		rs.reset()
		if err := ds.reference(a.query(ds), &rs); err != nil {
			return full, a.name, err.Error()
		}
		if msg := compare(a.digest, rs.digest(), a.name != QueryAgg); msg != "" {
			return full, a.name, fmt.Sprintf("answer %d, steps [%d, %d): %s", a.seq, a.from, a.to, msg)
		}
		full++
	}
	return full, "", ""
}

// compactionCounter is implemented by the stores that can tell how many
// compactions their engine has run.
type compactionCounter interface{ compactions() (int64, bool) }

// stallCounter is implemented by the stores whose engine counts its own
// stalled writes.
type stallCounter interface{ writeStalls() int64 }

// executeMixed runs a mixed job in this process.
func executeMixed(ctx context.Context, j job, emit func(Phase, int)) (jobResult, error) {
	var res jobResult
	open, err := lookup(j.Engine)
	if err != nil {
		return res, err
	}
	m := j.Mixed
	ds, err := Stream(1<<40, j.Devices, 1)
	if err != nil {
		return res, err
	}
	// The peak rate: unthrottled, in a directory of its own.
	peak, err := calibrate(ctx, open, j, ds, time.Duration(m.CalibrateNS))
	if err != nil {
		return res, fmt.Errorf("calibrate: %w", err)
	}
	debug.FreeOSMemory()
	resetPeakRSS()
	mr, err := mixedRun(ctx, open, j, ds, peak, emit)
	if err != nil {
		return res, err
	}
	// The kernel updates VmHWM lazily, so a per-second sample of the
	// current RSS can exceed it: the peak is at least every sample.
	mr.PeakRSSBytes = peakRSS()
	for _, t := range mr.Throughput {
		mr.PeakRSSBytes = max(mr.PeakRSSBytes, t.RSSBytes)
	}
	if mr.DiskBytes, err = dirSize(j.Dir); err != nil {
		return res, err
	}
	// After Close, outside every figure.
	mr.AnswersCheckedInFull, mr.MismatchQuery, mr.Mismatch = checkMixed(ds, mr.answers.kept())
	if mr.answers.mismatch != "" { // the first wrong count, however late in the run
		mr.MismatchQuery, mr.Mismatch = mr.answers.query, mr.answers.mismatch
	}
	res.Mixed = &mr.mixedResult
	return res, nil
}

// calibrate writes the stream unthrottled for d into a fresh directory
// beside j.Dir and returns the rate from Open to the last write.
func calibrate(ctx context.Context, open opener, j job, ds *Dataset, d time.Duration) (float64, error) {
	dir := j.Dir + "-calibrate"
	defer os.RemoveAll(dir)
	defer forgetMem(dir)
	start := time.Now()
	db, err := open(dir, j.Config, j.Durability)
	if err != nil {
		return 0, fmt.Errorf("open: %w", err)
	}
	b := newStreamBatch(ds, j.Batch)
	trim := newTrim(db, ds)
	written := 0
	// At least a few batches, however short d or slow the Open.
	for written < 3*j.Batch || time.Since(start) < d {
		if err := ctx.Err(); err != nil {
			db.close()
			return 0, err
		}
		if err := db.write(b.next()); err != nil {
			db.close()
			return 0, fmt.Errorf("write: %w", err)
		}
		written += j.Batch
		trim.after(b.off/ds.Devices, nil)
	}
	rate := float64(written) / time.Since(start).Seconds()
	if err := db.close(); err != nil {
		return 0, fmt.Errorf("close: %w", err)
	}
	return rate, nil
}

// streamBatch yields the stream's batches in order from step 0.
type streamBatch struct {
	ds  *Dataset
	buf []engine.Point
	off int
}

func newStreamBatch(ds *Dataset, size int) *streamBatch {
	b := &streamBatch{ds: ds, buf: make([]engine.Point, size)}
	fields := make([]engine.Field, size*len(ds.Fields))
	for k := range b.buf {
		b.buf[k].Fields = fields[k*len(ds.Fields) : (k+1)*len(ds.Fields)]
	}
	return b
}

func (b *streamBatch) next() []engine.Point {
	for k := range b.buf {
		b.ds.fill(&b.buf[k], b.off+k)
	}
	b.off += len(b.buf)
	return b.buf
}

// trimmer is implemented by the stores that keep everything in memory
// (the floor): in the mixed workload they drop the samples before t, which
// no reader asks for any more, so that their memory stays bounded over a
// long run as an engine's stays within its budget.
type trimmer interface{ trimBefore(t int64) }

// streamTrim trims a trimmer behind the mixed workload's writer, once per
// mixedWindow steps written, to the oldest step a reader may still read.
type streamTrim struct {
	tr   trimmer // nil: nothing to trim
	ds   *Dataset
	last int // steps written at the last trim
}

func newTrim(db store, ds *Dataset) *streamTrim {
	tr, _ := db.(trimmer)
	return &streamTrim{tr: tr, ds: ds}
}

// after is called once steps steps are written (and published to the
// readers). lows holds each reader's oldest step in use (math.MaxInt64
// when idle): a reader stores a lower bound of its window there before it
// reads the horizon, so the trim, which reads them after the horizon was
// published, never cuts into a window being read.
func (t *streamTrim) after(steps int, lows []atomic.Int64) {
	if t.tr == nil || steps-t.last < mixedWindow {
		return
	}
	low := int64(steps - mixedWindow)
	for i := range lows {
		low = min(low, lows[i].Load())
	}
	if low > 0 {
		t.tr.trimBefore(t.ds.Time(int(low)))
	}
	t.last = steps
}

// mixedOutcome is a mixed phase's result and the answers to check.
type mixedOutcome struct {
	mixedResult
	answers *mixedAnswers
}

// mixedRun is the mixed phase: a paced writer and m.Readers readers.
func mixedRun(ctx context.Context, open opener, j job, ds *Dataset, peak float64, emit func(Phase, int)) (*mixedOutcome, error) {
	m := j.Mixed
	dur := time.Duration(m.DurationNS)
	target := peak * m.Share
	mr := &mixedOutcome{}
	mr.Engine, mr.PeakPointsPerSec, mr.TargetPointsPerSec = j.Engine, peak, target
	mr.Queries = map[string]Latency{}
	db, err := open(j.Dir, j.Config, j.Durability)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	comp0, hasComp := int64(0), false
	if cc, ok := db.(compactionCounter); ok {
		comp0, hasComp = cc.compactions()
	}
	var stalls0 int64
	if sc, ok := db.(stallCounter); ok {
		stalls0 = sc.writeStalls()
	}

	secs := int(dur/time.Second) + 2
	pointsPerSec := make([]atomic.Int64, secs)
	queriesPerSec := make([]atomic.Int64, secs)
	rssPerSec := make([]int64, secs) // the writer's
	var steps atomic.Int64           // steps fully written: the readers' horizon
	start := time.Now()
	deadline := start.Add(dur)
	second := func(t time.Time) int { return min(int(t.Sub(start)/time.Second), secs-1) }

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	mr.answers = newMixedAnswers(ds)
	readErrs := make([]error, m.Readers)
	lows := make([]atomic.Int64, m.Readers)
	for r := range m.Readers {
		lows[r].Store(math.MaxInt64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs resultSet
			for k := r; rctx.Err() == nil && time.Now().Before(deadline); k++ {
				// A lower bound of the window first, then the horizon: see
				// streamTrim.after.
				lows[r].Store(steps.Load() - mixedWindow)
				w := int(steps.Load())
				if w == 0 {
					lows[r].Store(math.MaxInt64)
					runtime.Gosched()
					continue
				}
				dev := (k * 7919) % ds.Devices
				a := mixedQueries(dev, w)[k%3]
				q := a.query(ds)
				rs.reset()
				t0 := time.Now()
				err := db.query(rctx, q, &rs)
				d := time.Since(t0)
				lows[r].Store(math.MaxInt64)
				if err != nil {
					if rctx.Err() == nil {
						readErrs[r] = fmt.Errorf("%s: %w", a.name, err)
					}
					return
				}
				a.digest = rs.digest()
				mr.answers.add(a, d)
				queriesPerSec[second(time.Now())].Add(1)
			}
		}()
	}

	interval := time.Duration(float64(j.Batch) / target * float64(time.Second))
	lat := newLatencyRecorder()
	var lagMax time.Duration
	b := newStreamBatch(ds, j.Batch)
	trim := newTrim(db, ds)
	next := start
	lastEmit := 0
	var werr error
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			werr = err
			break
		}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait) // pacing to the target rate
		} else {
			lagMax = max(lagMax, -wait)
		}
		batch := b.next()
		t0 := time.Now()
		if err := db.write(batch); err != nil {
			werr = fmt.Errorf("write at point %d: %w", b.off-len(batch), err)
			break
		}
		d := time.Since(t0)
		lat.record(d)
		if d > interval {
			mr.WriteStalls++
		}
		mr.PointsWritten += int64(len(batch))
		steps.Store(int64(b.off / ds.Devices))
		trim.after(b.off/ds.Devices, lows)
		pointsPerSec[second(time.Now())].Add(int64(len(batch)))
		next = next.Add(interval)
		// Every second is reported, also those a long write skipped, and
		// its resident memory noted.
		if s := second(time.Now()); lastEmit < s {
			rss := currentRSS()
			for ; lastEmit < s; lastEmit++ {
				rssPerSec[lastEmit] = rss
				if emit != nil {
					emit(PhaseInsert, lastEmit+1)
				}
			}
		}
	}
	elapsed := time.Since(start)
	for rss := currentRSS(); lastEmit < min(secs, int(elapsed/time.Second)); lastEmit++ {
		rssPerSec[lastEmit] = rss
	}
	cancel()
	wg.Wait()
	if hasComp {
		if cc, ok := db.(compactionCounter); ok {
			if n, ok := cc.compactions(); ok {
				n -= comp0
				mr.Compactions = &n
			}
		}
	}
	if sc, ok := db.(stallCounter); ok {
		n := sc.writeStalls() - stalls0
		mr.EngineWriteStalls = &n
	}
	cerr := db.close()
	if err := errors.Join(werr, errors.Join(readErrs...)); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("close: %w", cerr)
	}
	mr.AchievedPointsPerSec = float64(mr.PointsWritten) / elapsed.Seconds()
	mr.Write = lat.summary()
	mr.WriteLagMaxMs = float64(lagMax.Nanoseconds()) / 1e6
	mr.Answers = mr.answers.n
	for name, l := range mr.answers.lat {
		mr.Queries[name] = l.summary()
	}
	// Whole seconds only: the last, partial one would read low.
	n := min(secs, int(elapsed/time.Second))
	for s := range n {
		mr.Throughput = append(mr.Throughput, ThroughputSample{Second: s,
			Points: pointsPerSec[s].Load(), Queries: queriesPerSec[s].Load(), RSSBytes: rssPerSec[s]})
	}
	return mr, nil
}
