package server

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratadb/strata/engine"
)

// metrics are the server's own metrics and the engine's, served by
// /metrics from a registry of the handler's own.
type metrics struct {
	handler http.Handler

	requests        *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	pointsWritten   prometheus.Counter
	linesRejected   prometheus.Counter
	stalled         prometheus.Counter
	remoteSamples   prometheus.Counter
	remoteSkipped   *prometheus.CounterVec
	remoteNonFinite prometheus.Counter
	// remoteStale and remoteOutOfRange are remoteSkipped's other reasons.
	remoteStale      prometheus.Counter
	remoteOutOfRange prometheus.Counter
	remoteHistograms prometheus.Counter
	// otlpSkipped counts OTLP samples not stored, by reason.
	otlpSkipped                              *prometheus.CounterVec
	otlpHistograms, otlpStale, otlpNonFinite prometheus.Counter
	// remoteRefused counts refused remote-write series by reason (see
	// refusedReasons).
	remoteRefusedVec *prometheus.CounterVec
	remoteRefused    [numRefused]prometheus.Counter
}

func newMetrics(db *engine.DB, extra prometheus.Registerer, more []prometheus.Collector) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_http_requests_total",
			Help: "HTTP requests served, by handler and status code.",
		}, []string{"handler", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by handler.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"handler"}),
		pointsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_http_points_written_total",
			Help: "Points written through the line-protocol endpoints.",
		}),
		linesRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_http_lines_rejected_total",
			Help: "Line-protocol lines rejected (partial writes).",
		}),
		stalled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_http_writes_stalled_total",
			Help: "Writes answered 503 because the engine stalled writes.",
		}),
		remoteSamples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_remote_write_samples_total",
			Help: "Remote-write samples stored.",
		}),
		remoteSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_remote_write_samples_skipped_total",
			Help: "Remote-write samples not stored, by reason: stale (staleness markers), non_finite (NaN, +Inf, -Inf), out_of_range (a timestamp that ns cannot hold) or histogram (native histograms, one per histogram sample).",
		}, []string{"reason"}),
		otlpSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_otlp_samples_skipped_total",
			Help: "OTLP samples not stored, by reason: histogram (exponential histograms, which Prometheus stores as native histograms), stale (points flagged as having no recorded value) or non_finite (NaN, +Inf, -Inf).",
		}, []string{"reason"}),
		remoteRefusedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_remote_write_series_refused_total",
			Help: "Remote-write series refused, none of their samples stored, by reason: missing_name, empty_label_name, invalid_utf8, duplicate_label, too_many_labels (Prometheus' receiver's rules), or invalid, type_conflict, engine (refused by the database).",
		}, []string{"reason"}),
	}
	m.remoteNonFinite = m.remoteSkipped.WithLabelValues("non_finite")
	m.remoteStale = m.remoteSkipped.WithLabelValues("stale")
	m.remoteOutOfRange = m.remoteSkipped.WithLabelValues("out_of_range")
	m.remoteHistograms = m.remoteSkipped.WithLabelValues("histogram")
	m.otlpHistograms = m.otlpSkipped.WithLabelValues("histogram")
	m.otlpStale = m.otlpSkipped.WithLabelValues("stale")
	m.otlpNonFinite = m.otlpSkipped.WithLabelValues("non_finite")
	for i, r := range refusedReasons {
		m.remoteRefused[i] = m.remoteRefusedVec.WithLabelValues(r)
	}

	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		m.requests, m.latency, m.pointsWritten, m.linesRejected, m.stalled, m.remoteSamples, m.remoteSkipped, m.otlpSkipped, m.remoteRefusedVec,
		&statsCollector{db: db},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
		// The runtime collectors (the last two) are the process's own, which
		// the caller's registry likely has already.
		if extra != nil && i < len(cs)-2 {
			if err := extra.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range more {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m, nil
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument counts the requests of h by status code and times them.
func (m *metrics) instrument(name string, h http.HandlerFunc) http.HandlerFunc {
	obs := m.latency.WithLabelValues(name)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		returned := false
		defer func() {
			code := sw.code
			switch {
			case code == 0 && !returned:
				code = http.StatusInternalServerError // panicking: no answer, count a 500
			case code == 0:
				code = http.StatusOK
			}
			m.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
			obs.Observe(time.Since(start).Seconds())
		}()
		h(sw, r)
		returned = true
	}
}

// statsCollector exposes db.Stats() as strata_* metrics.
type statsCollector struct{ db *engine.DB }

type statDesc struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	get  func(*engine.Stats) float64
}

func gauge(name, help string, get func(*engine.Stats) float64) statDesc {
	return statDesc{prometheus.NewDesc("strata_"+name, help, nil, nil), prometheus.GaugeValue, get}
}

func counter(name, help string, get func(*engine.Stats) float64) statDesc {
	return statDesc{prometheus.NewDesc("strata_"+name, help, nil, nil), prometheus.CounterValue, get}
}

