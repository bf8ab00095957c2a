package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// The PromQL tests load the same data into strata, through the server's
// write endpoints, and into a Prometheus TSDB, with the labels that
// docs/design.md's mapping gives (metric m_f, sanitized label names, ms
// timestamps floored, the later sample of a millisecond winning, bools as
// 0/1, strings invisible), and require the same PromQL engine to give
// identical answers over both.

const (
	pqStart = int64(1_700_000_000_000) // ms
	pqStep  = int64(15_000)
	pqSteps = 240 // one hour
)

// promSample is one sample as Prometheus should see it.
type promSample struct {
	lbls labels.Labels
	t    int64
	v    float64
}

// loadPromQLData writes the test data into ts and returns it as Prometheus
// should see it.
func loadPromQLData(t *testing.T, ts *testServer) []promSample {
	t.Helper()
	var want []promSample

	// Remote write: counters with resets and gaps, and up.
	var rw []prompb.TimeSeries
	for _, job := range []string{"api", "db"} {
		for _, inst := range []string{"i1", "i2"} {
			for _, code := range []string{"200", "500"} {
				lbls := []prompb.Label{{Name: "__name__", Value: "http_requests_total"},
					{Name: "code", Value: code}, {Name: "instance", Value: inst}, {Name: "job", Value: job}}
				s := prompb.TimeSeries{Labels: lbls}
				v := 0.0
				for i := range pqSteps {
					if i%37 == 11 && inst == "i2" {
						continue // a missed scrape
					}
					if i == 150 && code == "500" {
						v = 0 // a counter reset
					}
					v += float64((i*7+len(job)*3+len(code))%11) + 0.5
					s.Samples = append(s.Samples, prompb.Sample{Timestamp: pqStart + int64(i)*pqStep, Value: v})
				}
				rw = append(rw, s)
			}
			up := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "up"},
				{Name: "instance", Value: inst}, {Name: "job", Value: job}}}
			for i := range pqSteps {
				if job == "db" && inst == "i2" && i > 200 {
					break // a target that went away
				}
				up.Samples = append(up.Samples, prompb.Sample{Timestamp: pqStart + int64(i)*pqStep, Value: float64(1 - i/180%2)})
			}
			rw = append(rw, up)
		}
	}
	for _, s := range rw {
		b := labels.NewScratchBuilder(len(s.Labels))
		for _, l := range s.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		ls := b.Labels()
		for _, smp := range s.Samples {
			want = append(want, promSample{ls, smp.Timestamp, smp.Value})
		}
	}
	if code, _, body := ts.do("POST", "/api/v1/write", remoteBody(t, rw...), remoteHeaders...); code != 204 {
		t.Fatalf("remote write: %d %s", code, body)
	}

	// Line protocol: ns timestamps off the millisecond, every field kind, a
	// tag key that is no label name, two samples in one millisecond.
	var lp strings.Builder
	devices := []string{"dev-1", "dev-2", "dev-10", "dev-20"}
	for i := range pqSteps {
		tms := pqStart + int64(i)*pqStep
		for d, dev := range devices {
			host, site := fmt.Sprintf("h%d", d%2), fmt.Sprintf("s%d", d/2)
			temp := 20 + float64(d) + math.Round(math.Sin(float64(i+d)/9)*1000)/100
			count := int64(i*(d+1)) - 50
			ok := (i+d)%3 == 0
			ns := tms*1e6 + int64(d)*1000 + 123
			fmt.Fprintf(&lp, "sensor,device=%s,host.name=%s,site=%s temp=%v,count=%di,ok=%v,note=\"n%d\" %d\n",
				dev, host, site, temp, count, ok, i, ns)
			ls := func(name string) labels.Labels {
				return labels.FromStrings("__name__", name, "device", dev, "host_name", host, "site", site)
			}
			want = append(want, promSample{ls("sensor_temp"), tms, temp}, promSample{ls("sensor_count"), tms, float64(count)})
			okv := 0.0
			if ok {
				okv = 1
			}
			want = append(want, promSample{ls("sensor_ok"), tms, okv})
		}
		// cpu usage, with a second sample later in the same millisecond
		// for host a: the later one is seen.
		for h, host := range []string{"a", "b", "c"} {
			if host == "c" && i > 100 && i < 120 {
				continue
			}
			v := float64((i*13+h*29)%100) + 0.25
			fmt.Fprintf(&lp, "cpu,host=%s usage=%v %d\n", host, v, tms*1e6+1)
			if host == "a" {
				v += 1000
				fmt.Fprintf(&lp, "cpu,host=%s usage=%v %d\n", host, v, tms*1e6+999_999)
			}
			want = append(want, promSample{labels.FromStrings("__name__", "cpu_usage", "host", host), tms, v})
		}
	}
	if code, _, body := ts.do("POST", "/api/v2/write?precision=ns", []byte(lp.String())); code != 204 {
		t.Fatalf("line protocol: %d %s", code, body)
	}
	return want
}

