package server

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stratadb/strata/engine"
)

// repeatTo repeats unit as often as fits in n bytes.
func repeatTo(unit []byte, n int) []byte {
	return bytes.Repeat(unit, n/len(unit))
}

// field encodes a length-delimited protobuf field.
func field(num protowire.Number, payload []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, payload)
}

func label(name, value string) []byte {
	return field(1, append(field(1, []byte(name)), field(2, []byte(value))...))
}

// heapCost runs fn and returns the bytes the process allocated meanwhile
// (TotalAlloc, an upper bound of the heap fn held at any time).
func heapCost(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRemoteWriteHostileMemory: remote-write bodies of 32 MiB (the default
// limit; 4 MiB under the race detector) made of the smallest messages cost
// a small multiple of their size, whatever their shape, and are answered as
// their content asks.
func TestRemoteWriteHostileMemory(t *testing.T) {
	limit := DefaultMaxBodyBytes
	if raceEnabled {
		limit = 4 << 20
	}
	ts := newTestServer(t, &Options{MaxBodyBytes: int64(limit)})
	name := label("__name__", "hostile")
	manyLabels := append(bytes.Clone(name), repeatTo([]byte{0x0a, 0x00}, limit-64-len(name))...)
	cases := []struct {
		name string
		raw  []byte
		want int
	}{
		// Empty TimeSeries: no name, refused one by one.
		{"empty series", repeatTo([]byte{0x0a, 0x00}, limit), 400},
		// Series of one empty label, of one empty sample, of one empty
		// exemplar or histogram.
		{"empty labels", repeatTo(field(1, []byte{0x0a, 0x00}), limit), 400},
		{"empty samples", repeatTo(field(1, []byte{0x12, 0x00}), limit), 400},
		{"empty exemplars", repeatTo(field(1, []byte{0x1a, 0x00}), limit), 400},
		{"empty histograms", repeatTo(field(1, []byte{0x22, 0x00}), limit), 400},
		// Empty metadata and unknown fields of the request.
		{"empty metadata", repeatTo([]byte{0x1a, 0x00}, limit), 204},
		{"unknown fields", repeatTo([]byte{0x2a, 0x00}, limit), 204},
		// One series of a name and 16M empty labels: too many labels.
		{"one series of empty labels", field(1, manyLabels), 400},
		// A valid name with invalid or duplicate labels, many times.
		{"invalid utf8", repeatTo(field(1, append(bytes.Clone(name), label("t", "\xff\xfe")...)), limit), 400},
		{"duplicate names", repeatTo(field(1, append(bytes.Clone(name), name...)), limit), 400},
		// A named series of one empty sample (t=0, v=0) repeated: the same
		// point stored 1.5M times.
		{"named empty samples", repeatTo(field(1, append(bytes.Clone(name), 0x12, 0x00)), limit), 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.raw) > limit || len(c.raw) < limit-1024 {
				t.Fatalf("body of %d bytes", len(c.raw))
			}
			body := snappy.Encode(nil, c.raw)
			var rec *httptest.ResponseRecorder
			cost := heapCost(func() {
				req := httptest.NewRequest("POST", "/api/v1/write", bytes.NewReader(body))
				req.Header.Set("Content-Encoding", "snappy")
				req.Header.Set("Content-Type", "application/x-protobuf")
				rec = serve(ts.h, req)
			})
			t.Logf("%d bytes decoded: %d, %.1f MiB allocated", len(c.raw), rec.Code, float64(cost)/(1<<20))
			if rec.Code != c.want {
				t.Errorf("status %d, want %d: %.300s", rec.Code, c.want, rec.Body)
			}
			if cost > 8*uint64(limit) {
				t.Errorf("%.1f MiB allocated for a body of %d MiB", float64(cost)/(1<<20), limit>>20)
			}
			if c.want == 400 && len(rec.Body.String()) > 8<<10 {
				t.Errorf("answer of %d bytes", rec.Body.Len())
			}
		})
	}
	if got := ts.all("hostile"); len(got) != 1 || len(got["hostile value"]) != 1 {
		t.Errorf("stored %v", got)
	}
}

