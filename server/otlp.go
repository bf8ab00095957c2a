package server

import (
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
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
// skipped (strata stores finite numbers only), exponential histograms
// (native histograms in Prometheus) too, all counted in
// strata_otlp_samples_skipped_total. Delta
// temporality is refused, as by Prometheus' default.
//
// A request is atomic: all of its samples are stored in one Commit of an
// engine appender (each series resolved once, its other samples appended
// by ref), or none (400 for a request the translator or the engine
// refuses, 503 for a stalled engine). The answer is 200 with an empty
// ExportMetricsServiceResponse in the request's encoding.
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
	ea, _ := s.otlpApps.Get().(*engine.Appender)
	if ea == nil {
		ea = s.db.Appender()
	}
	defer func() {
		ea.Rollback()
		s.otlpApps.Put(ea)
	}()
	app := &otlpAppender{app: ea, series: map[uint64]otlpSeries{}}
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
	if err = app.failed; err == nil {
		err = app.app.Commit()
	}
	switch {
	case errors.Is(err, engine.ErrClosed):
		s.unavailable(w)
		http.Error(w, "database is closed", http.StatusServiceUnavailable)
		return
	case errors.Is(err, engine.ErrReadOnly):
		http.Error(w, "database is read-only", http.StatusForbidden)
		return
	case errors.Is(err, engine.ErrInvalid), errors.Is(err, engine.ErrFieldTypeConflict), errors.Is(err, engine.ErrSeriesLimit):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		s.opts.Logger.Error("otlp write", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, c := range []struct {
		c prometheus.Counter
		n int
	}{{s.metrics.otlpHistograms, app.histograms}, {s.metrics.otlpStale, app.stale}, {s.metrics.otlpNonFinite, app.nonFinite}} {
		if c.n > 0 {
			c.c.Add(float64(c.n))
		}
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

// otlpAppender hands the translator's samples to an engine appender. The
// first sample of a series resolves it; the others are appended by its ref.
type otlpAppender struct {
	app    *engine.Appender
	series map[uint64]otlpSeries // by label hash
	tags   []engine.Tag          // scratch of resolve
	err    error                 // the first series that cannot be a point
	failed error                 // the first refusal (or failure) of the engine
	// Samples not stored: native histograms, stale markers, NaN and ±Inf.
	histograms, stale, nonFinite int
}

type otlpSeries struct {
	ls  labels.Labels
	ref engine.SeriesRef
}

var _ storage.AppenderV2 = (*otlpAppender)(nil)

func (a *otlpAppender) Append(ref storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	if ref == 0 {
		ref = storage.SeriesRef(ls.Hash())
	}
	switch {
	case a.failed != nil:
		return ref, nil
	case h != nil || fh != nil:
		a.histograms++
		return ref, nil
	case value.IsStaleNaN(v):
		a.stale++
		return ref, nil
	case math.IsNaN(v) || math.IsInf(v, 0):
		a.nonFinite++
		return ref, nil
	}
	h64 := uint64(ref)
	if c, ok := a.series[h64]; ok && labels.Equal(c.ls, ls) {
		r, err := a.app.Append(c.ref, "", nil, "value", t*msNanos, engine.Float(v))
		if err != nil {
			a.failed = fmt.Errorf("series %s: %w", ls.String(), err)
		} else if r != c.ref {
			a.series[h64] = otlpSeries{ls: c.ls, ref: r}
		}
		return ref, nil
	}
	var measurement string
	tags := a.tags[:0]
	var dup error
	ls.Range(func(l labels.Label) {
		switch {
		case l.Name == labels.MetricName:
			measurement = l.Value
		case l.Value != "":
			if n := len(tags); n > 0 && tags[n-1].Key == l.Name {
				dup = fmt.Errorf("duplicate label %q", l.Name)
			}
			tags = append(tags, engine.Tag{Key: l.Name, Value: l.Value})
		}
	})
	a.tags = tags
	if measurement == "" {
		dup = errors.New("no metric name")
	}
	if dup != nil {
		if a.err == nil {
			a.err = fmt.Errorf("series %s: %w", ls.String(), dup)
		}
		return ref, nil
	}
	r, err := a.app.Append(0, measurement, tags, "value", t*msNanos, engine.Float(v))
	if err != nil {
		a.failed = fmt.Errorf("series %s: %w", ls.String(), err)
		return ref, nil
	}
	// The translator's labels are not changed after Append (as for
	// Prometheus' own head, which keeps them).
	a.series[h64] = otlpSeries{ls: ls, ref: r}
	return ref, nil
}

func (a *otlpAppender) Commit() error   { return nil }
func (a *otlpAppender) Rollback() error { return nil }