// promTSDB loads samples into a fresh Prometheus TSDB.
func promTSDB(t *testing.T, samples []promSample) *tsdb.DB {
	t.Helper()
	opts := tsdb.DefaultOptions()
	opts.OutOfOrderTimeWindow = 24 * time.Hour.Milliseconds()
	db, err := tsdb.Open(t.TempDir(), nil, nil, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sorted := slices.Clone(samples)
	slices.SortStableFunc(sorted, func(a, b promSample) int { return int(a.t - b.t) })
	app := db.Appender(context.Background())
	for _, s := range sorted {
		if _, err := app.Append(0, s.lbls, s.t, s.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

var promQLExprs = []string{
	`http_requests_total`,
	`up`,
	`cpu_usage`,
	`sensor_temp`,
	`sensor_count`,
	`sensor_ok`,
	`sensor_note`,
	`{__name__=~"sensor_.*", site="s1"}`,
	`{__name__=~"cpu.*|up"}`,
	`sensor_temp{device=~"dev-1.*"}`,
	`sensor_temp{device!="dev-2", host_name!~"h1"}`,
	`sensor_temp{device=""}`,
	`sensor_temp{nope=""}`,
	`{host_name="h0"}`,
	`rate(http_requests_total[5m])`,
	`irate(http_requests_total{code="500"}[2m])`,
	`increase(http_requests_total[10m])`,
	`resets(http_requests_total[30m])`,
	`sum by (job) (rate(http_requests_total[5m]))`,
	`sum without (instance) (http_requests_total)`,
	`avg by (host_name) (sensor_temp)`,
	`count by (__name__) ({__name__=~".+"})`,
	`max_over_time(cpu_usage[10m])`,
	`min_over_time(sensor_temp[7m])`,
	`avg_over_time(sensor_count[5m])`,
	`sum_over_time(sensor_ok[15m])`,
	`count_over_time(cpu_usage[20m])`,
	`last_over_time(up[10m])`,
	`quantile_over_time(0.9, sensor_temp[30m])`,
	`stddev_over_time(cpu_usage[10m])`,
	`deriv(sensor_temp[10m])`,
	`delta(sensor_count[5m])`,
	`changes(up[30m])`,
	`topk(2, cpu_usage)`,
	`bottomk(3, sensor_temp)`,
	`cpu_usage offset 5m`,
	`rate(http_requests_total[5m] offset 10m)`,
	`max_over_time(rate(http_requests_total[1m])[10m:30s])`,
	`avg_over_time(cpu_usage[15m:1m] offset 2m)`,
	`cpu_usage > 50`,
	`cpu_usage > bool 50`,
	`sensor_temp >= 21 and sensor_ok == 1`,
	`http_requests_total / on(job, instance, code) group_left http_requests_total`,
	`sum by (job) (http_requests_total) / ignoring(code) group_left sum by (job, code) (http_requests_total)`,
	`up == 0 or cpu_usage < 10`,
	`absent(nonexistent_metric)`,
	`absent(cpu_usage{host="nope"})`,
	`absent(cpu_usage)`,
	`absent_over_time(up{job="db", instance="i2"}[5m])`,
	`label_replace(cpu_usage, "h", "host-$1", "host", "(.*)")`,
	`label_join(sensor_temp, "where", "/", "site", "host_name")`,
	`sort_desc(sum by (site) (sensor_temp))`,
	`scalar(sum(up))`,
	`vector(1) + on() group_left count(up)`,
	`time() - timestamp(cpu_usage)`,
	`1 + 2`,
	`"a string"`,
}

// promResult formats a result canonically: series sorted by labels, floats
// by their bits' decimal form.
func promResult(res *promql.Result) string {
	if res.Err != nil {
		return "error: " + res.Err.Error()
	}
	fv := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var lines []string
	switch v := res.Value.(type) {
	case promql.Vector:
		for _, s := range v {
			lines = append(lines, fmt.Sprintf("%s @%d = %s", s.Metric, s.T, fv(s.F)))
		}
		sort.Strings(lines)
	case promql.Matrix:
		for _, s := range v {
			var b strings.Builder
			b.WriteString(s.Metric.String())
			for _, p := range s.Floats {
				fmt.Fprintf(&b, " %d:%s", p.T, fv(p.F))
			}
			lines = append(lines, b.String())
		}
		sort.Strings(lines)
	case promql.Scalar:
		lines = append(lines, fmt.Sprintf("scalar @%d = %s", v.T, fv(v.V)))
	case promql.String:
		lines = append(lines, fmt.Sprintf("string @%d = %s", v.T, v.V))
	default:
		lines = append(lines, fmt.Sprintf("%T", v))
	}
	return string(res.Value.Type()) + "\n" + strings.Join(lines, "\n")
}

func newPromEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		MaxSamples:           50_000_000,
		Timeout:              time.Minute,
		LookbackDelta:        5 * time.Minute,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
}

func TestPromQLEqualsPrometheus(t *testing.T) {
	ts := newTestServer(t, nil)
	want := loadPromQLData(t, ts)
	prom := promTSDB(t, want)
	strata := NewStorage(ts.db)
	eng := newPromEngine()
	ctx := context.Background()

	end := pqStart + (pqSteps-1)*pqStep
	instants := []int64{pqStart, pqStart + 10*60_000 + 7_500, pqStart + 30*60_000, end, end + 3*60_000, end + 10*60_000}
	ranges := []struct{ start, end, step int64 }{
		{pqStart - 60_000, end + 6*60_000, 15_000},
		{pqStart + 5*60_000, pqStart + 45*60_000, 60_000},
		{pqStart + 1, end - 1, 7_000},
	}
	run := func(q storage.Queryable, expr string, instant int64, r int) string {
		var qry promql.Query
		var err error
		if r < 0 {
			qry, err = eng.NewInstantQuery(ctx, q, nil, expr, time.UnixMilli(instant))
		} else {
			rg := ranges[r]
			qry, err = eng.NewRangeQuery(ctx, q, nil, expr, time.UnixMilli(rg.start), time.UnixMilli(rg.end), time.Duration(rg.step)*time.Millisecond)
		}
		if err != nil {
			return "construction error: " + err.Error()
		}
		defer qry.Close()
		return promResult(qry.Exec(ctx))
	}
	nonEmpty := 0
	for _, expr := range promQLExprs {
		for _, at := range instants {
			got, exp := run(strata, expr, at, -1), run(prom, expr, at, -1)
			if got != exp {
				t.Errorf("%s at %d:\nstrata:\n%s\nprometheus:\n%s", expr, at, got, exp)
			}
			if strings.Contains(got, "=") {
				nonEmpty++
			}
		}
		for r := range ranges {
			got, exp := run(strata, expr, 0, r), run(prom, expr, 0, r)
			if got != exp {
				t.Errorf("%s over range %d:\nstrata:\n%.2000s\nprometheus:\n%.2000s", expr, r, got, exp)
			}
		}
	}
	// The comparison is not vacuous.
	if nonEmpty < len(promQLExprs)*len(instants)/2 {
		t.Errorf("only %d of %d instant answers hold samples", nonEmpty, len(promQLExprs)*len(instants))
	}
}

// TestPromMetadataEqualsPrometheus compares /api/v1/series, /labels and
// /label/<name>/values with what Prometheus' storage answers for the same
// matchers and ranges.
func TestPromMetadataEqualsPrometheus(t *testing.T) {
	ts := newTestServer(t, nil)
	prom := promTSDB(t, loadPromQLData(t, ts))
	end := pqStart + (pqSteps-1)*pqStep

	type window struct{ start, end int64 }
	// Prometheus' head answers metadata for every series it holds whose
	// life overlaps the window, even where the series has no sample inside
	// it; strata answers exactly (docs/design.md: series with a visible sample in
	// the range). The windows compared are those where both agree: all
	// time, the data's span, and windows before and after it.
	windows := []window{
		{math.MinInt64, math.MaxInt64},
		{pqStart, end},
		{pqStart - 1000, end + 1000},
		{end + 60_000, end + 120_000},
		{pqStart - 100_000, pqStart - 1},
	}
	matchSets := [][]string{
		nil,
		{`up`},
		{`{__name__=~"sensor_.*"}`},
		{`cpu_usage{host=~"a|c"}`, `up{job="db"}`},
		{`{host_name="h1"}`},
		{`{__name__=~".+", job!="api"}`},
		{`nope`},
	}
	// Inside the data's span, strata leaves out series without a sample in
	// the window: cpu_usage{host="c"} has none in [105, 115] steps, the
	// db/i2 target none after step 200.
	exact := []struct {
		path string
		w    window
		ms   []string
		want []string
	}{
		{"/api/v1/label/host/values", window{pqStart + 105*pqStep, pqStart + 115*pqStep}, nil, []string{"a", "b"}},
		{"/api/v1/label/instance/values", window{pqStart + 200*pqStep + 1, end}, []string{`up{job="db"}`}, []string{"i1"}},
		{"/api/v1/label/instance/values", window{pqStart + 200*pqStep, end}, []string{`up{job="db"}`}, []string{"i1", "i2"}},
	}
	names := []string{"__name__", "job", "host", "host_name", "device", "site", "instance", "nope", "host.name"}

	param := func(v int64) string {
		if v == math.MinInt64 || v == math.MaxInt64 {
			return ""
		}
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64)
	}
	get := func(path string, w window, ms []string) []any {
		v := url.Values{}
		if s := param(w.start); s != "" {
			v.Set("start", s)
		}
		if s := param(w.end); s != "" {
			v.Set("end", s)
		}
		for _, m := range ms {
			v.Add("match[]", m)
		}
		code, _, body := ts.do("GET", path+"?"+v.Encode(), nil)
		if code != 200 {
			t.Fatalf("%s %v: %d %s", path, v, code, body)
		}
		var resp struct {
			Status string
			Data   []any
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Status != "success" {
			t.Fatalf("%s: %v %s", path, err, body)
		}
		if resp.Data == nil {
			t.Fatalf("%s: data is null, not []", path)
		}
		return resp.Data
	}
	parse := func(ms []string) [][]*labels.Matcher {
		var out [][]*labels.Matcher
		for _, m := range ms {
			sel, err := parser.NewParser(parser.Options{}).ParseMetricSelector(m)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sel)
		}
		if out == nil {
			out = [][]*labels.Matcher{nil}
		}
		return out
	}
	ctx := context.Background()
	for _, w := range windows {
		q, err := prom.Querier(w.start, w.end)
		if err != nil {
			t.Fatal(err)
		}
		for _, ms := range matchSets {
			sets := parse(ms)
			// Series (needs match[]).
			if ms != nil {
				var exp []string
				for _, set := range sets {
					ss := q.Select(ctx, true, &storage.SelectHints{Start: w.start, End: w.end, Func: "series"}, set...)
					for ss.Next() {
						exp = append(exp, ss.At().Labels().String())
					}
				}
				slices.Sort(exp)
				exp = slices.Compact(exp)
				var got []string
				for _, s := range get("/api/v1/series", w, ms) {
					m := map[string]string{}
					for k, v := range s.(map[string]any) {
						m[k] = v.(string)
					}
					got = append(got, labels.FromMap(m).String())
				}
				if !slices.Equal(got, exp) {
					t.Errorf("series %v %v:\nstrata     %v\nprometheus %v", w, ms, got, exp)
				}
			}
			// Label names.
			var expNames []string
			for _, set := range sets {
				ns, _, err := q.LabelNames(ctx, nil, set...)
				if err != nil {
					t.Fatal(err)
				}
				expNames = append(expNames, ns...)
			}
			slices.Sort(expNames)
			expNames = slices.Compact(expNames)
			if got := strs(get("/api/v1/labels", w, ms)); !slices.Equal(got, expNames) {
				t.Errorf("labels %v %v:\nstrata     %v\nprometheus %v", w, ms, got, expNames)
			}
			// Label values.
			for _, name := range names {
				var exp []string
				for _, set := range sets {
					vs, _, err := q.LabelValues(ctx, name, nil, set...)
					if err != nil {
						t.Fatal(err)
					}
					exp = append(exp, vs...)
				}
				slices.Sort(exp)
				exp = slices.Compact(exp)
				if got := strs(get("/api/v1/label/"+url.PathEscape(name)+"/values", w, ms)); !slices.Equal(got, exp) {
					t.Errorf("label %s values %v %v:\nstrata     %v\nprometheus %v", name, w, ms, got, exp)
				}
			}
		}
		q.Close()
	}
	for _, c := range exact {
		if got := strs(get(c.path, c.w, c.ms)); !slices.Equal(got, c.want) {
			t.Errorf("%s %v %v: %v, want %v", c.path, c.w, c.ms, got, c.want)
		}
	}
}

func strs(xs []any) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, x.(string))
	}
	return out
}
