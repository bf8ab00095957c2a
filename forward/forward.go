package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/klauspost/compress/s2"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/vfs"
)

// Protocol is the wire protocol spoken to the remote.
type Protocol string

const (
	// Prometheus is remote write 1.0 (snappy-compressed protobuf), as
	// VictoriaMetrics, Mimir, Thanos Receive, Cortex and Prometheus accept
	// at /api/v1/write (or their own paths).
	Prometheus Protocol = "prometheus"
	// Influx is InfluxDB line protocol with ns timestamps, for /write
	// (1.x) or /api/v2/write (2.x).
	Influx Protocol = "influx"
)

// ParseProtocol parses "prometheus" or "influx".
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(s); p {
	case Prometheus, Influx:
		return p, nil
	}
	return "", fmt.Errorf("%w: unknown protocol %q (want prometheus or influx)", ErrInvalid, s)
}

// Defaults of the zero fields of Options.
const (
	DefaultBatchSize       = 10_000
	DefaultLinger          = time.Second
	DefaultMaxBacklogBytes = 1 << 30
	DefaultMaxBacklogAge   = 7 * 24 * time.Hour
	DefaultMinBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff      = 30 * time.Second
	DefaultTimeout         = 30 * time.Second
)

var (
	// ErrInvalid reports options that cannot work.
	ErrInvalid = errors.New("forward: invalid options")
	// ErrClosed is returned by a second Close and by Start after Close.
	ErrClosed = errors.New("forward: closed")
	// ErrLocked is returned by New when another forwarder holds the queue
	// directory.
	ErrLocked = errors.New("forward: queue directory in use")
)

// Options configure a Forwarder. Zero fields mean the defaults.
type Options struct {
	URL      string   // where requests go, e.g. http://vm:8428/api/v1/write
	Protocol Protocol // Prometheus or Influx; required
	// Dir holds the queue; default the "forward" directory inside the
	// database's. Each forwarder of a database needs its own.
	Dir string
	// BatchSize is the most samples one request carries (default 10,000).
	// Linger (default 1 s) bounds how long a sample waits to be sent: a
	// partial batch waits that long for more, and delivery yields to local
	// writes, sending a full batch while they keep coming only once its
	// oldest sample has waited Linger (see yielder).
	BatchSize int
	Linger    time.Duration
	// The backlog of undelivered data is bounded: past MaxBacklogBytes of
	// queue (default 1 GiB) or MaxBacklogAge since it was written (default
	// 7 days), the oldest undelivered data is dropped from the queue (never
	// from the database), a queue file at a time.
	MaxBacklogBytes int64
	MaxBacklogAge   time.Duration
	// Retries back off exponentially with jitter from MinBackoff (default
	// 100 ms) up to MaxBackoff (default 30 s); a Retry-After header
	// lengthens the wait up to MaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	Timeout    time.Duration // per request; default 30 s
	Headers    http.Header   // added to every request (e.g. Authorization)
	Client     *http.Client  // default: a client of its own
	Logger     *slog.Logger  // default slog.Default()
	// SegmentBytes is the size of a queue file (default:
	// MaxBacklogBytes/16, between 64 KiB and 64 MiB): the queue starts a new
	// file when one reaches it, or, where files are preallocated (Linux),
	// when the next frame would not fit; a larger frame gets a file of its
	// own. The backlog bounds drop whole files.
	SegmentBytes int64
	// SyncInterval is how often the queue is fsynced in the background
	// (default 1 s), so that a power loss loses at most that much of the
	// queue's tail; a process crash loses nothing at any setting.
	SyncInterval time.Duration
	Now          func() time.Time // clock; default time.Now

	fs vfs.FS // the queue's filesystem; default vfs.Default (tests simulate one)
}

