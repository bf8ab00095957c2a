package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/stratadb/strata/engine"
)

// The Prometheus HTTP API (GET or POST, form-encoded): the envelope
// {"status":"success","data":...} or {"status":"error","errorType":...,
// "error":...}, with Prometheus' status codes: 400 bad_data, 422 execution,
// 503 timeout or canceled, 500 internal.

// maxPoints is the most steps a range query may have, as in Prometheus.
const maxPoints = 11000

type apiError struct {
	typ    string
	status int
	err    error
}

func badData(format string, args ...any) *apiError {
	return &apiError{"bad_data", http.StatusBadRequest, fmt.Errorf(format, args...)}
}

func apiFail(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]string{"status": "error", "errorType": e.typ, "error": e.err.Error()})
}

// apiSuccess writes the envelope around data, already JSON.
func apiSuccess(w http.ResponseWriter, data []byte, warns annotations.Annotations) {
	var b bytes.Buffer
	b.Grow(len(data) + 64)
	b.WriteString(`{"status":"success","data":`)
	b.Write(data)
	if len(warns) > 0 {
		ws, infos := warns.AsStrings("", 0, 0)
		if len(ws) > 0 {
			b.WriteString(`,"warnings":`)
			j, _ := json.Marshal(ws)
			b.Write(j)
		}
		if len(infos) > 0 {
			b.WriteString(`,"infos":`)
			j, _ := json.Marshal(infos)
			b.Write(j)
		}
	}
	b.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

func apiData(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		apiFail(w, &apiError{"internal", http.StatusInternalServerError, err})
		return
	}
	apiSuccess(w, b, nil)
}

// parseForm parses the query string and a form body of at most
// MaxBodyBytes.
func (s *Server) parseForm(w http.ResponseWriter, r *http.Request) *apiError {
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{"bad_data", http.StatusRequestEntityTooLarge, err}
		}
		return badData("error parsing form values: %v", err)
	}
	return nil
}

// The times the API accepts, Prometheus' MinTime and MaxTime: far enough
// inside the int64 range of ms that a step, a range or a lookback added to
// any of them does not overflow. Prometheus' clients send their RFC 3339
// forms for "no bound".
var (
	minTime          = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime          = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()
	minTimeMs        = minTime.UnixMilli()
	maxTimeMs        = maxTime.UnixMilli()
	minTimeFormatted = minTime.Format(time.RFC3339Nano)
	maxTimeFormatted = maxTime.Format(time.RFC3339Nano)
)

// parseTime parses a Unix time in (fractional) seconds, rounded to the ms
// as Prometheus does, or an RFC 3339 time, into ms. A time outside
// [minTime, maxTime] (NaN and infinities too) is an error.
func parseTime(s string) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(f)
		if !(sec >= float64(minTimeMs/1000) && sec <= float64(maxTimeMs/1000)) {
			return 0, fmt.Errorf("cannot parse %q to a valid timestamp: out of range", s)
		}
		ms := int64(sec)*1000 + int64(math.Round(frac*1000))
		if ms < minTimeMs || ms > maxTimeMs {
			return 0, fmt.Errorf("cannot parse %q to a valid timestamp: out of range", s)
		}
		return ms, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	switch s {
	case minTimeFormatted:
		return minTimeMs, nil
	case maxTimeFormatted:
		return maxTimeMs, nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

func timeParam(r *http.Request, name string, def int64) (int64, *apiError) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return 0, badData("invalid parameter %q: invalid time value for '%s': %v", name, name, err)
	}
	return t, nil
}

// requiredTimeParam is timeParam for a parameter that must be given.
func requiredTimeParam(r *http.Request, name string) (int64, *apiError) {
	if r.FormValue(name) == "" {
		return 0, badData("invalid parameter %q: missing", name)
	}
	return timeParam(r, name, 0)
}

// parseDuration parses (fractional) seconds or a Prometheus duration.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d := f * float64(time.Second)
		if math.IsNaN(d) || d >= math.MaxInt64 || d < math.MinInt64 {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(d), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

func limitParam(r *http.Request) (int, *apiError) {
	v := r.FormValue("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badData("invalid parameter \"limit\": cannot parse %q: must be a non-negative integer", v)
	}
	return n, nil
}

