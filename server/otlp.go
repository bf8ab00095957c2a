package server

import (
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	otlptranslator "github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/stratadb/strata/engine"
)

// otlpWrite serves OTLP/HTTP metrics (POST /api/v1/otlp/v1/metrics): an
// ExportMetricsServiceRequest as protobuf (application/x-protobuf, the
// default) or JSON (application/json), gzip accepted, at most MaxBodyBytes
// after decompression.
//
// The metrics are translated by Prometheus' own OTLP translator with the
// settings of Prometheus' receiver by default (UnderscoreEscapingWithSuffixes):
// names escaped to valid Prometheus names with unit and type suffixes
// (monotonic sums get _total), histograms as _bucket{le}, _sum and _count,
// summaries as quantiles, _sum and _count, the resource's service.name
// (with service.namespace) as job and service.instance.id as instance, the
// other resource attributes on target_info. Each resulting sample is stored
// as remote write stores it: measurement = __name__, the other labels as
// tags, field "value", the ms timestamp in ns. NaN and infinite samples are
// skipped (strata stores finite numbers only), native histograms too. Delta
// temporality is refused, as by Prometheus' default.
//
// A request is atomic: all of its samples are written in one Write, or none
// (400 for a request the translator refuses, 503 for a stalled engine). The
// answer is 200 with an empty ExportMetricsServiceResponse in the
// request's encoding.
func (s *Server) otlpWrite(w http.ResponseWriter, r *http.Request) {
	isJSON := false
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			http.Error(w, fmt.Sprintf("bad Content-Type %q", ct), http.StatusUnsupportedMediaType)
			return
		case mt == "application/json":
			isJSON = true
		case mt != "application/x-protobuf" && mt != "application/protobuf":
			http.Error(w, fmt.Sprintf("unsupported Content-Type %q: OTLP wants application/x-protobuf or application/json", ct),
				http.StatusUnsupportedMediaType)
			return
		}
	}
	buf, status, err := s.readBody(r)
	defer putBuffer(buf)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	req := pmetricotlp.NewExportRequest()
	if isJSON {
		err = req.UnmarshalJSON(buf.Bytes())
	} else {
		err = req.UnmarshalProto(buf.Bytes())
	}
	if err != nil {
		http.Error(w, "decode OTLP request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !s.admit(r.Context()) {
		s.unavailable(w)
		http.Error(w, "writes are stalled; retry later", http.StatusServiceUnavailable)
		return
	}
	app := &otlpAppender{points: make([]engine.Point, 0, req.Metrics().DataPointCount()), series: map[uint64]otlpSeries{}}
	conv := otlptranslator.NewPrometheusConverter(app)
	cfg := config.DefaultOTLPConfig
	annots, err := conv.FromMetrics(r.Context(), req.Metrics(), otlptranslator.Settings{
		AddMetricSuffixes:                    cfg.TranslationStrategy.ShouldAddSuffixes(),
		AllowUTF8:                            !cfg.TranslationStrategy.ShouldEscape(),
		PromoteResourceAttributes:            otlptranslator.NewPromoteResourceAttributes(cfg),
		KeepIdentifyingResourceAttributes:    cfg.KeepIdentifyingResourceAttributes,
		PromoteScopeMetadata:                 cfg.PromoteScopeMetadata,
		LookbackDelta:                        s.opts.LookbackDelta,
		LabelNameUnderscoreSanitization:      cfg.LabelNameUnderscoreSanitization,
		LabelNamePreserveMultipleUnderscores: cfg.LabelNamePreserveMultipleUnderscores,
	})
	if ws, _ := annots.AsStrings("", 0, 0); len(ws) > 0 {
		s.opts.Logger.Warn("otlp: translation warnings", "warnings", ws)
	}
	if err == nil {
		err = app.err
	}
	if err != nil {
		http.Error(w, "translate OTLP metrics: "+err.Error(), http.StatusBadRequest)
		return
	}
	// This is where an engine appender with series references will take
	// the samples instead of one Write of points.
	err = s.db.Write(app.points)
	switch {
	case errors.Is(err, engine.ErrClosed):
		s.unavailable(w)
		http.Error(w, "database is closed", http.StatusServiceUnavailable)
		return
	case errors.Is(err, engine.ErrReadOnly):
		http.Error(w, "database is read-only", http.StatusForbidden)
		return
	case errors.Is(err, engine.ErrInvalid), errors.Is(err, engine.ErrFieldTypeConflict):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		s.opts.Logger.Error("otlp write", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp := pmetricotlp.NewExportResponse()
	var out []byte
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		out, err = resp.MarshalJSON()
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, err = resp.MarshalProto()
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// otlpAppender collects the translator's samples as points. Points of one
// series share their measurement and tags.
type otlpAppender struct {
	points []engine.Point
	series map[uint64]otlpSeries // by label hash
	err    error                 // the first series that cannot be a point
}

type otlpSeries struct {
	ls          labels.Labels
	measurement string
	tags        []engine.Tag
}

var _ storage.AppenderV2 = (*otlpAppender)(nil)

func (a *otlpAppender) Append(ref storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	if ref == 0 {
		ref = storage.SeriesRef(ls.Hash())
	}
	if h != nil || fh != nil || value.IsStaleNaN(v) || math.IsNaN(v) || math.IsInf(v, 0) {
		return ref, nil
	}
	p := engine.Point{Time: t * msNanos, Fields: []engine.Field{{Key: "value", Value: engine.Float(v)}}}
	h64 := uint64(ref)
	if c, ok := a.series[h64]; ok && labels.Equal(c.ls, ls) {
		p.Measurement, p.Tags = c.measurement, c.tags
		a.points = append(a.points, p)
		return ref, nil
	}
	p.Tags = make([]engine.Tag, 0, ls.Len())
	var dup error
	ls.Range(func(l labels.Label) {
		switch {
		case l.Name == labels.MetricName:
			p.Measurement = l.Value
		case l.Value != "":
			if n := len(p.Tags); n > 0 && p.Tags[n-1].Key == l.Name {
				dup = fmt.Errorf("duplicate label %q", l.Name)
			}
			p.Tags = append(p.Tags, engine.Tag{Key: l.Name, Value: l.Value})
		}
	})
	if p.Measurement == "" {
		dup = errors.New("no metric name")
	}
	if dup != nil {
		if a.err == nil {
			a.err = fmt.Errorf("series %s: %w", ls.String(), dup)
		}
		return ref, nil
	}
	a.series[h64] = otlpSeries{ls: ls.Copy(), measurement: p.Measurement, tags: p.Tags}
	a.points = append(a.points, p)
	return ref, nil
}

func (a *otlpAppender) Commit() error   { return nil }
func (a *otlpAppender) Rollback() error { a.points = nil; return nil }
