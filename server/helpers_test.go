package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// testServer is a handler over a fresh database, served on loopback.
type testServer struct {
	t   testing.TB
	db  *engine.DB
	h   http.Handler
	srv *httptest.Server
}

func newTestServer(t testing.TB, opts *Options) *testServer {
	t.Helper()
	return newTestServerDB(t, &engine.Options{Sync: engine.SyncNever}, opts)
}

func newTestServerDB(t testing.TB, dbOpts *engine.Options, opts *Options) *testServer {
	t.Helper()
	db, err := engine.Open(t.TempDir(), dbOpts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, db: db, h: h, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		ts.srv.Close()
		if err := ts.db.Close(); err != nil {
			t.Error(err)
		}
	})
	return ts
}

// do sends a request and returns the status, headers and body.
func (ts *testServer) do(method, path string, body []byte, hdr ...string) (int, http.Header, string) {
	ts.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, r)
	if err != nil {
		ts.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// all returns every sample of measurement m, by series key.
func (ts *testServer) all(m string) map[string][]engine.Sample {
	ts.t.Helper()
	res, err := ts.db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: m, Start: math.MinInt64, End: math.MaxInt64}})
	if err != nil {
		ts.t.Fatal(err)
	}
	out := map[string][]engine.Sample{}
	for _, s := range res {
		out[s.Key()] = s.Samples
	}
	return out
}

func (ts *testServer) count(m string) int {
	n := 0
	for _, s := range ts.all(m) {
		n += len(s)
	}
	return n
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("body %q: %v", s, err)
	}
	return m
}

func samplesEqual(a, b []engine.Sample) bool {
	return slices.EqualFunc(a, b, func(x, y engine.Sample) bool { return x.Time == y.Time && x.Value.Equal(y.Value) })
}

func f(v float64) engine.Value { return engine.Float(v) }

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func newLoopback(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// toMillis converts the samples of a series to ms, the later sample in
// time winning within a millisecond. It returns nil for a series with no
// numeric sample.
func toMillis(in []engine.Sample) fsamples {
	if len(in) == 0 || in[0].Value.Kind() == engine.KindString {
		return nil
	}
	out := make(fsamples, 0, len(in))
	for _, s := range in {
		v, ok := floatOf(s.Value)
		if !ok {
			continue
		}
		t := floorDiv(s.Time, int64(time.Millisecond))
		if n := len(out); n > 0 && out[n-1].t == t {
			out[n-1].f = v
			continue
		}
		out = append(out, fsample{t, v})
	}
	return out
}