func (o *Options) ensureDefaults(db *engine.DB) {
	if o.Dir == "" {
		o.Dir = filepath.Join(db.Dir(), "forward")
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxBacklogBytes == 0 {
		o.MaxBacklogBytes = DefaultMaxBacklogBytes
	}
	if o.MaxBacklogAge == 0 {
		o.MaxBacklogAge = DefaultMaxBacklogAge
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = min(max(o.MaxBacklogBytes/16, minSegBytes), defaultSegBytes)
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
}

func (o *Options) validate() error {
	switch {
	case o.URL == "":
		return fmt.Errorf("%w: no URL", ErrInvalid)
	case o.Protocol != Prometheus && o.Protocol != Influx:
		return fmt.Errorf("%w: unknown protocol %q (want prometheus or influx)", ErrInvalid, o.Protocol)
	case o.BatchSize < 1:
		return fmt.Errorf("%w: BatchSize must be positive", ErrInvalid)
	case o.Linger < 0 || o.MaxBacklogAge < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.Timeout < 0 || o.SyncInterval < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalid)
	case o.MaxBacklogBytes < 0 || o.SegmentBytes < 0:
		return fmt.Errorf("%w: negative size", ErrInvalid)
	case o.MinBackoff > o.MaxBackoff:
		return fmt.Errorf("%w: MinBackoff above MaxBackoff", ErrInvalid)
	}
	if _, err := http.NewRequest(http.MethodPost, o.URL, nil); err != nil {
		return fmt.Errorf("%w: URL: %v", ErrInvalid, err)
	}
	return nil
}

// Forwarder delivers what a database stores to a remote. Create it with
// New right after engine.Open, before any write, and Start it.
type Forwarder struct {
	db     *engine.DB
	opts   Options
	logger *slog.Logger
	q      *queue
	lock   io.Closer
	hook   *hook

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	trimCh chan struct{}

	started, closed atomic.Bool

	// acked is the durable acknowledged position; the sender owns it.
	ackMu sync.Mutex
	acked cursor

	st counters
}

type counters struct {
	queued, sent, skipped                atomic.Int64
	droppedBacklog, droppedRejected      atomic.Int64
	droppedQueue                         atomic.Int64
	requests, retries, batches, rejected atomic.Int64
	headTime, lastSuccess                atomic.Int64 // Unix ns
	lastErr                              atomic.Pointer[string]
	unforwarded                          atomic.Int64
}

// hook is the engine feed subscriber: it appends to the queue.
type hook struct{ f *Forwarder }

// FeedPrepare queues the batch (the queue logs a failure, once a run;
// commit counts the batch as dropped).
func (h *hook) FeedPrepare(rec *engine.FeedRecord) {
	h.f.q.prepare(rec.Seq, rec.Samples, rec.Format, rec.Payload)
}

// FeedResolve lets the sender deliver the batch once its write is durable,
// or skip it when the database undid it: the remote receives what the
// database holds.
func (h *hook) FeedResolve(seq uint64, kept bool) {
	h.f.q.resolve(seq, kept)
}

func (h *hook) FeedCommit(seq uint64, logged bool) {
	f := h.f
	published, lost := f.q.commit(seq, logged)
	f.st.queued.Add(published)
	f.st.droppedQueue.Add(lost)
	// Waking the trimmer costs the writer a system call: do it only when
	// the byte bound may be passed (the age bound has its ticker).
	if published > 0 && f.q.mayPass(f.opts.MaxBacklogBytes) {
		select {
		case f.trimCh <- struct{}{}:
		default:
		}
	}
}

// New opens (or creates) the forwarder's queue for db, reconciles it with
// the database's recovered WAL position, and subscribes to the database's
// change feed: every batch written from now on is queued, within the
// backlog bounds. Nothing is sent before Start.
func New(db *engine.DB, opts Options) (*Forwarder, error) {
	opts.ensureDefaults(db)
	if err := opts.validate(); err != nil {
		return nil, err
	}
	f := &Forwarder{db: db, opts: opts, logger: opts.Logger.With("forward", opts.URL), trimCh: make(chan struct{}, 1)}
	if err := opts.fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create queue dir: %w", err)
	}
	lock, err := opts.fs.Lock(filepath.Join(opts.Dir, "LOCK"))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%s: %w", opts.Dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("lock queue dir: %w", err)
	}
	f.lock = lock
	state := db.FeedState()
	q, cur, err := openQueueConfig(queueConfig{
		fs: opts.fs, dir: opts.Dir, segBytes: opts.SegmentBytes, rollAge: rollAge(opts.MaxBacklogAge),
		recovered: state.RecoveredSeq, logger: f.logger, now: opts.Now,
	})
	if err != nil {
		lock.Close()
		return nil, err
	}
	q.resolving = true // the hook is an engine.FeedResolver
	f.q, f.acked = q, cur
	f.hook = &hook{f: f}
	info, err := db.Subscribe(f.hook)
	if err != nil {
		q.close()
		lock.Close()
		return nil, fmt.Errorf("subscribe to database: %w", err)
	}
	if info.Seq > state.RecoveredSeq {
		f.logger.Warn("forward: batches written after the database opened and before the forwarder are not forwarded",
			"batches", info.Seq-state.RecoveredSeq)
		f.st.unforwarded.Add(int64(info.Seq - state.RecoveredSeq))
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	// The queue is bounded and synced from now on; delivery waits for Start.
	f.wg.Go(f.trimLoop)
	f.wg.Go(f.syncLoop)
	return f, nil
}

