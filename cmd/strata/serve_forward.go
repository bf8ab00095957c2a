package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/forward"
)

// forwardFlags are the --forward-* flags of strata serve: one for every
// field of forward.Options that a command line can set (all but Client,
// Logger and Now).
type forwardFlags struct {
	url, protocol      *string
	batch              *int
	linger, maxAge     *time.Duration
	minBackoff         *time.Duration
	maxBackoff         *time.Duration
	timeout            *time.Duration
	syncInterval       *time.Duration
	maxBytes           *int64
	segmentBytes       *int64
	forwardDirOverride *string
	headers            headerFlag
}

// headerFlag is the repeatable --forward-header "Name: value".
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string {
	if f == nil || len(f.h) == 0 {
		return ""
	}
	var parts []string
	for k, vs := range f.h {
		for _, v := range vs {
			parts = append(parts, k+": "+v)
		}
	}
	return strings.Join(parts, ", ")
}

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("want \"Name: value\", got %q", s)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

func addForwardFlags(fs *flag.FlagSet) *forwardFlags {
	ff := &forwardFlags{
		url:                fs.String("forward-url", "", "also deliver everything stored to this remote (e.g. http://vminsert:8480/insert/0/prometheus/api/v1/write); empty: no forwarding"),
		protocol:           fs.String("forward-protocol", "prometheus", "protocol of --forward-url: prometheus (remote write 1.0) or influx (line protocol)"),
		batch:              fs.Int("forward-batch-size", forward.DefaultBatchSize, "most samples per forwarded request"),
		linger:             fs.Duration("forward-linger", forward.DefaultLinger, "longest a batch waits before it is sent: a partial one for more points, a full one while writes keep coming"),
		maxBytes:           fs.Int64("forward-max-backlog-bytes", forward.DefaultMaxBacklogBytes, "undelivered queue past this is dropped, oldest first (never from the database)"),
		maxAge:             fs.Duration("forward-max-backlog-age", forward.DefaultMaxBacklogAge, "undelivered data older than this is dropped from the queue"),
		minBackoff:         fs.Duration("forward-min-backoff", forward.DefaultMinBackoff, "first wait before a failed request is retried (doubling, with jitter, up to --forward-max-backoff)"),
		maxBackoff:         fs.Duration("forward-max-backoff", forward.DefaultMaxBackoff, "longest wait between retries while the remote is down"),
		timeout:            fs.Duration("forward-timeout", forward.DefaultTimeout, "longest one forwarded request may take before it is abandoned and retried"),
		segmentBytes:       fs.Int64("forward-segment-bytes", 0, "size of a queue file (0: --forward-max-backlog-bytes/16, between 64 KiB and 64 MiB)"),
		syncInterval:       fs.Duration("forward-sync-interval", time.Second, "how often the queue is fsynced (a power loss loses at most this much of it)"),
		forwardDirOverride: fs.String("forward-dir", "", "queue directory (default: DIR/forward)"),
	}
	fs.Var(&ff.headers, "forward-header", "add this \"Name: value\" header to every forwarded request (e.g. \"Authorization: Bearer T\"); repeatable")
	return ff
}

// check reports --forward-* flags that cannot work, before anything is
// opened: fs tells which flags were given. Given without --forward-url, they
// would be ignored; zero durations and sizes would silently become the
// library's defaults (except --forward-segment-bytes, whose 0 is documented).
func (ff *forwardFlags) check(fs *flag.FlagSet) error {
	if *ff.url == "" {
		urlGiven, other := false, ""
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "forward-url" {
				urlGiven = true
			} else if strings.HasPrefix(f.Name, "forward-") && other == "" {
				other = f.Name
			}
		})
		if other != "" && !urlGiven {
			return fmt.Errorf("--%s needs --forward-url", other)
		}
		return nil // an explicitly empty --forward-url turns forwarding off
	}
	if u, err := url.Parse(*ff.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--forward-url %q: want an http:// or https:// URL", *ff.url)
	}
	if _, err := forward.ParseProtocol(*ff.protocol); err != nil {
		return fmt.Errorf("--forward-protocol %q: want prometheus or influx", *ff.protocol)
	}
	if *ff.batch < 1 {
		return fmt.Errorf("--forward-batch-size must be at least 1, not %d", *ff.batch)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"forward-linger", *ff.linger}, {"forward-max-backlog-age", *ff.maxAge}, {"forward-min-backoff", *ff.minBackoff},
		{"forward-max-backoff", *ff.maxBackoff}, {"forward-timeout", *ff.timeout}, {"forward-sync-interval", *ff.syncInterval}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be positive, not %v", d.name, d.v)
		}
	}
	switch {
	case *ff.minBackoff > *ff.maxBackoff:
		return fmt.Errorf("--forward-min-backoff %v is above --forward-max-backoff %v", *ff.minBackoff, *ff.maxBackoff)
	case *ff.maxBytes <= 0:
		return fmt.Errorf("--forward-max-backlog-bytes must be positive, not %d", *ff.maxBytes)
	case *ff.segmentBytes < 0:
		return fmt.Errorf("--forward-segment-bytes must not be negative (0: automatic), not %d", *ff.segmentBytes)
	}
	return nil
}