// queryCtx applies the timeout parameter and the server's query timeout.
// queryPrep reads the options and the deadline that every PromQL query
// request may set (lookback_delta, timeout).
func (s *Server) queryPrep(r *http.Request) (promql.QueryOpts, context.Context, context.CancelFunc, *apiError) {
	opts, e := s.queryOpts(r)
	if e != nil {
		return nil, nil, nil, e
	}
	ctx, cancel, e := s.queryCtx(r)
	if e != nil {
		return nil, nil, nil, e
	}
	return opts, ctx, cancel, nil
}

func (s *Server) queryCtx(r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	timeout := s.opts.QueryTimeout
	if v := r.FormValue("timeout"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, nil, badData("invalid parameter \"timeout\": %v", err)
		}
		if d > 0 && d < timeout {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	return ctx, cancel, nil
}

func (s *Server) queryOpts(r *http.Request) (promql.QueryOpts, *apiError) {
	lookback := s.opts.LookbackDelta
	if v := r.FormValue("lookback_delta"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, badData("error parsing lookback delta duration: %v", err)
		}
		lookback = d
	}
	return promql.NewPrometheusQueryOpts(r.FormValue("stats") == "all", lookback, nil), nil
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	if e := s.parseForm(w, r); e != nil {
		apiFail(w, e)
		return
	}
	ts, e := timeParam(r, "time", s.opts.Now().UnixMilli())
	if e != nil {
		apiFail(w, e)
		return
	}
	s.runQuery(w, r, func(ctx context.Context, opts promql.QueryOpts) (promql.Query, error) {
		return s.engine.NewInstantQuery(ctx, s.store, opts, r.FormValue("query"), time.UnixMilli(ts))
	})
}

func (s *Server) queryRange(w http.ResponseWriter, r *http.Request) {
	if e := s.parseForm(w, r); e != nil {
		apiFail(w, e)
		return
	}
	start, e := requiredTimeParam(r, "start")
	if e != nil {
		apiFail(w, e)
		return
	}
	end, e := requiredTimeParam(r, "end")
	if e != nil {
		apiFail(w, e)
		return
	}
	if end < start {
		apiFail(w, badData("invalid parameter \"end\": end timestamp must not be before start time"))
		return
	}
	step, e := stepParam(r)
	if e != nil {
		apiFail(w, e)
		return
	}
	// Count the steps as the engine will take them, in whole ms. end >=
	// start, so the difference fits in a uint64.
	if uint64(end-start)/uint64(step.Milliseconds()) > maxPoints {
		apiFail(w, badData("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
		return
	}
	s.runQuery(w, r, func(ctx context.Context, opts promql.QueryOpts) (promql.Query, error) {
		return s.engine.NewRangeQuery(ctx, s.store, opts, r.FormValue("query"), time.UnixMilli(start), time.UnixMilli(end), step)
	})
}

// runQuery makes the PromQL query of r with newQuery, under the options
// and deadline r sets, runs it and answers with its result.
func (s *Server) runQuery(w http.ResponseWriter, r *http.Request,
	newQuery func(ctx context.Context, opts promql.QueryOpts) (promql.Query, error)) {
	opts, ctx, cancel, e := s.queryPrep(r)
	if e != nil {
		apiFail(w, e)
		return
	}
	defer cancel()
	qry, err := newQuery(ctx, opts)
	if err != nil {
		apiFail(w, &apiError{"bad_data", http.StatusBadRequest, err})
		return
	}
	defer qry.Close()
	s.answer(w, qry.Exec(ctx))
}

// stepParam reads the step of a range query: (fractional) seconds or a
// duration, at least 1ms, since PromQL evaluates in whole ms.
func stepParam(r *http.Request) (time.Duration, *apiError) {
	v := r.FormValue("step")
	if v == "" {
		return 0, badData("invalid parameter \"step\": missing")
	}
	step, err := parseDuration(v)
	if err != nil {
		return 0, badData("invalid parameter \"step\": %v", err)
	}
	if step <= 0 {
		return 0, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	if step < time.Millisecond {
		return 0, badData("invalid parameter \"step\": query resolution step widths under 1ms are not accepted")
	}
	return step, nil
}

// answer writes a query result or its error.
func (s *Server) answer(w http.ResponseWriter, res *promql.Result) {
	if res.Err != nil {
		apiFail(w, execError(res.Err))
		return
	}
	var b []byte
	b = append(b, `{"resultType":"`...)
	b = append(b, res.Value.Type()...)
	b = append(b, `","result":`...)
	switch v := res.Value.(type) {
	case promql.Vector:
		b = append(b, '[')
		for i, smp := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, smp.Metric)
			b = append(b, `,"value":`...)
			b = appendPoint(b, smp.T, smp.F)
			b = append(b, '}')
		}
		b = append(b, ']')
	case promql.Matrix:
		b = append(b, '[')
		for i, ser := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, ser.Metric)
			b = append(b, `,"values":[`...)
			for j, p := range ser.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendPoint(b, p.T, p.F)
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	case promql.Scalar:
		b = appendPoint(b, v.T, v.V)
	case promql.String:
		b = append(b, '[')
		b = appendTime(b, v.T)
		b = append(b, ',')
		b = appendString(b, v.V)
		b = append(b, ']')
	default:
		apiFail(w, &apiError{"internal", http.StatusInternalServerError, fmt.Errorf("unexpected result type %T", v)})
		return
	}
	b = append(b, '}')
	apiSuccess(w, b, res.Warnings)
}