// Start starts delivery in the background.
func (f *Forwarder) Start() error {
	if f.closed.Load() {
		return ErrClosed
	}
	if f.started.Swap(true) {
		return fmt.Errorf("forward: already started")
	}
	f.wg.Go(f.sendLoop)
	return nil
}

// Close stops queueing and delivery. What is queued and not yet delivered
// stays in the queue and is delivered after the next New and Start; a
// request in flight may then be sent again (at least once). A second call
// returns ErrClosed.
func (f *Forwarder) Close() error {
	if f.closed.Swap(true) {
		return ErrClosed
	}
	f.db.Unsubscribe(f.hook)
	f.cancel()
	f.wg.Wait()
	err := f.q.close()
	if uerr := f.lock.Close(); err == nil {
		err = uerr
	}
	return err
}

// rollAge is how old the active queue file's first frame may get before
// the writer starts a new file: an eighth of MaxBacklogAge, so that, while
// writes go on, data is dropped for age at most an eighth late.
func rollAge(maxAge time.Duration) time.Duration {
	return max(maxAge/8, time.Millisecond)
}

func (f *Forwarder) trimLoop() {
	every := min(max(f.opts.MaxBacklogAge/10, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		case <-f.trimCh:
		}
		f.enforceBounds()
	}
}

func (f *Forwarder) syncLoop() {
	t := time.NewTicker(f.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
			if err := f.q.sync(); err != nil {
				f.logger.Warn("forward: sync queue", "err", err)
			}
		}
	}
}

// enforceBounds drops the oldest undelivered data past the backlog bounds.
func (f *Forwarder) enforceBounds() {
	cutoff := f.opts.Now().Add(-f.opts.MaxBacklogAge).UnixNano()
	n := f.q.trim(f.opts.MaxBacklogBytes, cutoff)
	if n == 0 {
		return
	}
	f.st.droppedBacklog.Add(n)
	f.logger.Warn("forward: backlog past its bounds; dropped the oldest undelivered samples from the queue (the database keeps them)",
		"samples", n, "max_bytes", f.opts.MaxBacklogBytes, "max_age", f.opts.MaxBacklogAge)
	f.ackMu.Lock()
	acked := f.acked
	f.ackMu.Unlock()
	if err := f.q.removeDone(acked); err != nil {
		f.logger.Error("forward: remove queue files", "err", err)
	}
}

