package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// msNanos is nanoseconds per millisecond.
const msNanos = int64(time.Millisecond)

// remoteBatch is the number of points per db.Write of a remote write.
const remoteBatch = 5000

// remoteWrite serves Prometheus remote write 1.0: a snappy-compressed
// protobuf WriteRequest. Each sample becomes a point of measurement
// __name__, the other labels as tags (empty values, which Prometheus treats
// as absent, are dropped) and the float field "value", at its ms timestamp
// in ns. Staleness markers and other NaN or infinite samples are skipped
// and counted. A body that does not decode is 400 with nothing stored; a
// series that cannot be stored (no __name__, a bad label) is left out, the
// others stored, and the answer is 400 naming it, which Prometheus does not
// retry.
func (s *Server) remoteWrite(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, params, _ := strings.Cut(ct, ";"); strings.TrimSpace(mt) != "application/x-protobuf" ||
			(params != "" && !strings.Contains(params, "prometheus.WriteRequest")) {
			http.Error(w, fmt.Sprintf("unsupported Content-Type %q: remote write 1.0 wants application/x-protobuf", ct),
				http.StatusUnsupportedMediaType)
			return
		}
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "snappy") {
		http.Error(w, fmt.Sprintf("unsupported Content-Encoding %q: remote write wants snappy", enc),
			http.StatusUnsupportedMediaType)
		return
	}
	limit := s.opts.MaxBodyBytes
	// A snappy block is never much larger than its input.
	maxCompressed := int64(snappy.MaxEncodedLen(int(min(limit, math.MaxInt32))))
	if maxCompressed < 0 || r.ContentLength > maxCompressed {
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	n, err := buf.ReadFrom(io.LimitReader(r.Body, maxCompressed+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if n > maxCompressed {
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	dlen, err := snappy.DecodedLen(buf.Bytes())
	if err != nil {
		http.Error(w, "snappy: "+err.Error(), http.StatusBadRequest)
		return
	}
	if int64(dlen) > limit {
		http.Error(w, fmt.Sprintf("%v: decoded body of %d bytes over the limit of %d", errTooLarge, dlen, limit),
			http.StatusRequestEntityTooLarge)
		return
	}
	raw, err := snappy.Decode(make([]byte, dlen), buf.Bytes())
	if err != nil {
		http.Error(w, "snappy: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		http.Error(w, "protobuf: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !s.admit(r.Context()) {
		s.unavailable(w)
		http.Error(w, "writes are stalled; retry later", http.StatusServiceUnavailable)
		return
	}
	rejected, err := s.appendRemote(&req)
	switch {
	case errors.Is(err, engine.ErrClosed):
		s.unavailable(w)
		http.Error(w, "database is closed", http.StatusServiceUnavailable)
	case errors.Is(err, engine.ErrReadOnly):
		http.Error(w, "database is read-only", http.StatusForbidden)
	case err != nil:
		s.opts.Logger.Error("remote write", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case len(rejected) > 0:
		msg := rejected
		if len(msg) > maxReportedLines {
			msg = append(msg[:maxReportedLines:maxReportedLines], fmt.Sprintf("and %d more", len(rejected)-maxReportedLines))
		}
		http.Error(w, "partial write: "+strings.Join(msg, "; "), http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// storeRemote writes the samples of req. It returns why the series it left
// out were refused, and an engine failure.
func (s *Server) storeRemote(req *prompb.WriteRequest) (rejected []string, err error) {
	pts := make([]engine.Point, 0, min(remoteBatch, countSamples(req)))
	fields := make([]engine.Field, 0, cap(pts))
	series := make([]int, 0, cap(pts)) // index in req.Timeseries of each point
	flush := func() error {
		for len(pts) > 0 {
			err := s.db.Write(pts)
			if err == nil {
				s.metrics.remoteSamples.Add(float64(len(pts)))
				break
			}
			var pe *engine.PointError
			if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(pts) {
				return err
			}
			i := pe.Index
			rejected = append(rejected, fmt.Sprintf("series %s: %v", seriesName(&req.Timeseries[series[i]]), pe.Err))
			// Drop every point of the refused series: they share its fault.
			bad := series[i]
			k := 0
			for j := range pts {
				if series[j] != bad {
					pts[k], series[k] = pts[j], series[j]
					k++
				}
			}
			pts, series = pts[:k], series[:k]
		}
		pts, fields, series = pts[:0], fields[:0], series[:0]
		return nil
	}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		name, tags, err := remoteTags(ts.Labels)
		if err != nil {
			rejected = append(rejected, fmt.Sprintf("series %s: %v", seriesName(ts), err))
			continue
		}
		for _, smp := range ts.Samples {
			v := smp.Value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				if value.IsStaleNaN(v) {
					s.metrics.remoteSkipped.WithLabelValues("stale").Inc()
				} else {
					s.metrics.remoteNonFinite.Inc()
				}
				continue
			}
			if smp.Timestamp > math.MaxInt64/msNanos || smp.Timestamp < math.MinInt64/msNanos {
				rejected = append(rejected, fmt.Sprintf("series %s: timestamp %d ms out of range", seriesName(ts), smp.Timestamp))
				continue
			}
			fields = append(fields, engine.Field{Key: "value", Value: engine.Float(v)})
			pts = append(pts, engine.Point{
				Measurement: name,
				Tags:        tags,
				Fields:      fields[len(fields)-1:],
				Time:        smp.Timestamp * msNanos,
			})
			series = append(series, i)
			if len(pts) == cap(pts) {
				if err := flush(); err != nil {
					return rejected, err
				}
			}
		}
	}
	return rejected, flush()
}

func countSamples(req *prompb.WriteRequest) int {
	n := 0
	for i := range req.Timeseries {
		n += len(req.Timeseries[i].Samples)
	}
	return max(n, 1)
}

// remoteTags splits labels into the metric name and the other labels as
// tags, sorted, without empty values.
func remoteTags(labels []prompb.Label) (string, []engine.Tag, error) {
	var name string
	tags := make([]engine.Tag, 0, len(labels))
	for _, l := range labels {
		switch {
		case l.Name == "__name__":
			name = l.Value
		case l.Name == "":
			return "", nil, errors.New("empty label name")
		case l.Value != "":
			tags = append(tags, engine.Tag{Key: l.Name, Value: l.Value})
		}
	}
	if name == "" {
		return "", nil, errors.New("no __name__ label")
	}
	slices.SortFunc(tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(tags); i++ {
		if tags[i].Key == tags[i-1].Key {
			return "", nil, fmt.Errorf("duplicate label %q", tags[i].Key)
		}
	}
	return name, tags, nil
}

// seriesName formats the labels of ts for an error message.
func seriesName(ts *prompb.TimeSeries) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ts.Labels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
		if b.Len() > 200 {
			b.WriteString("...")
			break
		}
	}
	b.WriteByte('}')
	return b.String()
}