// TestRemoteWriteRefusesInvalidLabels: series that Prometheus' receiver
// refuses (invalid UTF-8 in a name or value, duplicate label names, empty
// or missing names) are not stored and are counted by reason; the other
// series of the request are stored and the answer is 400 naming them.
func TestRemoteWriteRefusesInvalidLabels(t *testing.T) {
	ts := newTestServer(t, nil)
	smp := []prompb.Sample{{Timestamp: 1000, Value: 1}, {Timestamp: 2000, Value: 2}}
	mk := func(lbls ...string) prompb.TimeSeries {
		s := prompb.TimeSeries{Samples: smp}
		for i := 0; i+1 < len(lbls); i += 2 {
			s.Labels = append(s.Labels, prompb.Label{Name: lbls[i], Value: lbls[i+1]})
		}
		return s
	}
	body := remoteBody(t,
		mk("__name__", "good", "job", "a"),
		mk("__name__", "bad", "t", "\xff\xfe"),
		mk("__name__", "bad\xff"),
		mk("__name__", "bad", "t\xff", "x"),
		mk("__name__", "bad", "__name__", "bad2"),
		mk("__name__", "bad", "a", "", "a", "x"),
		mk("__name__", "bad", "a", "x", "b", "y", "a", "z"), // unsorted duplicate
		mk("__name__", "bad", "", "x"),
		mk("__name__", "", "job", "a"),
		mk("job", "bad"),
		mk("__name__", "bad", "u", "\xc0"),
		mk("__name__", "bad\nline"), // refused by the engine
		mk("__name__", "good", "job", "b"),
	)
	code, _, msg := ts.do("POST", "/api/v1/write", body, remoteHeaders...)
	if code != http.StatusBadRequest || !containsAll(msg, "invalid UTF-8", "duplicate label name", "and 1 more") {
		t.Errorf("%d %s", code, msg)
	}
	good := ts.all("good")
	if len(good) != 2 || len(good["good,job=a value"]) != 2 || len(good["good,job=b value"]) != 2 {
		t.Errorf("good series: %v", good)
	}
	ms, err := ts.db.Measurements(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Errorf("measurements %q", ms)
	}
	_, _, metrics := ts.do("GET", "/metrics", nil)
	for _, want := range []string{
		`strata_remote_write_series_refused_total{reason="invalid_utf8"} 4`,
		`strata_remote_write_series_refused_total{reason="duplicate_label"} 3`,
		`strata_remote_write_series_refused_total{reason="empty_label_name"} 1`,
		`strata_remote_write_series_refused_total{reason="missing_name"} 2`,
		`strata_remote_write_series_refused_total{reason="invalid"} 1`,
		`strata_remote_write_series_refused_total{reason="too_many_labels"} 0`,
		`strata_remote_write_samples_total 4`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %s in\n%s", want, grepLines(metrics, "strata_remote_write"))
		}
	}
	// The stored series read back under their names.
	code, r := ts.apiCall("GET", "/api/v1/series", url.Values{"match[]": {`good`}})
	if code != 200 || strings.Count(string(r.Data), "__name__") != 2 {
		t.Errorf("series: %d %s", code, r.Data)
	}
}

