package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// fuzzHandler is a handler over a fresh database, for one fuzz target.
func fuzzHandler(f *testing.F) http.Handler {
	db, err := engine.Open(f.TempDir(), &engine.Options{Sync: engine.SyncNever})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	h, err := New(db, &Options{MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	return h
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// FuzzInfluxWrite: any body, precision and encoding is answered 204 or a
// 4xx, never a panic or a 5xx.
func FuzzInfluxWrite(f *testing.F) {
	h := fuzzHandler(f)
	f.Add([]byte("cpu,host=a v=1,s=\"x\" 1\n"), "ns", false, true)
	f.Add([]byte("cpu v=1 1\ncpu v=\"s\" 2\n"), "s", false, false)
	f.Add([]byte("m\\ x,t\\,=v\\= f\\ =1i,g=2u,h=t 1700000000\n"), "m", false, false)
	f.Add([]byte("cpu v=1 99999999999999999999\n#c\n\n"), "h", true, false)
	f.Add([]byte("cpu v=\"multi\nline\" 1\n"), "us", true, true)
	f.Add([]byte{0x1f, 0x8b, 0, 0}, "", true, true)
	f.Add([]byte("cpu v=1e400 1\ncpu v=NaN 2\ncpu,t= v=1\n,t=1 v=1\n"), "x", false, true)
	f.Fuzz(func(t *testing.T, body []byte, precision string, gzipped, v2 bool) {
		path := "/write?precision=" + url.QueryEscape(precision)
		if v2 {
			path = "/api/v2/write?precision=" + url.QueryEscape(precision)
		}
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		if gzipped {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := serve(h, req)
		if c := rec.Code; c != http.StatusNoContent && (c < 400 || c >= 500) {
			t.Fatalf("status %d for %q: %s", c, body, rec.Body)
		}
	})
}

// FuzzRemoteWrite: any body is 204 or a 4xx.
func FuzzRemoteWrite(f *testing.F) {
	h := fuzzHandler(f)
	good, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "j"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 1}, {Timestamp: 2, Value: 2}},
	}}}).Marshal()
	f.Add(snappy.Encode(nil, good), true)
	f.Add(good, true)
	f.Add(good, false)
	f.Add(snappy.Encode(nil, []byte{0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01}), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Fuzz(func(t *testing.T, body []byte, compress bool) {
		if compress {
			body = snappy.Encode(nil, body)
		}
		req := httptest.NewRequest("POST", "/api/v1/write", bytes.NewReader(body))
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("Content-Type", "application/x-protobuf")
		rec := serve(h, req)
		if c := rec.Code; c != http.StatusNoContent && (c < 400 || c >= 500) {
			t.Fatalf("status %d: %s", c, rec.Body)
		}
	})
}

// FuzzQueryParams: any query parameters are answered 200 or a 4xx; a 400
// has Prometheus' error body, and no answer comes from a recovered panic.
func FuzzQueryParams(f *testing.F) {
	h := fuzzHandler(f)
	rec := serve(h, httptest.NewRequest("POST", "/api/v2/write?precision=s",
		bytes.NewReader([]byte("cpu,host=a usage=1 100\ncpu,host=b usage=2 100\ncpu,host=a usage=3 160\n"))))
	if rec.Code != http.StatusNoContent {
		f.Fatalf("seed write: %d %s", rec.Code, rec.Body)
	}
	f.Add("rate(cpu_usage[1m])", "160", "100", "200", "15", `{__name__=~"cpu.*"}`, "host", "5s", "", "")
	f.Add("sum by (host) (cpu_usage)", "2023-11-14T22:13:20Z", "0", "1e10", "1m", "cpu_usage", "__name__", "", "1", "1m")
	f.Add("cpu_usage{host!~\"(\"}", "x", "200", "100", "0", "{", "", "abc", "-1", "x")
	f.Add("1 +", "NaN", "-Inf", "+Inf", "-1", `{host=""}`, "U__a_2e_b", "NaN", "1.5", "-1h")
	f.Add("absent(nope)", "1e300", "-1e300", "1e300", "1e-9", "up{", "a\x00", "1e300", "99999999999999999999", "1e300")
	f.Add("count_over_time(cpu_usage[5m:10s])", "", "", "", "1h", "", "host", "", "", "")
	f.Add("1", "0", "0", "0.5", "0.0001", `{host=~".*"}`, "host", "", "", "")
	f.Add("cpu_usage", "9.2e15", "-9.2e15", "9.2e15", "292y", `{__name__=~".*"}`, "host", "", "", "")
	f.Add("cpu_usage @ 1e18 offset -100y", "292277025-08-18T07:12:54.999999999Z", "-292273086-05-16T16:47:06Z",
		"292277025-08-18T07:12:54.999999999Z", "9e12", `{rack!="x"}`, "host", "", "", "9e9")
	f.Add("timestamp(cpu_usage)[1000y:1y]", "9.2e12", "-9.2e12", "9.2e12", "1y", "{}", "", "", "", "")
	f.Fuzz(func(t *testing.T, query, at, start, end, step, match, name, timeout, limit, lookback string) {
		v := url.Values{"query": {query}, "time": {at}, "start": {start}, "end": {end}, "step": {step},
			"match[]": {match}, "limit": {limit}, "lookback_delta": {lookback}}
		// A long timeout would only slow the fuzzer down.
		v.Set("timeout", timeout)
		if d, err := parseDuration(timeout); err == nil && d > 5*time.Second {
			v.Set("timeout", "5s")
		}
		for _, path := range []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels",
			"/api/v1/label/" + url.PathEscape(name) + "/values"} {
			req := httptest.NewRequest("GET", path+"?"+v.Encode(), nil)
			rec := serve(h, req)
			c, body := rec.Code, rec.Body.String()
			if c != http.StatusOK && (c < 400 || c >= 500) {
				t.Fatalf("%s %v: status %d: %s", path, v, c, body)
			}
			if strings.Contains(body, "runtime error") || strings.Contains(body, "unexpected error") {
				t.Fatalf("%s %v: a recovered panic: %d %s", path, v, c, body)
			}
			if c == http.StatusBadRequest && !strings.Contains(body, `"errorType":"bad_data"`) {
				t.Fatalf("%s %v: 400 without Prometheus' error body: %s", path, v, body)
			}
		}
	})
}
