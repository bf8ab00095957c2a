package main

import (
	"flag"
	"fmt"
	"net/http"
	"strings"
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
func (ff *forwardFlags) start(db *engine.DB) (*forward.Forwarder, error) {
	if *ff.url == "" {
		return nil, nil
	}
	opts, err := ff.options()
	if err != nil {
		return nil, err
	}
	f, err := forward.New(db, opts)
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	if err := f.Start(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
