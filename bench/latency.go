package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms record nanoseconds from 1 ns to an hour with three
// significant digits: a percentile is within 0.1% of the exact one. Their
// memory is fixed (tens of KiB) whatever the number of operations, so a
// mixed run of any duration keeps every latency it measured.
const (
	latencyMax     = int64(time.Hour)
	latencyDigits  = 3
	latencyLowest  = 1
	latencyUnitsMs = 1e6 // nanoseconds per millisecond
)

// latencyRecorder keeps the latencies of one kind of operation: a count,
// the exact maximum and a histogram for the percentiles. It is not safe
// for concurrent use; merge recorders of several goroutines.
type latencyRecorder struct {
	h   *hdrhistogram.Histogram
	max int64
}

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{h: hdrhistogram.New(latencyLowest, latencyMax, latencyDigits)}
}

// record adds one latency. One longer than an hour counts as an hour in
// the percentiles and exactly in the maximum.
func (l *latencyRecorder) record(d time.Duration) {
	ns := min(max(d.Nanoseconds(), latencyLowest), latencyMax)
	l.h.RecordValue(ns) // in range: cannot fail
	l.max = max(l.max, d.Nanoseconds())
}

// merge adds the latencies of o.
func (l *latencyRecorder) merge(o *latencyRecorder) {
	l.h.Merge(o.h)
	l.max = max(l.max, o.max)
}

// count returns the number of latencies recorded.
func (l *latencyRecorder) count() int64 { return l.h.TotalCount() }

// summary returns the count, median, 99th percentile (nearest rank, to
// three significant digits, never above the maximum) and exact maximum in
// milliseconds.
func (l *latencyRecorder) summary() Latency {
	n := l.h.TotalCount()
	if n == 0 {
		return Latency{}
	}
	at := func(p float64) float64 { return float64(min(l.h.ValueAtPercentile(p), l.max)) / latencyUnitsMs }
	return Latency{Count: n, P50Ms: at(50), P99Ms: at(99), MaxMs: float64(l.max) / latencyUnitsMs}
}

// answerSample keeps an evenly spread sample of one query's answers in
// bounded memory: every stride-th answer, from the first; when 2*limit are
// kept, every other one is dropped and the stride doubles. It holds
// between limit and 2*limit answers once it has seen that many.
type answerSample struct {
	limit  int
	stride int64
	seen   int64
	kept   []mixedAnswer
}

func newAnswerSample(limit int) *answerSample {
	return &answerSample{limit: limit, stride: 1, kept: make([]mixedAnswer, 0, 2*limit)}
}

func (s *answerSample) add(a mixedAnswer) {
	if s.seen%s.stride == 0 {
		s.kept = append(s.kept, a)
		if len(s.kept) == 2*s.limit {
			for i := range s.limit {
				s.kept[i] = s.kept[2*i]
			}
			clear(s.kept[s.limit:])
			s.kept = s.kept[:s.limit]
			s.stride *= 2
		}
	}
	s.seen++
}