// sendLoop forms batches from the queue and delivers them, one request at
// a time, so samples reach the remote in queue order.
func (f *Forwarder) sendLoop() {
	// Decoding and encoding cost more CPU than local ingest does a point:
	// where the cores are contended they run after the writers.
	yieldCPU()
	var (
		dec        engine.FeedDecoder
		rb         readBuf
		cur        []engine.FeedSample // the frame being sent, as decoded
		curIdx     int
		curSeq     uint64
		curTime    int64
		curCount   uint64
		curCountOK bool
		end        cursor
		meta       = newMetaCache(f.db, f.opts.Protocol)
		batch      = sender{proto: f.opts.Protocol}
	)
	f.ackMu.Lock()
	skip := f.acked
	f.ackMu.Unlock()
	y := newYielder(f)
	for f.ctx.Err() == nil {
		var taken time.Time // when the batch got its first sample
		var headQueued int64
		for {
			if batch.n < f.opts.BatchSize && curIdx < len(cur) {
				take := min(f.opts.BatchSize-batch.n, len(cur)-curIdx)
				if batch.n == 0 {
					f.st.headTime.Store(curTime)
					taken, headQueued = time.Now(), curTime
				}
				batch.add(cur[curIdx : curIdx+take])
				curIdx += take
				end = cursor{seq: curSeq, done: uint32(curIdx), count: curCount + uint64(curIdx), countOK: curCountOK}
				continue
			}
			if batch.n < f.opts.BatchSize {
				// cur is used up: decoding the next frame may reuse it.
				fr, ok, err := f.q.next(&rb)
				if err != nil {
					f.logger.Error("forward: read queue", "err", err)
				}
				if ok {
					if fr.seq < skip.seq {
						f.q.setInHand(int64(batch.n))
						continue // delivered before a restart
					}
					samples, err := dec.Decode(fr.format, fr.seq, fr.payload)
					if err != nil {
						f.logger.Error("forward: undecodable queued batch dropped", "seq", fr.seq, "samples", fr.samples, "err", err)
						f.st.droppedQueue.Add(int64(fr.samples))
						f.q.setInHand(int64(batch.n))
						continue
					}
					start := 0
					if fr.seq == skip.seq {
						start = min(int(skip.done), len(samples))
					}
					cur, curIdx, curSeq, curTime = samples, start, fr.seq, fr.time
					curCount, curCountOK = fr.count, fr.hdrOK
					f.q.setInHand(int64(batch.n + len(cur) - curIdx))
					continue
				}
			}
			// The batch is full, or nothing more is queued for now.
			if batch.n == 0 {
				f.st.headTime.Store(0)
				select {
				case <-f.ctx.Done():
					return
				case <-f.q.notify:
				}
				continue
			}
			wait, send, wake := y.decide(time.Now(), batch.n >= f.opts.BatchSize, taken, headQueued)
			if send {
				break
			}
			if !y.sleep(wait, wake) {
				return
			}
		}
		sent, rejected, ok := batch.deliver(f, meta)
		if !ok {
			return // closing: the batch stays unacknowledged
		}
		f.ackMu.Lock()
		f.acked = end
		f.ackMu.Unlock()
		if err := f.q.saveCursor(end); err != nil {
			f.logger.Error("forward: save delivered position (a restart may send it again)", "err", err)
		}
		if err := f.q.removeDone(end); err != nil {
			f.logger.Error("forward: remove queue files", "err", err)
		}
		skip = cursor{}
		f.q.setInHand(int64(len(cur) - curIdx))
		if curIdx < len(cur) {
			f.st.headTime.Store(curTime)
		} else {
			f.st.headTime.Store(0)
		}
		// Counted last, so that a reader of Stats who sees them sees the
		// backlog without the batch.
		f.st.droppedRejected.Add(rejected)
		f.st.sent.Add(sent)
	}
}

// yielder is the delivery policy: delivery yields to local ingest. A
// full batch is sent at once only while writes pause (no batch queued for
// quietFor); while they keep coming, it waits until its oldest sample has
// waited Linger (since it was queued, or since the sender took it), so
// that a burst of writes is not slowed by encoding and posting beside it,
// and is delivered after it, in full batches. A partial batch waits Linger
// to fill, as before. Linger bounds the wait in every case: under writes
// that never pause, delivery runs at the latest Linger behind them and so
// keeps pace, and a backlog older than Linger (an outage, a restart) is
// sent at full speed.
type yielder struct {
	f        *Forwarder
	quietFor time.Duration
	seen     int64     // samples queued when last looked at
	moved    time.Time // when seen last changed
	timer    *time.Timer
}