// execError maps a query failure to Prometheus' error types.
func execError(err error) *apiError {
	var (
		canceled promql.ErrQueryCanceled
		timeout  promql.ErrQueryTimeout
		stor     promql.ErrStorage
		se       *StorageError
	)
	switch {
	case errors.As(err, &canceled), errors.Is(err, context.Canceled):
		return &apiError{"canceled", http.StatusServiceUnavailable, err}
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{"timeout", http.StatusServiceUnavailable, err}
	case errors.As(err, &se):
		return storageError(err)
	case errors.As(err, &stor):
		return &apiError{"internal", http.StatusInternalServerError, err}
	}
	return &apiError{"execution", http.StatusUnprocessableEntity, err}
}

// storageError maps a failure of the database.
func storageError(err error) *apiError {
	switch {
	case errors.Is(err, context.Canceled):
		return &apiError{"canceled", http.StatusServiceUnavailable, err}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{"timeout", http.StatusServiceUnavailable, err}
	case errors.Is(err, engine.ErrInvalid):
		return &apiError{"bad_data", http.StatusBadRequest, err}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{"unavailable", http.StatusServiceUnavailable, err}
	}
	return &apiError{"internal", http.StatusInternalServerError, err}
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	})
	return append(b, '}')
}

func appendPoint(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = appendTime(b, t)
	b = append(b, ',', '"')
	b = appendFloat(b, v)
	return append(b, '"', ']')
}

// appendFloat writes v as Prometheus' API does: shortest decimal, in
// exponent form when |v| is below 1e-6 or at least 1e21.
func appendFloat(b []byte, v float64) []byte {
	format := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, v, format, -1, 64)
}

