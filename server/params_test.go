package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestQueryParamsBadData: every malformed parameter of every query endpoint
// is 400 bad_data with Prometheus' error body, never an execution error or
// a recovered panic.
func TestQueryParamsBadData(t *testing.T) {
	ts := newTestServer(t, nil)
	if code, _, body := ts.do("POST", "/api/v2/write?precision=s", []byte("cpu,host=a usage=1 100\ncpu,host=b usage=2 160\n")); code != 204 {
		t.Fatalf("write: %d %s", code, body)
	}
	rng := func(kv ...string) url.Values {
		v := url.Values{"query": {"cpu_usage"}, "start": {"0"}, "end": {"10"}, "step": {"1"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	vals := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	metaPaths := []string{"/api/v1/series", "/api/v1/labels", "/api/v1/label/host/values"}
	type req struct {
		path   string
		params url.Values
	}
	var bad []req
	for _, step := range []string{"0.0001", "0.0009", "1e-300", "0", "-1", "-0.0001", "NaN", "Inf", "-Inf", "1e300", "", "abc", "0s", "-1m", "1y1y"} {
		bad = append(bad, req{"/api/v1/query_range", rng("step", step)})
		// A short range, whose step count passes, used to reach the
		// engine's division by a step of 0 ms.
		bad = append(bad, req{"/api/v1/query_range", rng("step", step, "end", "0.5")})
	}
	for _, tm := range []string{"NaN", "Inf", "-Inf", "+Inf", "1e300", "-1e300", "9.3e15", "abc", "2023-13-01T00:00:00Z", "1h"} {
		bad = append(bad,
			req{"/api/v1/query_range", rng("start", tm)},
			req{"/api/v1/query_range", rng("end", tm)},
			req{"/api/v1/query", vals("query", "1", "time", tm)})
		for _, p := range metaPaths {
			bad = append(bad, req{p, vals("match[]", "cpu_usage", "start", tm)}, req{p, vals("match[]", "cpu_usage", "end", tm)})
		}
	}
	bad = append(bad,
		req{"/api/v1/query_range", rng("start", "")},
		req{"/api/v1/query_range", rng("end", "")},
		req{"/api/v1/query_range", rng("start", "10", "end", "0")},
		req{"/api/v1/query_range", rng("start", "0", "end", "100000", "step", "1")}, // 100,000 steps
		req{"/api/v1/query_range", rng("timeout", "abc")},
		req{"/api/v1/query_range", rng("timeout", "1e300")},
		req{"/api/v1/query_range", rng("lookback_delta", "abc")},
		req{"/api/v1/query_range", rng("query", "")},
		req{"/api/v1/query_range", rng("query", "sum(")},
		req{"/api/v1/query", vals("query", "1", "timeout", "NaN")},
		req{"/api/v1/query", vals("query", "1", "lookback_delta", "1e300")},
		req{"/api/v1/query", vals("query", "")},
		req{"/api/v1/series", vals()},
	)
	for _, p := range metaPaths {
		for _, m := range []string{"{}", `{host=~".*"}`, `{__name__=~".*"}`, `{rack!="x"}`, `{a=""}`, `{a!~"b", c=~"|d"}`, "{", "cpu_usage{"} {
			bad = append(bad, req{p, vals("match[]", m)}, req{p, vals("match[]", "cpu_usage", "match[]", m)})
		}
		for _, l := range []string{"-1", "x", "1.5", "99999999999999999999"} {
			bad = append(bad, req{p, vals("match[]", "cpu_usage", "limit", l)})
		}
		bad = append(bad, req{p, vals("match[]", "cpu_usage", "start", "10", "end", "5")})
	}
	for _, c := range bad {
		for _, method := range []string{"GET", "POST"} {
			code, r := ts.apiCall(method, c.path, c.params)
			if code != http.StatusBadRequest || r.Status != "error" || r.ErrorType != "bad_data" || r.Error == "" {
				t.Errorf("%s %s %v: %d %+v", method, c.path, c.params, code, r)
			}
		}
	}

	// What Prometheus accepts is accepted: its boundary times, steps of a
	// ms and more, selective matchers.
	good := []req{
		{"/api/v1/query_range", rng("step", "0.001")},
		{"/api/v1/query_range", rng("step", "1ms", "end", "0.5")},
		{"/api/v1/query_range", rng("step", "15s", "start", "2023-11-14T22:13:20Z", "end", "2023-11-14T23:13:20.5Z")},
		{"/api/v1/query", vals("query", "cpu_usage", "time", maxTimeFormatted)},
		{"/api/v1/query", vals("query", "cpu_usage", "time", "160.0005", "timeout", "-1", "lookback_delta", "1h")},
	}
	for _, p := range metaPaths {
		good = append(good,
			req{p, vals("match[]", "cpu_usage", "start", minTimeFormatted, "end", maxTimeFormatted)},
			req{p, vals("match[]", `{__name__=~".+"}`)},
			req{p, vals("match[]", `{host=~"a"}`, "match[]", `{host="b"}`, "limit", "1")},
			req{p, vals("match[]", `{host!="", rack!="x"}`)},
		)
	}
	good = append(good, req{"/api/v1/labels", vals()}, req{"/api/v1/label/host/values", vals()})
	for _, c := range good {
		if code, r := ts.apiCall("GET", c.path, c.params); code != http.StatusOK || r.Status != "success" {
			t.Errorf("GET %s %v: %d %+v", c.path, c.params, code, r)
		}
	}
}

// TestMatchNeedsSelectiveMatcher: a match[] that every series matches is
// refused with Prometheus' message, on every endpoint that takes match[].
func TestMatchNeedsSelectiveMatcher(t *testing.T) {
	ts := newTestServer(t, nil)
	if code, _, body := ts.do("POST", "/api/v2/write?precision=s", []byte("cpu,host=a usage=1 100\nmem,host=b free=2 100\n")); code != 204 {
		t.Fatalf("write: %d %s", code, body)
	}
	for _, p := range []string{"/api/v1/series", "/api/v1/labels", "/api/v1/label/host/values"} {
		for _, m := range []string{`{host=~".*"}`, `{__name__=~".*"}`, `{rack!="x"}`, `{host=~".*", rack!~"y"}`} {
			code, r := ts.apiCall("GET", p, url.Values{"match[]": {m}})
			if code != 400 || !strings.Contains(r.Error, "match[] must contain at least one non-empty matcher") {
				t.Errorf("%s match[]=%s: %d %+v", p, m, code, r)
			}
		}
		code, r := ts.apiCall("GET", p, url.Values{"match[]": {`{host=~".+"}`}})
		if code != 200 || !strings.Contains(string(r.Data), "a") {
			t.Errorf("%s match[]={host=~\".+\"}: %d %+v", p, code, r)
		}
	}
}