// options returns the forward.Options the flags ask for.
func (ff *forwardFlags) options() (forward.Options, error) {
	proto, err := forward.ParseProtocol(*ff.protocol)
	if err != nil {
		return forward.Options{}, err
	}
	return forward.Options{
		URL: *ff.url, Protocol: proto, Dir: *ff.forwardDirOverride,
		BatchSize: *ff.batch, Linger: *ff.linger,
		MaxBacklogBytes: *ff.maxBytes, MaxBacklogAge: *ff.maxAge,
		MinBackoff: *ff.minBackoff, MaxBackoff: *ff.maxBackoff,
		Timeout: *ff.timeout, Headers: ff.headers.h,
		SegmentBytes: *ff.segmentBytes, SyncInterval: *ff.syncInterval,
	}, nil
}

// start creates and starts the forwarder, or returns nil when no URL is set.
// It runs right after Open, before anything is written, so that every
// point stored from then on is queued.
//
// Only a configuration error (invalid options, a queue directory another
// process holds) stops strata serve. When the queue cannot be opened for
// any other reason (a full disk, a directory that cannot be created), the
// gateway starts without forwarding, logs why, and retries in the
// background with the flags' backoff until the queue opens; points stored
// meanwhile are not forwarded, and the status says so.
func (ff *forwardFlags) start(db *engine.DB, logger *slog.Logger) (*forwardHandle, error) {
	if *ff.url == "" {
		return nil, nil
	}
	opts, err := ff.options()
	if err != nil {
		return nil, err
	}
	h := &forwardHandle{stop: make(chan struct{}), done: make(chan struct{})}
	err = h.open(db, opts)
	if err == nil || !retryable(err) {
		close(h.done)
		if err != nil {
			return nil, err
		}
		return h, nil
	}
	logger.Error("forwarding is off until its queue opens; points stored meanwhile are not forwarded",
		"dir", opts.Dir, "err", err)
	go h.retry(db, opts, logger)
	return h, nil
}

// retryable reports whether New failed for a reason that may pass by
// itself (I/O), rather than for the configuration.
func retryable(err error) bool {
	return !errors.Is(err, forward.ErrInvalid) && !errors.Is(err, forward.ErrLocked)
}

// forwardHandle holds the forwarder of strata serve once its queue has
// opened.
type forwardHandle struct {
	f       atomic.Pointer[forward.Forwarder]
	openErr atomic.Pointer[string] // why the queue is not open yet; nil once it is
	stop    chan struct{}
	done    chan struct{}
}

// open creates and starts the forwarder.
func (h *forwardHandle) open(db *engine.DB, opts forward.Options) error {
	f, err := forward.New(db, opts)
	if err != nil {
		err = fmt.Errorf("forward: %w", err)
		msg := err.Error()
		h.openErr.Store(&msg)
		return err
	}
	if err := f.Start(); err != nil {
		f.Close()
		return err
	}
	h.f.Store(f)
	h.openErr.Store(nil)
	return nil
}

// retry opens the queue again, with backoff between opts.MinBackoff and
// opts.MaxBackoff, until it opens or Close is called.
func (h *forwardHandle) retry(db *engine.DB, opts forward.Options, logger *slog.Logger) {
	defer close(h.done)
	wait := max(opts.MinBackoff, time.Millisecond)
	for {
		t := time.NewTimer(wait)
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-t.C:
		}
		err := h.open(db, opts)
		if err == nil {
			logger.Info("forwarding queue opened; forwarding from now on", "dir", opts.Dir)
			return
		}
		if !retryable(err) {
			logger.Error("forwarding stays off", "err", err)
			return
		}
		wait = min(2*wait, max(opts.MaxBackoff, wait))
	}
}

// stats returns the forwarder's figures; before the queue opens, zeros and
// the reason in LastError.
func (h *forwardHandle) stats() forward.Stats {
	if f := h.f.Load(); f != nil {
		return f.Stats()
	}
	var s forward.Stats
	if e := h.openErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// Close stops the retries and closes the forwarder if it opened. What is
// not delivered stays queued on disk for the next start.
func (h *forwardHandle) Close() error {
	close(h.stop)
	<-h.done
	if f := h.f.Load(); f != nil {
		return f.Close()
	}
	return nil
}
