package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/forward"
)

// forwardFlags are the --forward-* flags of strata serve.
type forwardFlags struct {
	url, protocol      *string
	batch              *int
	linger, maxAge     *time.Duration
	maxBackoff         *time.Duration
	maxBytes           *int64
	forwardDirOverride *string
}

func addForwardFlags(fs *flag.FlagSet) *forwardFlags {
	return &forwardFlags{
		url:                fs.String("forward-url", "", "also deliver everything stored to this remote (e.g. http://vminsert:8480/insert/0/prometheus/api/v1/write); empty: no forwarding"),
		protocol:           fs.String("forward-protocol", "prometheus", "protocol of --forward-url: prometheus (remote write 1.0) or influx (line protocol)"),
		batch:              fs.Int("forward-batch-size", forward.DefaultBatchSize, "most samples per forwarded request"),
		linger:             fs.Duration("forward-linger", forward.DefaultLinger, "longest a batch waits before it is sent: a partial one for more points, a full one while writes keep coming"),
		maxBytes:           fs.Int64("forward-max-backlog-bytes", forward.DefaultMaxBacklogBytes, "undelivered queue past this is dropped, oldest first (never from the database)"),
		maxAge:             fs.Duration("forward-max-backlog-age", forward.DefaultMaxBacklogAge, "undelivered data older than this is dropped from the queue"),
		maxBackoff:         fs.Duration("forward-max-backoff", forward.DefaultMaxBackoff, "longest wait between retries while the remote is down"),
		forwardDirOverride: fs.String("forward-dir", "", "queue directory (default: DIR/forward)"),
	}
}

// start creates and starts the forwarder, or returns nil when no URL is set.
// It runs right after Open, before anything is written, so that every
// point stored from then on is queued.
func (ff *forwardFlags) start(db *engine.DB) (*forward.Forwarder, error) {
	if *ff.url == "" {
		return nil, nil
	}
	proto, err := forward.ParseProtocol(*ff.protocol)
	if err != nil {
		return nil, err
	}
	f, err := forward.New(db, forward.Options{
		URL: *ff.url, Protocol: proto, Dir: *ff.forwardDirOverride,
		BatchSize: *ff.batch, Linger: *ff.linger,
		MaxBacklogBytes: *ff.maxBytes, MaxBacklogAge: *ff.maxAge, MaxBackoff: *ff.maxBackoff,
	})
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	if err := f.Start(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// forwardCollector exposes a forwarder's Stats as strata_forward_* metrics
// on the server's /metrics.
type forwardCollector struct{ f *forward.Forwarder }

func (c forwardCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c forwardCollector) Collect(ch chan<- prometheus.Metric) {
	descs := map[string]*prometheus.Desc{}
	for _, m := range c.f.Stats().Metrics() {
		var names, values []string
		for i := 0; i+1 < len(m.Labels); i += 2 {
			names = append(names, m.Labels[i])
			values = append(values, m.Labels[i+1])
		}
		d, ok := descs[m.Name]
		if !ok {
			d = prometheus.NewDesc(m.Name, m.Help, names, nil)
			descs[m.Name] = d
		}
		typ := prometheus.GaugeValue
		if m.Type == "counter" {
			typ = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(d, typ, m.Value, values...)
	}
}
