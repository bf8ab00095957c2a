package forward

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/stratadb/strata/engine"
)

// strictRemote is a remote write receiver without an out-of-order window,
// as Prometheus' 1.0 receiver: a request holding one sample at or behind
// its series' newest (stored, or earlier in the request) is refused whole
// with 400, nothing of it stored.
type strictRemote struct {
	srv     *httptest.Server
	mu      sync.Mutex
	newest  map[string]int64
	samples []got
	refused int
}

func newStrictRemote(t *testing.T) *strictRemote {
	r := &strictRemote{newest: map[string]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s, err := decodeWriteRequest(raw)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		seen := map[string]int64{}
		for _, x := range s {
			last, ok := seen[x.series]
			if !ok {
				last, ok = r.newest[x.series]
			}
			if ok && x.time <= last {
				r.refused++
				http.Error(w, "out of order sample", http.StatusBadRequest)
				return
			}
			seen[x.series] = x.time
		}
		for k, v := range seen {
			r.newest[k] = v
		}
		r.samples = append(r.samples, s...)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *strictRemote) received() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// TestBackfillDoesNotSinkBatch: a backfilled sample (behind its series'
// newest) in a batch with samples of other series costs only itself at a
// receiver without an out-of-order window, not the batch; a receiver that
// takes any order gets it too.
func TestBackfillDoesNotSinkBatch(t *testing.T) {
	point := func(dev string, sec int64, v float64) engine.Point {
		return engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "dev", Value: dev}}, Time: t0 + sec*int64(time.Second),
			Fields: []engine.Field{{Key: "value", Value: engine.Float(v)}}}
	}
	first := []engine.Point{point("a", 10, 1), point("b", 10, 1), point("c", 10, 1)}
	// One Write, so one batch: a backfill of a, a sample of a behind
	// another of a in the batch, and new samples of all three.
	second := []engine.Point{point("a", 5, 2), point("b", 11, 2), point("a", 12, 2), point("a", 11, 2), point("c", 11, 2)}

	strict := newStrictRemote(t)
	lenient := newFakeRemote(t, Prometheus)
	for _, tc := range []struct {
		name     string
		url      string
		received func() []got
		dropped  int64
	}{
		{"strict", strict.srv.URL, strict.received, 2},
		{"any-order", lenient.srv.URL, lenient.received, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			defer db.Close()
			f := newForwarder(t, db, Options{URL: tc.url, Protocol: Prometheus, BatchSize: 100, Linger: time.Millisecond})
			defer f.Close()
			if err := db.Write(first); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the first batch", 10*time.Second, func() bool { return f.Stats().SamplesSent == 3 })
			if err := db.Write(second); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the second batch", 10*time.Second, func() bool {
				st := f.Stats()
				return st.SamplesSent+st.SamplesDropped == 8
			})
			st := f.Stats()
			if st.DroppedRejected != tc.dropped || st.SamplesSent != 8-tc.dropped {
				t.Errorf("sent %d, dropped as rejected %d; want %d and %d", st.SamplesSent, st.DroppedRejected, 8-tc.dropped, tc.dropped)
			}
			have := map[string]bool{}
			for _, g := range tc.received() {
				have[g.series+" "+itoa(g.time-t0/1e6)] = true
			}
			want := []string{`{__name__="m",dev="b"} 11000`, `{__name__="m",dev="c"} 11000`, `{__name__="m",dev="a"} 12000`}
			if tc.dropped == 0 {
				want = append(want, `{__name__="m",dev="a"} 5000`, `{__name__="m",dev="a"} 11000`)
			}
			for _, w := range want {
				if !have[w] {
					t.Errorf("remote lacks %s; has %v", w, have)
				}
			}
		})
	}
	if strict.refused != 1 {
		t.Errorf("strict remote refused %d requests, want 1 (the batch as it came)", strict.refused)
	}
}