// appendTime writes a ms timestamp as seconds with up to three decimals.
func appendTime(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		if t == math.MinInt64 {
			return append(b, "9223372036854775.808"...)
		}
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		b = append(b, '.')
		digits := []byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(b, digits...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	if isPlainJSON(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	j, _ := json.Marshal(s)
	return append(b, j...)
}

func isPlainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// promParser parses the match[] selectors.
var promParser = parser.NewParser(parser.Options{})

// matchSets parses the match[] parameters. As in Prometheus, each selector
// needs a matcher that does not match the empty string: one that matches
// every series ({__name__=~".*"}, {job!="x"}) would read the whole
// database.
func matchSets(r *http.Request) ([][]*labels.Matcher, *apiError) {
	var out [][]*labels.Matcher
	for _, s := range r.Form["match[]"] {
		ms, err := promParser.ParseMetricSelector(s)
		if err != nil {
			return nil, badData("invalid parameter \"match[]\": %v", err)
		}
		if !selective(ms) {
			return nil, badData("match[] must contain at least one non-empty matcher")
		}
		out = append(out, ms)
	}
	return out, nil
}

// selective reports whether ms has a matcher that the empty string fails,
// so that ms cannot select every series.
func selective(ms []*labels.Matcher) bool {
	for _, m := range ms {
		if m != nil && !m.Matches("") {
			return true
		}
	}
	return false
}

// metaRange reads start and end of the metadata endpoints: all time by
// default.
func metaRange(r *http.Request) (int64, int64, *apiError) {
	start, e := timeParam(r, "start", math.MinInt64)
	if e != nil {
		return 0, 0, e
	}
	end, e := timeParam(r, "end", math.MaxInt64)
	if e != nil {
		return 0, 0, e
	}
	if end < start {
		return 0, 0, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	return start, end, nil
}

func (s *Server) series(w http.ResponseWriter, r *http.Request) {
	if e := s.parseForm(w, r); e != nil {
		apiFail(w, e)
		return
	}
	sets, start, end, limit, e := metaParams(r)
	if e == nil && len(sets) == 0 {
		e = badData("no match[] parameter provided")
	}
	if e != nil {
		apiFail(w, e)
		return
	}
	q, _ := s.store.Querier(start, end)
	defer q.Close()
	hints := &storage.SelectHints{Start: start, End: end, Func: "series"}
	var all []labels.Labels
	for _, ms := range sets {
		ss := q.Select(r.Context(), true, hints, ms...)
		for ss.Next() {
			all = append(all, ss.At().Labels())
		}
		if err := ss.Err(); err != nil {
			apiFail(w, storageError(err))
			return
		}
	}
	slices.SortFunc(all, labels.Compare)
	all = slices.CompactFunc(all, labels.Equal)
	var warns annotations.Annotations
	if limit > 0 && len(all) > limit {
		all = all[:limit]
		warns.Add(errors.New("results truncated due to limit"))
	}
	b := []byte{'['}
	for i, ls := range all {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(b, ls)
	}
	apiSuccess(w, append(b, ']'), warns)
}

func (s *Server) labels(w http.ResponseWriter, r *http.Request) {
	s.labelMeta(w, r, "")
}

func (s *Server) labelValues(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, labelValuesPrefix), "/values")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if name == "" || !utf8.ValidString(name) {
		apiFail(w, badData("invalid label name: %q", name))
		return
	}
	s.labelMeta(w, r, name)
}

// labelMeta answers /labels (name "") and /label/<name>/values.
func (s *Server) labelMeta(w http.ResponseWriter, r *http.Request, name string) {
	if e := s.parseForm(w, r); e != nil {
		apiFail(w, e)
		return
	}
	sets, start, end, limit, e := metaParams(r)
	if e != nil {
		apiFail(w, e)
		return
	}
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	q, _ := s.store.Querier(start, end)
	defer q.Close()
	set := map[string]struct{}{}
	for _, ms := range sets {
		var vals []string
		var err error
		if name == "" {
			vals, _, err = q.LabelNames(r.Context(), nil, ms...)
		} else {
			vals, _, err = q.LabelValues(r.Context(), name, nil, ms...)
		}
		if err != nil {
			apiFail(w, storageError(err))
			return
		}
		for _, v := range vals {
			set[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	var warns annotations.Annotations
	if limit > 0 && len(out) > limit {
		out = out[:limit]
		warns.Add(errors.New("results truncated due to limit"))
	}
	b, _ := json.Marshal(out)
	apiSuccess(w, b, warns)
}

func (s *Server) buildInfo(w http.ResponseWriter, r *http.Request) {
	apiData(w, map[string]string{
		"version":   PrometheusVersion,
		"revision":  "strata",
		"branch":    "",
		"buildUser": "",
		"buildDate": "",
		"goVersion": runtime.Version(),
	})
}

// metaParams reads the parameters the metadata endpoints share: the
// match[] selectors, the time range and the limit.
func metaParams(r *http.Request) (sets [][]*labels.Matcher, start, end int64, limit int, e *apiError) {
	if sets, e = matchSets(r); e != nil {
		return
	}
	if start, end, e = metaRange(r); e != nil {
		return
	}
	limit, e = limitParam(r)
	return
}
