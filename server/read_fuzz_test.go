package server

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// FuzzRemoteRead sends arbitrary remote-read request bodies (snappy framed
// or not, any response type asked for) to a database holding a few series.
// A body that is no ReadRequest is a 400; no body panics the server or
// gets a 5xx; every answer is one of the two response types, whole.
func FuzzRemoteRead(f *testing.F) {
	now := time.Now().UnixMilli()
	req := func(accept []prompb.ReadRequest_ResponseType, qs ...*prompb.Query) []byte {
		b, err := proto.Marshal(&prompb.ReadRequest{Queries: qs, AcceptedResponseTypes: accept})
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	m := func(t prompb.LabelMatcher_Type, n, v string) *prompb.LabelMatcher {
		return &prompb.LabelMatcher{Type: t, Name: n, Value: v}
	}
	samples := []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES}
	chunks := []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}
	day := int64(24 * time.Hour / time.Millisecond)
	f.Add(req(samples, &prompb.Query{StartTimestampMs: now - day, EndTimestampMs: now,
		Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_EQ, "__name__", "cpu_usage")}}), true)
	f.Add(req(chunks, &prompb.Query{StartTimestampMs: now - day, EndTimestampMs: now,
		Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_RE, "__name__", "cpu_.+"), m(prompb.LabelMatcher_NEQ, "host", "b")}}), true)
	f.Add(req(samples, &prompb.Query{StartTimestampMs: math.MinInt64, EndTimestampMs: math.MaxInt64,
		Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_NRE, "host", "(")}}), true)
	f.Add(req(chunks, &prompb.Query{StartTimestampMs: now, EndTimestampMs: now - day,
		Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_EQ, "", "")}},
		&prompb.Query{Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_RE, "x", ".*")}}), true)
	f.Add(req([]prompb.ReadRequest_ResponseType{7}, &prompb.Query{Matchers: []*prompb.LabelMatcher{m(9, "__name__", "cpu_usage")},
		Hints: &prompb.ReadHints{StepMs: -1, Func: "rate", RangeMs: math.MaxInt64}}), true)
	f.Add([]byte("junk"), false)
	f.Add([]byte{}, true)
	f.Add([]byte{0x0a, 0x80}, true)

	db, err := engine.Open(f.TempDir(), &engine.Options{Sync: engine.SyncNever})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	var pts []engine.Point
	for i := range 50 {
		for _, host := range []string{"a", "b"} {
			pts = append(pts, engine.Point{Measurement: "cpu", Tags: []engine.Tag{{Key: "host", Value: host}},
				Fields: []engine.Field{{Key: "usage", Value: engine.Float(float64(i))}, {Key: "state", Value: engine.String("ok")}},
				Time:   (now - int64(i)*60_000) * 1e6})
		}
	}
	if err := db.Write(pts); err != nil {
		f.Fatal(err)
	}
	h, err := New(db, &Options{MaxSamples: 10_000})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte, framed bool) {
		body := raw
		if framed {
			body = snappy.Encode(nil, raw)
		}
		r := httptest.NewRequest(http.MethodPost, "/api/v1/read", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", "snappy")
		r.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var rr prompb.ReadRequest
		dec, err := snappy.Decode(nil, body)
		decodes := err == nil && proto.Unmarshal(dec, &rr) == nil
		switch {
		case w.Code >= 500:
			t.Fatalf("status %d for %x: %s", w.Code, raw, w.Body.Bytes())
		case !decodes && w.Code != http.StatusBadRequest:
			t.Fatalf("status %d for a body that is no ReadRequest (%x)", w.Code, raw)
		case w.Code != http.StatusOK:
			return
		}
		switch ct := w.Header().Get("Content-Type"); ct {
		case "application/x-protobuf":
			dec, err := snappy.Decode(nil, w.Body.Bytes())
			if err != nil {
				t.Fatalf("SAMPLES answer: %v", err)
			}
			var resp prompb.ReadResponse
			if err := proto.Unmarshal(dec, &resp); err != nil || len(resp.Results) != len(rr.Queries) {
				t.Fatalf("SAMPLES answer: %v, %d results for %d queries", err, len(resp.Results), len(rr.Queries))
			}
		case "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse":
		default:
			t.Fatalf("answer of type %q", ct)
		}
	})
}

// TestRemoteReadBadMatcher: a matcher that cannot be built (a regexp that
// does not compile, an unknown type) is the client's mistake: 400, naming
// it, not Prometheus' handler's 500.
func TestRemoteReadBadMatcher(t *testing.T) {
	ts := newTestServer(t, nil)
	for _, m := range []prompb.LabelMatcher{
		{Type: prompb.LabelMatcher_RE, Name: "host", Value: "("},
		{Type: prompb.LabelMatcher_NRE, Name: "host", Value: "a**"},
		{Type: 9, Name: "__name__", Value: "up"},
	} {
		raw, err := proto.Marshal(&prompb.ReadRequest{Queries: []*prompb.Query{
			{EndTimestampMs: 1000, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "up"}}},
			{EndTimestampMs: 1000, Matchers: []*prompb.LabelMatcher{&m}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := ts.do(http.MethodPost, "/api/v1/read", snappy.Encode(nil, raw), "Content-Encoding", "snappy")
		if code != http.StatusBadRequest || !strings.Contains(body, "query 1: invalid matcher") {
			t.Errorf("matcher %v: %d %s", m, code, body)
		}
	}
}