// TestRemoteWriteTooManyLabels: a series of more labels than the engine
// takes is refused without its labels being held.
func TestRemoteWriteTooManyLabels(t *testing.T) {
	ts := newTestServer(t, nil)
	lbls := []string{"__name__", "wide"}
	for i := range maxRemoteLabels {
		lbls = append(lbls, fmt.Sprintf("l%04d", i), "v")
	}
	s := prompb.TimeSeries{Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
	for i := 0; i+1 < len(lbls); i += 2 {
		s.Labels = append(s.Labels, prompb.Label{Name: lbls[i], Value: lbls[i+1]})
	}
	code, _, msg := ts.do("POST", "/api/v1/write", remoteBody(t, s, series("narrow", 0, 1)), remoteHeaders...)
	if code != 400 || !strings.Contains(msg, "labels") || ts.count("wide") != 0 || ts.count("narrow") != 1 {
		t.Errorf("%d %.200s; stored %d, %d", code, msg, ts.count("wide"), ts.count("narrow"))
	}
}

// TestRemoteDecodeMatchesPrompb: the in-place decoder reads what the
// generated prompb code reads.
func TestRemoteDecodeMatchesPrompb(t *testing.T) {
	req := prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			series("a", 5, 3, "job", "x", "empty", ""),
			{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 3}, Timestamp: 9}}},
			{Labels: []prompb.Label{{Name: "__name__", Value: "e"}}, Samples: []prompb.Sample{{Timestamp: -7, Value: math.Inf(-1)}},
				Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace", Value: "t"}}, Value: 1, Timestamp: 2}}},
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "a", Help: "h"}},
	}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	checkDecodeAgrees(t, raw)
}

// checkDecodeAgrees checks that where prompb decodes raw, the in-place
// decoder does too and reads the same series; where it does not, neither
// does the in-place decoder, unless the fault lies in a message it skips.
func checkDecodeAgrees(t *testing.T, raw []byte) {
	var want prompb.WriteRequest
	werr := want.Unmarshal(raw)
	n, _, err := checkWriteRequest(raw)
	if werr != nil {
		return // the skipped messages are checked for framing only
	}
	if err != nil && strings.Contains(err.Error(), "end group") {
		// A group (a deprecated wire type) in a skipped field, closed by
		// the end marker of another field: prompb's skipping does not
		// match the markers, protobuf's own decoder (and protowire) do.
		return
	}
	if err != nil {
		t.Fatalf("prompb decodes %x, checkWriteRequest: %v", raw, err)
	}
	wantSamples := 0
	for _, s := range want.Timeseries {
		wantSamples += len(s.Samples)
	}
	if n != wantSamples {
		t.Fatalf("%d samples, want %d", n, wantSamples)
	}
	i := 0
	err = eachSeries(raw, nil, func(labels []wireLabel, tooMany bool, ts []byte) error {
		w := want.Timeseries[i]
		i++
		if tooMany != (len(w.Labels) > maxRemoteLabels) {
			t.Fatalf("series %d: tooMany %v with %d labels", i, tooMany, len(w.Labels))
		}
		if !tooMany {
			if len(labels) != len(w.Labels) {
				t.Fatalf("series %d: %d labels, want %d", i, len(labels), len(w.Labels))
			}
			for j, l := range labels {
				if string(l.name) != w.Labels[j].Name || string(l.value) != w.Labels[j].Value {
					t.Fatalf("series %d label %d: %q=%q, want %v", i, j, l.name, l.value, w.Labels[j])
				}
			}
		}
		it := sampleIter{b: ts}
		k := 0
		for it.next() {
			if k >= len(w.Samples) {
				t.Fatalf("series %d: more than %d samples", i, len(w.Samples))
			}
			ws := w.Samples[k]
			if it.t != ws.Timestamp || math.Float64bits(it.v) != math.Float64bits(ws.Value) {
				t.Fatalf("series %d sample %d: %d %v, want %v", i, k, it.t, it.v, ws)
			}
			k++
		}
		if k != len(w.Samples) {
			t.Fatalf("series %d: %d samples, want %d", i, k, len(w.Samples))
		}
		return nil
	})
	if err != nil || i != len(want.Timeseries) {
		t.Fatalf("%d series of %d: %v", i, len(want.Timeseries), err)
	}
}

