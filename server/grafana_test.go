package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/stratadb/strata/engine"
)

type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// apiCall sends a request to the query API: GET with the parameters in the
// URL, or POST with them as a form, as Grafana does.
func (ts *testServer) apiCall(method, path string, params url.Values) (int, apiResponse) {
	ts.t.Helper()
	var code int
	var body string
	if method == http.MethodPost {
		code, _, body = ts.do(method, path, []byte(params.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	} else {
		code, _, body = ts.do(method, path+"?"+params.Encode(), nil)
	}
	var r apiResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		ts.t.Fatalf("%s %s: %v: %s", method, path, err, body)
	}
	return code, r
}

// matrixString formats the JSON of a range query's data like promResult.
func matrixString(t *testing.T, data json.RawMessage) string {
	t.Helper()
	var d struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range d.Result {
		var b strings.Builder
		b.WriteString(labels.FromMap(s.Metric).String())
		for _, p := range s.Values {
			v, err := strconv.ParseFloat(p[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, " %d:%s", int64(math.Round(p[0].(float64)*1000)), strconv.FormatFloat(v, 'g', -1, 64))
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	return d.ResultType + "\n" + strings.Join(lines, "\n")
}

// TestGrafanaRequestSequence sends what Grafana's Prometheus data source
// sends when a dashboard loads and checks each answer against Prometheus'
// own engine and storage over the same data.
func TestGrafanaRequestSequence(t *testing.T) {
	ts := newTestServer(t, nil)
	prom := promTSDB(t, loadPromQLData(t, ts))
	start, end := pqStart/1000, (pqStart+(pqSteps-1)*pqStep)/1000
	window := url.Values{"start": {strconv.FormatInt(start, 10)}, "end": {strconv.FormatInt(end, 10)}}
	with := func(extra ...string) url.Values {
		v := url.Values{}
		for k, vs := range window {
			v[k] = vs
		}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Add(extra[i], extra[i+1])
		}
		return v
	}
	ctx := context.Background()
	pq, err := prom.Querier(start*1000, end*1000)
	if err != nil {
		t.Fatal(err)
	}
	defer pq.Close()

	// 1. The data source's health check and feature detection.
	code, r := ts.apiCall("GET", "/api/v1/status/buildinfo", nil)
	var bi map[string]string
	json.Unmarshal(r.Data, &bi)
	if code != 200 || r.Status != "success" || !strings.HasPrefix(bi["version"], "3.") || bi["goVersion"] == "" {
		t.Errorf("buildinfo: %d %+v", code, r)
	}

	// 2. Label names for the query builder, with the dashboard's range.
	code, r = ts.apiCall("GET", "/api/v1/labels", window)
	var names []string
	json.Unmarshal(r.Data, &names)
	wantNames, _, _ := pq.LabelNames(ctx, nil)
	if code != 200 || !slices.Equal(names, wantNames) {
		t.Errorf("labels: %d %v, want %v", code, names, wantNames)
	}

	// 3. Metric names, then the values of a label for a chosen metric.
	for _, c := range []struct {
		name  string
		match string
	}{{"__name__", ""}, {"job", "up"}, {"host_name", `sensor_temp{site="s1"}`}} {
		params := window
		var ms []*labels.Matcher
		if c.match != "" {
			params = with("match[]", c.match)
			ms, _ = promParser.ParseMetricSelector(c.match)
		}
		code, r = ts.apiCall("GET", "/api/v1/label/"+c.name+"/values", params)
		var vals []string
		json.Unmarshal(r.Data, &vals)
		want, _, _ := pq.LabelValues(ctx, c.name, nil, ms...)
		if code != 200 || !slices.Equal(vals, want) || len(want) == 0 {
			t.Errorf("label %s values: %d %v, want %v", c.name, code, vals, want)
		}
	}

	// 4. Series of a selector (the metrics browser).
	code, r = ts.apiCall("GET", "/api/v1/series", with("match[]", `http_requests_total{job="api"}`))
	var series []map[string]string
	json.Unmarshal(r.Data, &series)
	if code != 200 || len(series) != 4 || series[0]["__name__"] != "http_requests_total" || series[0]["job"] != "api" {
		t.Errorf("series: %d %v", code, series)
	}

	// 5. The panels' range queries, as Grafana posts them.
	eng := newPromEngine()
	for _, expr := range []string{
		`sum by (job) (rate(http_requests_total[$__rate_interval]))`,
		`avg_over_time(sensor_temp{site="s0"}[5m])`,
		`topk(2, cpu_usage)`,
		`up`,
	} {
		expr = strings.ReplaceAll(expr, "$__rate_interval", "1m")
		for _, step := range []string{"15", "60", "1m30s"} {
			code, r = ts.apiCall("POST", "/api/v1/query_range", with("query", expr, "step", step))
			if code != 200 || r.Status != "success" {
				t.Fatalf("%s: %d %+v", expr, code, r)
			}
			d, _ := parseDuration(step)
			qry, err := eng.NewRangeQuery(ctx, prom, nil, expr, time.Unix(start, 0), time.Unix(end, 0), d)
			if err != nil {
				t.Fatal(err)
			}
			want := promResult(qry.Exec(ctx))
			qry.Close()
			if got := matrixString(t, r.Data); got != want {
				t.Errorf("%s step %s:\nstrata:\n%.1500s\nprometheus:\n%.1500s", expr, step, got, want)
			}
			if !strings.Contains(want, "{") {
				t.Errorf("%s: empty answer", expr)
			}
		}
	}
	// An instant query (the table view), GET and POST alike.
	for _, method := range []string{"GET", "POST"} {
		code, r = ts.apiCall(method, "/api/v1/query", url.Values{"query": {`count(up)`}, "time": {strconv.FormatInt(end, 10)}})
		if code != 200 || !strings.Contains(string(r.Data), `"resultType":"vector"`) || !strings.Contains(string(r.Data), `"3"`) {
			t.Errorf("%s query: %d %s", method, code, r.Data)
		}
	}
}

func TestQueryAPIErrors(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.do("POST", "/api/v2/write?precision=s", []byte("cpu,host=a usage=1 100\n"))
	cases := []struct {
		path   string
		params url.Values
		code   int
		typ    string
	}{
		{"/api/v1/query", url.Values{"query": {"sum("}}, 400, "bad_data"},
		{"/api/v1/query", url.Values{"query": {"cpu_usage"}, "time": {"yesterday"}}, 400, "bad_data"},
		{"/api/v1/query", url.Values{"query": {"cpu_usage"}, "timeout": {"x"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"cpu_usage"}, "start": {"100"}, "end": {"200"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"cpu_usage"}, "start": {"100"}, "end": {"200"}, "step": {"0"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"cpu_usage"}, "start": {"200"}, "end": {"100"}, "step": {"1"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"cpu_usage"}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, 400, "bad_data"},
		{"/api/v1/query_range", url.Values{"query": {"cpu_usage"}, "end": {"100"}, "step": {"1"}}, 400, "bad_data"},
		{"/api/v1/series", url.Values{}, 400, "bad_data"},
		{"/api/v1/series", url.Values{"match[]": {"{"}}, 400, "bad_data"},
		{"/api/v1/labels", url.Values{"start": {"x"}}, 400, "bad_data"},
		{"/api/v1/labels", url.Values{"limit": {"-1"}}, 400, "bad_data"},
		{"/api/v1/query", url.Values{"query": {`{__name__=~"cpu.*"} + on() {__name__=~"cpu.*"}`}, "time": {"100"}}, 200, ""},
		{"/api/v1/query", url.Values{"query": {`label_replace(cpu_usage, "__name__", "x", "", "")`}, "time": {"100"}}, 200, ""},
	}
	for _, c := range cases {
		code, r := ts.apiCall("GET", c.path, c.params)
		if code != c.code || r.ErrorType != c.typ {
			t.Errorf("%s %v: %d %+v, want %d %s", c.path, c.params, code, r, c.code, c.typ)
		}
	}
	// A series limit truncates with a warning.
	ts.do("POST", "/api/v2/write?precision=s", []byte("cpu,host=b usage=1 100\n"))
	code, _, body := ts.do("GET", "/api/v1/series?limit=1&match[]=cpu_usage", nil)
	if code != 200 || strings.Count(body, "__name__") != 1 || !strings.Contains(body, "warnings") {
		t.Errorf("limit: %d %s", code, body)
	}
	// A closed database is unavailable, not a bad query.
	if err := ts.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/query", url.Values{"query": {"cpu_usage"}, "time": {"100"}}},
		{"/api/v1/labels", nil},
		{"/api/v1/series", url.Values{"match[]": {"cpu_usage"}}},
	} {
		code, r := ts.apiCall("GET", c.path, c.params)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s on a closed db: %d %+v", c.path, code, r)
		}
	}
	reopened, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts.db = reopened // the cleanup closes it
}