// quietFor is how long writes must pause for delivery to go ahead of its
// Linger: min(Linger/4, maxQuiet).
const maxQuiet = 10 * time.Millisecond

func newYielder(f *Forwarder) *yielder {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &yielder{f: f, quietFor: min(f.opts.Linger/4, maxQuiet), seen: -1, timer: t}
}

// decide says whether to send the batch now, and if not, how long to wait
// before asking again, and whether a write should end the wait sooner.
// taken is when the batch got its first sample, and queued when that
// sample was queued (Unix ns by the forwarder's clock).
func (y *yielder) decide(now time.Time, full bool, taken time.Time, queued int64) (wait time.Duration, send, wake bool) {
	waited := max(now.Sub(taken), y.f.opts.Now().Sub(time.Unix(0, queued)))
	left := y.f.opts.Linger - waited
	if left <= 0 {
		return 0, true, false
	}
	if c := y.f.st.queued.Load(); c != y.seen {
		y.seen, y.moved = c, now
	}
	quiet := y.quietFor - now.Sub(y.moved)
	switch {
	case !full:
		return left, false, true // wake on the next write, to fill it
	case quiet <= 0:
		return 0, true, false
	}
	return min(left, quiet), false, false
}

// sleep waits d, or until more is queued when wake; it returns false when
// the forwarder is closing.
func (y *yielder) sleep(d time.Duration, wake bool) bool {
	var notify <-chan struct{}
	if wake {
		notify = y.f.q.notify
	}
	y.timer.Reset(d)
	defer y.timer.Stop()
	select {
	case <-y.f.ctx.Done():
		return false
	case <-notify:
	case <-y.timer.C:
	}
	return true
}

// sender gathers a batch, encodes and posts it, reusing its buffers.
type sender struct {
	proto    Protocol
	n        int                 // samples in the batch
	prom     promEncoder         // prometheus: the batch, by series
	lines    []engine.FeedSample // influx: the batch, in order
	raw, out []byte
}

// add adds samples to the batch.
func (s *sender) add(samples []engine.FeedSample) {
	s.n += len(samples)
	if s.proto == Prometheus {
		s.prom.add(samples)
	} else {
		s.lines = append(s.lines, samples...)
	}
}