// FuzzRemoteDecode: the in-place decoder agrees with prompb on every body
// that prompb decodes, and storing any body costs a bounded multiple of
// its size.
func FuzzRemoteDecode(f *testing.F) {
	good, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("up", 1, 3, "job", "j", "a", ""),
		{Labels: []prompb.Label{{Name: "__name__", Value: "x\xff"}, {Name: "__name__", Value: "y"}}, Samples: []prompb.Sample{{Value: math.NaN()}}},
	}}).Marshal()
	f.Add(good)
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x00})
	f.Add(field(1, append(label("__name__", "m"), 0x12, 0x00, 0x12, 0x09, 0x09, 1, 2, 3, 4, 5, 6, 7, 8)))
	f.Add(field(1, append(label("b", "1"), label("__name__", "m")...)))
	f.Add([]byte{0x0a, 0x04, 0x12, 0x02, 0x08, 0x01}) // a sample value of the wrong wire type
	f.Add([]byte{0x0a, 0x03, 0x0b, 0x0c, 0x00})       // a group
	f.Add([]byte{0x1a, 0x02, 0x08, 0x80})             // metadata cut in a varint
	f.Add([]byte{0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01})
	db, err := engine.Open(f.TempDir(), &engine.Options{Sync: engine.SyncNever})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	h, err := New(db, &Options{MaxBodyBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecodeAgrees(t, raw)
		body := snappy.Encode(nil, raw)
		var rec *httptest.ResponseRecorder
		cost := heapCost(func() {
			req := httptest.NewRequest("POST", "/api/v1/write", bytes.NewReader(body))
			req.Header.Set("Content-Encoding", "snappy")
			rec = serve(h, req)
		})
		if c := rec.Code; c != http.StatusNoContent && c != http.StatusBadRequest && c != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d: %s", c, rec.Body)
		}
		// The store's fixed cost (its batches: the appender's, the Write path's),
		// then a bounded multiple of the body.
		if limit := uint64(4<<20 + 64*len(raw)); cost > limit {
			t.Fatalf("%d bytes allocated for %d bytes", cost, len(raw))
		}
	})
}

// TestLineProtocolHostileMemory: line-protocol bodies at the limit (8 MiB
// here, to keep the test short; the bound is relative) cost a small
// multiple of their size whatever their lines: the body buffer, each
// line's garbage, and lineproto's name and series tables, which it bounds
// in bytes (4 and 8 MiB). What stored points cost is the engine's, bounded
// by its memtable size.
func TestLineProtocolHostileMemory(t *testing.T) {
	limit := 8 << 20
	if raceEnabled {
		limit = 2 << 20
	}
	ts := newTestServer(t, &Options{MaxBodyBytes: int64(limit)})
	lines := func(format string) []byte {
		var b bytes.Buffer
		for i := 0; ; i++ {
			n := b.Len()
			fmt.Fprintf(&b, format, i)
			if b.Len() > limit {
				b.Truncate(n)
				return b.Bytes()
			}
		}
	}
	cases := []struct {
		name string
		body []byte
		want int
	}{
		// Distinct series sections, every line refused by the parser after
		// its tags: the tables fill with sections that are never written.
		{"distinct rejected series", lines("m,tag=%08d,other=xxxxxxxx v=1 notatime\n"), 400},
		{"distinct rejected names", lines("m%08d,tag%08[1]d=v v=\n"), 400},
		{"comments", repeatTo([]byte("#\n"), limit), 204},
		{"blank lines", repeatTo([]byte("\n"), limit), 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			cost := heapCost(func() {
				rec = serve(ts.h, httptest.NewRequest("POST", "/api/v2/write", bytes.NewReader(c.body)))
			})
			t.Logf("%d bytes: %d, %.1f MiB allocated", len(c.body), rec.Code, float64(cost)/(1<<20))
			if rec.Code != c.want {
				t.Errorf("status %d, want %d: %.300s", rec.Code, c.want, rec.Body)
			}
			// lineproto's tables take up to 12 MiB whatever the body.
			if cost > 8*uint64(limit)+16<<20 {
				t.Errorf("%.1f MiB allocated for a body of %d MiB", float64(cost)/(1<<20), limit>>20)
			}
		})
	}
}
