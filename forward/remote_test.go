package forward

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/stratadb/strata/engine"
	"google.golang.org/protobuf/encoding/protowire"
)

// got is one sample as a remote received it: the series in a protocol-
// neutral form and the time in the protocol's unit.
type got struct {
	series string
	time   int64
	value  string
}

// fakeRemote records what it receives and answers with the status its
// respond function picks (204 when nil).
type fakeRemote struct {
	t       testing.TB
	srv     *httptest.Server
	proto   Protocol
	mu      sync.Mutex
	samples []got
	reqs    int
	respond func(req int, w http.ResponseWriter) bool // true: answered, do not record
}

func newFakeRemote(t testing.TB, proto Protocol) *fakeRemote {
	r := &fakeRemote{t: t, proto: proto}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *fakeRemote) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	r.mu.Lock()
	r.reqs++
	n := r.reqs
	respond := r.respond
	r.mu.Unlock()
	if respond != nil && respond(n, w) {
		return
	}
	var s []got
	switch r.proto {
	case Prometheus:
		if req.Header.Get("Content-Encoding") != "snappy" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.t.Errorf("prometheus request headers %v", req.Header)
		}
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			r.t.Errorf("snappy: %v", err)
			http.Error(w, err.Error(), 400)
			return
		}
		s, err = decodeWriteRequest(raw)
		if err != nil {
			r.t.Errorf("decode write request: %v", err)
			http.Error(w, err.Error(), 400)
			return
		}
	case Influx:
		s = parseLines(r.t, string(body))
	}
	r.mu.Lock()
	r.samples = append(r.samples, s...)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *fakeRemote) received() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// decodeWriteRequest reads a remote write 1.0 WriteRequest; the series is
// its labels as name="value" pairs in the order sent.
func decodeWriteRequest(b []byte) ([]got, error) {
	var out []got
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return nil, fmt.Errorf("bad WriteRequest field")
		}
		b = b[n:]
		ts, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("bad timeseries")
		}
		b = b[n:]
		var labels []string
		var samples []got
		for len(ts) > 0 {
			num, _, n := protowire.ConsumeTag(ts)
			ts = ts[n:]
			m, n := protowire.ConsumeBytes(ts)
			if n < 0 {
				return nil, fmt.Errorf("bad timeseries field")
			}
			ts = ts[n:]
			fields := map[protowire.Number][]byte{}
			var fixed uint64
			var varint uint64
			for len(m) > 0 {
				fn, ft, n := protowire.ConsumeTag(m)
				m = m[n:]
				switch ft {
				case protowire.BytesType:
					v, n := protowire.ConsumeBytes(m)
					fields[fn] = v
					m = m[n:]
				case protowire.Fixed64Type:
					fixed, n = protowire.ConsumeFixed64(m)
					m = m[n:]
				case protowire.VarintType:
					varint, n = protowire.ConsumeVarint(m)
					m = m[n:]
				default:
					return nil, fmt.Errorf("unexpected wire type %d", ft)
				}
				if n < 0 {
					return nil, fmt.Errorf("bad field")
				}
			}
			switch num {
			case 1:
				labels = append(labels, fmt.Sprintf("%s=%q", fields[1], fields[2]))
			case 2:
				samples = append(samples, got{time: int64(varint), value: fmt.Sprint(math.Float64frombits(fixed))})
			}
		}
		if !slices.IsSorted(labels) {
			return nil, fmt.Errorf("labels not sorted: %v", labels)
		}
		for _, s := range samples {
			s.series = "{" + strings.Join(labels, ",") + "}"
			out = append(out, s)
		}
	}
	return out, nil
}

// parseLines splits line protocol into one sample per field; the series is
// "prefix field" and the value the field's text.
func parseLines(t testing.TB, body string) []got {
	var out []got
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		prefix, rest := influxParts(line)
		i := strings.LastIndexByte(rest, ' ')
		var ts int64
		fmt.Sscan(rest[i+1:], &ts)
		for _, kv := range strings.Split(rest[:i], ",") { // test data has no commas in values
			k, v, _ := strings.Cut(kv, "=")
			out = append(out, got{series: prefix + " " + k, time: ts, value: v})
		}
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func openDB(t testing.TB, dir string) *engine.DB {
	t.Helper()
	db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newForwarder(t testing.TB, db *engine.DB, opts Options) *Forwarder {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	f, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

// sensorPoints makes n points of devices series, in time order per device.
func sensorPoints(devices, steps int, t0 int64) []engine.Point {
	pts := make([]engine.Point, 0, devices*steps)
	for s := range steps {
		for d := range devices {
			pts = append(pts, engine.Point{
				Measurement: "sensor",
				Tags:        []engine.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%04d", d)}},
				Fields:      []engine.Field{{Key: "temperature", Value: engine.Float(float64(d) + float64(s)/100)}},
				Time:        t0 + int64(s)*int64(time.Second),
			})
		}
	}
	return pts
}

func writeBatches(t testing.TB, db *engine.DB, pts []engine.Point, batch int) {
	t.Helper()
	for len(pts) > 0 {
		n := min(batch, len(pts))
		if err := db.Write(pts[:n]); err != nil {
			t.Fatal(err)
		}
		pts = pts[n:]
	}
}

// checkSensor checks that got holds every sample of sensorPoints exactly
// once and in time order per series.
func checkSensor(t testing.TB, samples []got, devices, steps int, t0 int64, unit int64) {
	t.Helper()
	bySeries := map[string][]got{}
	for _, s := range samples {
		bySeries[s.series] = append(bySeries[s.series], s)
	}
	if len(bySeries) != devices {
		t.Fatalf("%d series, want %d", len(bySeries), devices)
	}
	keys := make([]string, 0, len(bySeries))
	for k := range bySeries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for d, k := range keys {
		ss := bySeries[k]
		if len(ss) != steps {
			t.Fatalf("series %s: %d samples, want %d", k, len(ss), steps)
		}
		for s, x := range ss {
			wantT := (t0 + int64(s)*int64(time.Second)) / unit
			want := fmt.Sprint(float64(d) + float64(s)/100)
			if x.time != wantT || x.value != want {
				t.Fatalf("series %s sample %d: %d %s, want %d %s", k, s, x.time, x.value, wantT, want)
			}
		}
	}
}