var (
	statDescs = []statDesc{
		gauge("series", "Series known to the catalog.", func(s *engine.Stats) float64 { return float64(s.Series) }),
		gauge("memtable_bytes", "Bytes in the active and sealed memtables.", func(s *engine.Stats) float64 { return float64(s.MemTableBytes) }),
		gauge("immutable_memtables", "Sealed memtables waiting for flush.", func(s *engine.Stats) float64 { return float64(s.ImmutableMemTables) }),
		gauge("disk_bytes", "Bytes of segments and WAL.", func(s *engine.Stats) float64 { return float64(s.DiskBytes) }),
		gauge("wal_bytes", "Bytes of WAL.", func(s *engine.Stats) float64 { return float64(s.WALBytes) }),
		gauge("tombstones", "Deletes not yet applied by compaction.", func(s *engine.Stats) float64 { return float64(s.Tombstones) }),
		counter("points_written_total", "Points written.", func(s *engine.Stats) float64 { return float64(s.PointsWritten) }),
		counter("samples_written_total", "Samples (point fields) written.", func(s *engine.Stats) float64 { return float64(s.SamplesWritten) }),
		counter("deletes_total", "Delete calls.", func(s *engine.Stats) float64 { return float64(s.Deletes) }),
		counter("flushes_total", "Memtable flushes.", func(s *engine.Stats) float64 { return float64(s.Flushes) }),
		counter("flush_duration_seconds_total", "Time spent flushing.", func(s *engine.Stats) float64 { return s.FlushDuration.Seconds() }),
		counter("flushed_bytes_total", "Segment bytes written by flushes.", func(s *engine.Stats) float64 { return float64(s.FlushedBytes) }),
		counter("compactions_total", "Compactions run.", func(s *engine.Stats) float64 { return float64(s.Compactions) }),
		counter("compaction_duration_seconds_total", "Time spent compacting.", func(s *engine.Stats) float64 { return s.CompactionDuration.Seconds() }),
		counter("compaction_read_bytes_total", "Segment bytes read by compactions.", func(s *engine.Stats) float64 { return float64(s.CompactionBytesRead) }),
		counter("compaction_written_bytes_total", "Segment bytes written by compactions.", func(s *engine.Stats) float64 { return float64(s.CompactionBytesWritten) }),
		gauge("pending_compaction_bytes", "Bytes the compaction policy wants to rewrite.", func(s *engine.Stats) float64 { return float64(s.PendingCompactionBytes) }),
		gauge("write_amplification", "(flushed + compaction-written bytes) / flushed bytes.", func(s *engine.Stats) float64 { return s.WriteAmplification }),
		counter("write_stalls_total", "Writes that waited for a flush or compaction.", func(s *engine.Stats) float64 { return float64(s.WriteStalls) }),
		counter("write_slowdowns_total", "Writes delayed to let background work catch up.", func(s *engine.Stats) float64 { return float64(s.WriteSlowdowns) }),
		counter("series_limit_refusals_total", "New series refused for MaxSeries or MaxSeriesPerMeasurement.", func(s *engine.Stats) float64 { return float64(s.SeriesLimitRefusals) }),
		gauge("oldest_kept_timestamp_seconds", "Samples older than this Unix time are dropped for good (by retention or the disk budget); 0 while none is.", func(s *engine.Stats) float64 {
			if s.OldestKept == math.MinInt64 {
				return 0
			}
			return float64(s.OldestKept) / 1e9
		}),
		counter("blocks_pushed_down_total", "Segment blocks aggregated from their stats alone.", func(s *engine.Stats) float64 { return float64(s.BlocksPushedDown) }),
		counter("rollup_compactions_total", "Compactions that rolled up raw samples or cascaded rollup buckets.", func(s *engine.Stats) float64 { return float64(s.RollupCompactions) }),
		counter("rollup_samples_total", "Raw samples folded into rollup buckets by compaction.", func(s *engine.Stats) float64 { return float64(s.SamplesRolledUp) }),
		counter("rollup_buckets_written_total", "Rollup buckets written by compactions, those carried over unchanged included.", func(s *engine.Stats) float64 { return float64(s.RollupBucketsWritten) }),
		counter("rollup_buckets_cascaded_total", "Rollup buckets merged into a coarser rule's bucket.", func(s *engine.Stats) float64 { return float64(s.RollupBucketsCascaded) }),
	}
	segmentsDesc   = prometheus.NewDesc("strata_segments", "Segments per level.", []string{"level"}, nil)
	levelBytesDesc = prometheus.NewDesc("strata_level_bytes", "Segment bytes per level.", []string{"level"}, nil)
	rollupBuckets  = prometheus.NewDesc("strata_rollup_buckets", "Rollup buckets the segments hold, per rule width (while rollup rules are set).", []string{"every"}, nil)
	rollupEndDesc  = prometheus.NewDesc("strata_rollup_end_timestamp_seconds", "Unix time the newest rollup bucket of this width ends: newer data is finer.", []string{"every"}, nil)
)

// everyLabel names a rollup width the way the rules are written: 1m, 1h,
// 90s; time.Duration's form for widths under a second.
func everyLabel(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d >= time.Second && d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range statDescs {
		ch <- d.desc
	}
	ch <- segmentsDesc
	ch <- levelBytesDesc
	ch <- rollupBuckets
	ch <- rollupEndDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.db.Stats()
	for _, d := range statDescs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.typ, d.get(&st))
	}
	for l, n := range st.SegmentsPerLevel {
		ch <- prometheus.MustNewConstMetric(segmentsDesc, prometheus.GaugeValue, float64(n), strconv.Itoa(l))
	}
	for l, n := range st.BytesPerLevel {
		ch <- prometheus.MustNewConstMetric(levelBytesDesc, prometheus.GaugeValue, float64(n), strconv.Itoa(l))
	}
	for _, l := range st.RollupLevels {
		every := everyLabel(l.Every)
		ch <- prometheus.MustNewConstMetric(rollupBuckets, prometheus.GaugeValue, float64(l.Buckets), every)
		ch <- prometheus.MustNewConstMetric(rollupEndDesc, prometheus.GaugeValue, float64(l.End)/1e9, every)
	}
}