// deliver sends the batch until the remote accepts it (sent samples) or
// rejects it for good (rejected samples), and empties it; ok is false only
// when the forwarder is closing.
//
// A Prometheus receiver without an out-of-order window refuses a whole
// request (400, nothing stored) for one sample at or behind its series'
// newest, as a backfill sends. Refused so, the batch is sent once more
// without such samples (the ones behind what the remote accepted of their
// series before, or behind an earlier sample of theirs in the batch): only
// those are dropped, not the batch. A receiver that takes any order never
// refuses the first request, and so gets everything.
func (s *sender) deliver(f *Forwarder, meta *metaCache) (sent, rejected int64, ok bool) {
	n := int64(s.n)
	s.n = 0
	var contentType, encoding string
	skipped := 0
	accepted := false
	switch s.proto {
	case Prometheus:
		defer func() { s.prom.finish(accepted) }()
		s.raw, skipped, _ = s.prom.encodeBatch(s.raw[:0], meta.get, false)
		s.out = s2.EncodeSnappy(s.out[:cap(s.out)], s.raw) // snappy block format, s2's faster encoder
		contentType, encoding = "application/x-protobuf", "snappy"
	default:
		s.out = encodeInflux(s.out[:0], s.lines, meta.get)
		clear(s.lines) // drop the strings it holds
		s.lines = s.lines[:0]
		contentType = "text/plain; charset=utf-8"
	}
	if skipped > 0 {
		f.st.skipped.Add(int64(skipped))
	}
	if int64(skipped) == n {
		return 0, 0, true // nothing this protocol can carry
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     f.opts.MinBackoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         f.opts.MaxBackoff,
	}
	b.Reset()
	behind := -1 // samples left out of the strict resend; -1 before one
	for attempt := 0; ; attempt++ {
		code, retryAfter, msg, err := f.post(s.out, contentType, encoding)
		f.st.requests.Add(1)
		switch {
		case err == nil && code/100 == 2:
			f.st.batches.Add(1)
			f.st.lastSuccess.Store(f.opts.Now().UnixNano())
			accepted = true
			if behind > 0 {
				f.logger.Warn("forward: remote refused samples behind their series' newest; sent the batch without them",
					"dropped", behind, "sent", n-int64(skipped)-int64(behind))
				return n - int64(skipped) - int64(behind), int64(behind), true
			}
			return n - int64(skipped), 0, true
		case err == nil && code != http.StatusTooManyRequests && code/100 == 4:
			if s.proto == Prometheus && behind < 0 {
				var raw []byte
				raw, _, behind = s.prom.encodeBatch(s.raw[:0], meta.get, true)
				if behind > 0 && len(raw) > 0 {
					s.raw = raw
					s.out = s2.EncodeSnappy(s.out[:cap(s.out)], s.raw)
					continue
				}
				if behind > 0 { // every sample was behind
					behind = -1
				}
			}
			f.st.rejected.Add(1)
			e := fmt.Sprintf("remote rejected a batch: %d %s", code, msg)
			f.st.lastErr.Store(&e)
			f.logger.Error("forward: remote rejected a batch; dropped", "status", code, "samples", n-int64(skipped), "body", msg)
			return 0, n - int64(skipped), true
		}
		if f.ctx.Err() != nil {
			return 0, 0, false
		}
		var e string
		if err != nil {
			e = err.Error()
		} else {
			e = fmt.Sprintf("remote answered %d %s", code, msg)
		}
		f.st.lastErr.Store(&e)
		f.st.retries.Add(1)
		wait := min(b.NextBackOff(), f.opts.MaxBackoff)
		if retryAfter > 0 {
			wait = max(wait, min(retryAfter, f.opts.MaxBackoff))
		}
		if attempt == 0 || attempt%10 == 0 {
			f.logger.Warn("forward: delivery failed; retrying", "attempt", attempt+1, "wait", wait, "err", e)
		}
		t := time.NewTimer(wait)
		select {
		case <-f.ctx.Done():
			t.Stop()
			return 0, 0, false
		case <-t.C:
		}
	}
}

// post sends one request. It returns the status, the Retry-After delay, a
// short excerpt of an error body, or a transport error.
func (f *Forwarder) post(body []byte, contentType, encoding string) (int, time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.opts.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	for k, vs := range f.opts.Headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "strata-forward")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
		req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	}
	resp, err := f.opts.Client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	var msg []byte
	if resp.StatusCode/100 != 2 {
		msg, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), f.opts.Now()), string(bytes.TrimSpace(msg)), nil
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(min(s, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// metaCache resolves series ids through the database's catalog, once.
type metaCache struct {
	db    *engine.DB
	proto Protocol
	m     map[uint64]*seriesMeta
}

func newMetaCache(db *engine.DB, proto Protocol) *metaCache {
	return &metaCache{db: db, proto: proto, m: make(map[uint64]*seriesMeta)}
}

func (c *metaCache) get(id uint64) *seriesMeta {
	if m, ok := c.m[id]; ok {
		return m
	}
	m := &seriesMeta{}
	key, info, ok := c.db.FeedSeries(id)
	if !ok {
		// Cannot happen for a batch the database logged: its series are
		// in the catalog. Send it under a name that shows the problem.
		info = engine.SeriesInfo{Measurement: "strata_unknown_series", Field: strconv.FormatUint(id, 10)}
		key = info.Measurement + " " + info.Field
	}
	m.kind = info.Kind
	if c.proto == Prometheus {
		m.labels = promLabels(info)
	} else {
		m.prefix, m.field = influxParts(key)
	}
	c.m[id] = m
	return m
}
