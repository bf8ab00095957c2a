package forward

import (
	"fmt"
	"io"
	"time"
)

// Stats are a forwarder's counts since New, and its backlog now.
type Stats struct {
	SamplesQueued  int64 // samples appended to the queue
	SamplesSent    int64 // samples the remote accepted
	SamplesSkipped int64 // samples the protocol cannot carry (strings over prometheus)
	// SamplesDropped = DroppedBacklog + DroppedRejected + DroppedQueue.
	SamplesDropped  int64
	DroppedBacklog  int64 // oldest undelivered samples dropped past the backlog bounds
	DroppedRejected int64 // samples of batches the remote rejected with a 4xx
	DroppedQueue    int64 // samples the queue could not keep or read back (I/O errors, damage)
	Requests        int64 // HTTP requests made
	Retries         int64 // requests that failed and were retried
	Batches         int64 // batches delivered
	BatchesRejected int64 // batches dropped on a 4xx
	// BacklogSamples are queued and not yet delivered; BacklogBytes is the
	// size of the queue not yet read (what MaxBacklogBytes bounds).
	BacklogSamples int64
	BacklogBytes   int64
	// Lag is how long the oldest undelivered sample has waited since it
	// was queued (0 when nothing waits).
	Lag time.Duration
	// LastSuccess is when the remote last accepted a batch (zero: never).
	LastSuccess time.Time
	LastError   string // the last delivery error, "" if none
	// Unforwarded counts batches written between the database's Open and
	// New, which were not queued.
	Unforwarded int64
}

// Stats returns the forwarder's counts and backlog.
func (f *Forwarder) Stats() Stats {
	s := Stats{
		SamplesQueued:   f.st.queued.Load(),
		SamplesSent:     f.st.sent.Load(),
		SamplesSkipped:  f.st.skipped.Load(),
		DroppedBacklog:  f.st.droppedBacklog.Load(),
		DroppedRejected: f.st.droppedRejected.Load(),
		Requests:        f.st.requests.Load(),
		Retries:         f.st.retries.Load(),
		Batches:         f.st.batches.Load(),
		BatchesRejected: f.st.rejected.Load(),
		Unforwarded:     f.st.unforwarded.Load(),
	}
	f.q.mu.Lock()
	s.BacklogSamples = f.q.backlog + f.q.inHand
	s.BacklogBytes = f.q.unreadBytesLocked()
	damaged := f.q.damaged
	f.q.mu.Unlock()
	s.DroppedQueue = f.st.droppedQueue.Load() + damaged
	s.SamplesDropped = s.DroppedBacklog + s.DroppedRejected + s.DroppedQueue
	if h := f.st.headTime.Load(); h != 0 {
		s.Lag = max(f.opts.Now().Sub(time.Unix(0, h)), 0)
	}
	if t := f.st.lastSuccess.Load(); t != 0 {
		s.LastSuccess = time.Unix(0, t)
	}
	if e := f.st.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// Metric is one value of the forwarder's Prometheus exposition, free of
// any client library: the server turns each into a const metric (or writes
// them with WriteMetrics).
type Metric struct {
	Name   string // e.g. strata_forward_samples_sent_total
	Help   string
	Type   string   // "counter" or "gauge"
	Labels []string // label pairs: name, value, name, value...
	Value  float64
}

// Metrics describes s as strata_forward_* metrics.
func (s Stats) Metrics() []Metric {
	c := func(name, help string, v int64, labels ...string) Metric {
		return Metric{Name: "strata_forward_" + name, Help: help, Type: "counter", Labels: labels, Value: float64(v)}
	}
	g := func(name, help string, v float64) Metric {
		return Metric{Name: "strata_forward_" + name, Help: help, Type: "gauge", Value: v}
	}
	const dropHelp = "Samples dropped from forwarding (never from the database), by reason."
	var last float64
	if !s.LastSuccess.IsZero() {
		last = float64(s.LastSuccess.UnixNano()) / 1e9
	}
	return []Metric{
		c("samples_queued_total", "Samples queued for forwarding.", s.SamplesQueued),
		c("samples_sent_total", "Samples the remote accepted.", s.SamplesSent),
		c("samples_skipped_total", "Samples the protocol cannot carry (string fields over prometheus).", s.SamplesSkipped),
		c("samples_dropped_total", dropHelp, s.DroppedBacklog, "reason", "backlog"),
		c("samples_dropped_total", dropHelp, s.DroppedRejected, "reason", "rejected"),
		c("samples_dropped_total", dropHelp, s.DroppedQueue, "reason", "queue"),
		c("requests_total", "HTTP requests sent to the remote.", s.Requests),
		c("retries_total", "Requests that failed and were retried.", s.Retries),
		c("batches_sent_total", "Batches the remote accepted.", s.Batches),
		c("batches_rejected_total", "Batches the remote rejected with a 4xx and that were dropped.", s.BatchesRejected),
		g("backlog_samples", "Samples queued and not yet delivered.", float64(s.BacklogSamples)),
		g("backlog_bytes", "Bytes of queue not yet read.", float64(s.BacklogBytes)),
		g("lag_seconds", "Time the oldest undelivered sample has waited since it was queued.", s.Lag.Seconds()),
		g("last_success_timestamp_seconds", "When the remote last accepted a batch (Unix seconds, 0 for never).", last),
	}
}

// WriteMetrics writes metrics in the Prometheus text exposition format.
func WriteMetrics(w io.Writer, metrics []Metric) error {
	var prev string
	for _, m := range metrics {
		if m.Name != prev {
			if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.Name, m.Help, m.Name, m.Type); err != nil {
				return err
			}
			prev = m.Name
		}
		labels := ""
		for i := 0; i+1 < len(m.Labels); i += 2 {
			if labels != "" {
				labels += ","
			}
			labels += fmt.Sprintf("%s=%q", m.Labels[i], m.Labels[i+1])
		}
		if labels != "" {
			labels = "{" + labels + "}"
		}
		if _, err := fmt.Fprintf(w, "%s%s %g\n", m.Name, labels, m.Value); err != nil {
			return err
		}
	}
	return nil
}
