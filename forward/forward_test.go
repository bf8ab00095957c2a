package forward

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

const t0 = int64(1_700_000_000) * int64(time.Second)

// Every point written through Write and lineproto reaches the remote over
// remote write, named as the query API names series, in order per series.
func TestPrometheusDelivers(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 700, Linger: 10 * time.Millisecond})
	defer f.Close()

	const devices, steps = 50, 40
	writeBatches(t, db, sensorPoints(devices, steps, t0), 333)
	waitFor(t, "every sensor sample", 10*time.Second, func() bool { return f.Stats().SamplesSent == devices*steps })
	checkSensor(t, r.received(), devices, steps, t0, 1e6)

	// Kinds, names and a line-protocol write; strings are skipped.
	lp := "m-x,host=a,we.ird=1 value=1.5,n=-3i,u=7u,ok=true,s=\"str\" 1700000000123999999\n" +
		"m-x,host=a,we.ird=1 value=2 -1500000\n"
	if _, err := lineproto.Write(context.Background(), db, strings.NewReader(lp), lineproto.Options{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kinds", 10*time.Second, func() bool { return f.Stats().SamplesSent == devices*steps+5 })
	want := map[string]bool{
		`{__name__="m_x",host="a",we_ird="1"} 1700000000123 1.5`:  true,
		`{__name__="m_x_n",host="a",we_ird="1"} 1700000000123 -3`: true,
		`{__name__="m_x_u",host="a",we_ird="1"} 1700000000123 7`:  true,
		`{__name__="m_x_ok",host="a",we_ird="1"} 1700000000123 1`: true,
		`{__name__="m_x",host="a",we_ird="1"} -2 2`:               true, // floored
	}
	for _, s := range r.received()[devices*steps:] {
		k := s.series + " " + itoa(s.time) + " " + s.value
		if !want[k] {
			t.Errorf("unexpected sample %s", k)
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("missing %v", want)
	}
	st := f.Stats()
	if st.SamplesSkipped != 1 || st.SamplesQueued != devices*steps+6 || st.BacklogSamples != 0 || st.SamplesDropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The influx protocol sends line protocol as stored, fields of a point on
// one line, ns timestamps.
func TestInfluxDelivers(t *testing.T) {
	r := newFakeRemote(t, Influx)
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL + "/write", Protocol: Influx, BatchSize: 500, Linger: 10 * time.Millisecond})
	defer f.Close()
	const devices, steps = 30, 30
	writeBatches(t, db, sensorPoints(devices, steps, t0), 250)
	lp := "cpu,host=a\\ b user=1.5,n=-3i,u=7u,ok=true,s=\"say \\\"hi\\\"\" 123\n"
	if _, err := lineproto.Write(context.Background(), db, strings.NewReader(lp), lineproto.Options{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every sample", 10*time.Second, func() bool { return f.Stats().SamplesSent == devices*steps+5 })
	all := r.received()
	checkSensor(t, all[:devices*steps], devices, steps, t0, 1)
	var tail []string
	for _, s := range all[devices*steps:] {
		tail = append(tail, s.series+"="+s.value+" "+itoa(s.time))
	}
	// Fields are sent in the order the engine logged them (by field key
	// within a point as lineproto maps them); compare as a set.
	want := []string{"cpu,host=a\\ b user=1.5 123", "cpu,host=a\\ b n=-3i 123", "cpu,host=a\\ b u=7u 123",
		"cpu,host=a\\ b ok=true 123", `cpu,host=a\ b s="say \"hi\"" 123`}
	if !sameSet(tail, want) {
		t.Fatalf("got %q\nwant %q", tail, want)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// Network errors, 5xx and 429 are retried (honouring Retry-After within
// MaxBackoff) until delivery; another 4xx drops its batch, counted.
func TestRetriesAndRejects(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	r.respond = func(n int, w http.ResponseWriter) bool {
		switch n {
		case 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 3:
			http.Error(w, "bad", http.StatusBadRequest)
		default:
			return false
		}
		return true
	}
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 100, Linger: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	defer f.Close()
	pts := sensorPoints(10, 30, t0) // 300 samples: 3 batches
	writeBatches(t, db, pts, 300)
	waitFor(t, "delivery", 10*time.Second, func() bool { s := f.Stats(); return s.SamplesSent+s.DroppedRejected == 300 })
	st := f.Stats()
	if st.Retries != 2 || st.DroppedRejected != 100 || st.BatchesRejected != 1 || st.SamplesSent != 200 || st.Requests != 5 {
		t.Fatalf("stats %+v", st)
	}
	if !strings.Contains(st.LastError, "400") {
		t.Errorf("last error %q", st.LastError)
	}
	// The rejected batch is the first one (retried twice, then rejected):
	// what arrived is the rest, in order.
	got := r.received()
	if len(got) != 200 || got[0].time != (t0+10*int64(time.Second))/1e6 {
		t.Fatalf("received %d samples, first %+v", len(got), got[0])
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"-1", 0}, {"x", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// During an outage writes go on locally and queue; a forwarder closed with
// a backlog delivers it after a restart of the database and the forwarder;
// the durable cursor keeps delivered data from being sent again.
func TestOutageAndRestart(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	down := true
	var downMu = make(chan struct{}, 1)
	downMu <- struct{}{}
	isDown := func() bool { <-downMu; d := down; downMu <- struct{}{}; return d }
	r.respond = func(n int, w http.ResponseWriter) bool {
		if isDown() {
			http.Error(w, "down", http.StatusBadGateway)
			return true
		}
		return false
	}
	dir := t.TempDir()
	db := openDB(t, dir)
	opts := Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 250, Linger: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	f := newForwarder(t, db, opts)
	const devices, steps = 20, 50
	pts := sensorPoints(devices, steps, t0)
	writeBatches(t, db, pts[:500], 100)
	waitFor(t, "retries", 10*time.Second, func() bool { return f.Stats().Retries >= 3 })
	if st := f.Stats(); st.SamplesSent != 0 || st.BacklogSamples != 500 || st.Lag <= 0 {
		t.Fatalf("during the outage: %+v", st)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	writeBatches(t, db, pts[500:700], 100) // not forwarded: the forwarder is closed
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	<-downMu
	down = false
	downMu <- struct{}{}
	db = openDB(t, dir)
	f = newForwarder(t, db, opts)
	writeBatches(t, db, pts[700:], 100)
	waitFor(t, "the backlog", 10*time.Second, func() bool { return f.Stats().SamplesSent == 800 })
	got := r.received()
	if len(got) != 800 {
		t.Fatalf("received %d, want 800", len(got))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Delivered data is not sent again.
	f = newForwarder(t, db, opts)
	writeBatches(t, db, sensorPoints(1, 1, t0+int64(time.Hour)), 1)
	waitFor(t, "one more", 10*time.Second, func() bool { return f.Stats().SamplesSent == 1 })
	if n := len(r.received()); n != 801 {
		t.Fatalf("received %d after the second restart, want 801", n)
	}
	f.Close()
	db.Close()
	// Only the queue's own files are left behind, and the queue is empty.
	names, _ := os.ReadDir(filepath.Join(dir, "forward"))
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), queueSuffix) && n.Name() != cursorName && n.Name() != "LOCK" {
			t.Errorf("unexpected file %s", n.Name())
		}
	}
}

// Past MaxBacklogBytes the oldest undelivered data is dropped from the
// queue and counted; the database keeps all of it; what remains is
// delivered once the remote is back: sent + dropped = written.
func TestBacklogBytesBound(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	up := make(chan struct{})
	r.respond = func(n int, w http.ResponseWriter) bool {
		select {
		case <-up:
			return false
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}
	}
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 500, Linger: time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxBacklogBytes: 256 << 10, SegmentBytes: 64 << 10})
	defer f.Close()
	const devices, steps = 100, 400
	writeBatches(t, db, sensorPoints(devices, steps, t0), 1000)
	// The bound is enforced in the background right after each write.
	waitFor(t, "drops down to the bound", 10*time.Second, func() bool {
		s := f.Stats()
		return s.DroppedBacklog > 0 && s.BacklogBytes <= 256<<10
	})
	close(up)
	waitFor(t, "the rest", 10*time.Second, func() bool {
		s := f.Stats()
		return s.SamplesSent+s.DroppedBacklog == devices*steps && s.BacklogSamples == 0
	})
	st := f.Stats()
	if n := int64(len(r.received())); n != st.SamplesSent {
		t.Fatalf("remote has %d, stats say %d sent", n, st.SamplesSent)
	}
	// The newest data survived: the last step of every device arrived.
	last := map[string]bool{}
	for _, s := range r.received() {
		if s.time == (t0+int64(steps-1)*int64(time.Second))/1e6 {
			last[s.series] = true
		}
	}
	if len(last) != devices {
		t.Errorf("last step of %d devices arrived, want %d", len(last), devices)
	}
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "sensor", Start: t0, End: t0 + int64(time.Hour)}, Agg: engine.AggCount})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range res {
		n += s.Samples[0].Value.Int()
	}
	if n != devices*steps {
		t.Fatalf("database holds %d samples, want %d", n, devices*steps)
	}
	t.Logf("dropped %d of %d samples; sent %d", st.DroppedBacklog, devices*steps, st.SamplesSent)
}

// Undelivered data queued before now minus MaxBacklogAge is dropped.
func TestBacklogAgeBound(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	r.respond = func(int, http.ResponseWriter) bool { return false }
	clock := make(chan time.Time, 1)
	clock <- time.Unix(1000, 0)
	now := func() time.Time { c := <-clock; clock <- c; return c }
	setNow := func(t time.Time) { <-clock; clock <- t }
	db := openDB(t, t.TempDir())
	defer db.Close()
	f, err := New(db, Options{URL: r.srv.URL, Protocol: Prometheus, Logger: quiet(), Now: now,
		MaxBacklogAge: time.Hour, SegmentBytes: 1, Linger: time.Millisecond}) // a file per batch
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Queued before Start: nothing is read yet.
	writeBatches(t, db, sensorPoints(10, 10, t0), 50)
	setNow(time.Unix(1000, 0).Add(2 * time.Hour))
	writeBatches(t, db, sensorPoints(10, 10, t0+int64(time.Hour)), 50)
	f.enforceBounds() // as the trimmer does on its tick
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new data", 10*time.Second, func() bool { return f.Stats().SamplesSent == 100 })
	st := f.Stats()
	if st.DroppedBacklog != 100 {
		t.Fatalf("dropped %d, want the 100 old samples: %+v", st.DroppedBacklog, st)
	}
	for _, s := range r.received() {
		if s.time < (t0+int64(time.Hour))/1e6 {
			t.Fatalf("an expired sample was sent: %+v", s)
		}
	}
}

func TestOptions(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	for _, o := range []Options{
		{Protocol: Prometheus},
		{URL: "http://x", Protocol: "graphite"},
		{URL: "http://x", Protocol: Influx, BatchSize: -1},
		{URL: "http://x", Protocol: Influx, MinBackoff: time.Minute, MaxBackoff: time.Second},
		{URL: "::", Protocol: Influx},
	} {
		if _, err := New(db, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	if _, err := ParseProtocol("influx"); err != nil {
		t.Error(err)
	}
	if _, err := ParseProtocol("x"); !errors.Is(err, ErrInvalid) {
		t.Error(err)
	}
	f, err := New(db, Options{URL: "http://127.0.0.1:1", Protocol: Influx, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(db, Options{URL: "http://127.0.0.1:1", Protocol: Influx, Logger: quiet()}); !errors.Is(err, ErrLocked) {
		t.Errorf("second forwarder on the same queue: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

// Two forwarders of one database, each with its own queue, deliver
// everything to their own remote.
func TestTwoTargets(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	a, b := newFakeRemote(t, Prometheus), newFakeRemote(t, Influx)
	fa := newForwarder(t, db, Options{URL: a.srv.URL, Protocol: Prometheus, Linger: time.Millisecond})
	defer fa.Close()
	fb := newForwarder(t, db, Options{URL: b.srv.URL, Protocol: Influx, Linger: time.Millisecond, Dir: filepath.Join(dir, "forward-influx")})
	defer fb.Close()
	writeBatches(t, db, sensorPoints(10, 20, t0), 30)
	waitFor(t, "both targets", 10*time.Second, func() bool {
		return fa.Stats().SamplesSent == 200 && fb.Stats().SamplesSent == 200
	})
	checkSensor(t, a.received(), 10, 20, t0, 1e6)
	checkSensor(t, b.received(), 10, 20, t0, 1)
}

func TestMetrics(t *testing.T) {
	s := Stats{SamplesSent: 5, DroppedBacklog: 2, DroppedRejected: 1, Lag: 1500 * time.Millisecond}
	var buf strings.Builder
	if err := WriteMetrics(&buf, s.Metrics()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"# TYPE strata_forward_samples_sent_total counter\nstrata_forward_samples_sent_total 5\n",
		"strata_forward_samples_dropped_total{reason=\"backlog\"} 2\n",
		"strata_forward_samples_dropped_total{reason=\"rejected\"} 1\n",
		"# TYPE strata_forward_lag_seconds gauge\nstrata_forward_lag_seconds 1.5\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Count(out, "# TYPE strata_forward_samples_dropped_total") != 1 {
		t.Errorf("dropped family declared more than once:\n%s", out)
	}
}

// The delivery policy: a full batch goes at once only while writes pause,
// and no batch waits past Linger, whatever the writes do.
func TestYieldDecide(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	f := &Forwarder{opts: Options{Linger: time.Second, Now: func() time.Time { return clock }}}
	y := newYielder(f)
	if y.quietFor != maxQuiet {
		t.Fatalf("quietFor %v", y.quietFor)
	}
	start := time.Now()
	queued := clock.UnixNano()
	at := func(d time.Duration) time.Time { return start.Add(d) }
	check := func(what string, d time.Duration, full bool, wantWait time.Duration, wantSend, wantWake bool) {
		t.Helper()
		w, s, k := y.decide(at(d), full, start, queued)
		if w != wantWait || s != wantSend || k != wantWake {
			t.Errorf("%s: wait %v send %v wake %v, want %v %v %v", what, w, s, k, wantWait, wantSend, wantWake)
		}
	}
	// A partial batch waits Linger to fill, woken by each write.
	f.st.queued.Store(100)
	check("partial", 0, false, time.Second, false, true)
	check("partial, later", 20*time.Millisecond, false, 980*time.Millisecond, false, true)
	f.st.queued.Store(200)
	check("partial, writes again", 100*time.Millisecond, false, 900*time.Millisecond, false, true)
	check("partial at Linger", time.Second, false, 0, true, false)
	// A full batch while writes go on waits for a pause.
	check("full, pausing", 105*time.Millisecond, true, 5*time.Millisecond, false, false)
	check("full, paused", 110*time.Millisecond, true, 0, true, false)
	f.st.queued.Store(300)
	check("full, writes just seen", 120*time.Millisecond, true, maxQuiet, false, false)
	check("full, pausing again", 127*time.Millisecond, true, 3*time.Millisecond, false, false)
	// Writes that never pause: the batch goes at Linger all the same.
	for d := 130 * time.Millisecond; d < time.Second; d += 5 * time.Millisecond {
		f.st.queued.Add(10)
		w, s, _ := y.decide(at(d), true, start, queued)
		if s || w > maxQuiet || w > time.Second-d {
			t.Fatalf("full under writes at %v: wait %v send %v", d, w, s)
		}
	}
	f.st.queued.Add(10)
	check("full under writes at Linger", time.Second, true, 0, true, false)
	// A backlog queued Linger ago (an outage, a restart) goes at once.
	f.st.queued.Add(10)
	if w, s, _ := y.decide(at(time.Second), true, at(time.Second), clock.Add(-time.Second).UnixNano()); w != 0 || !s {
		t.Errorf("backlog: wait %v send %v", w, s)
	}
	// A short Linger shortens the pause needed.
	if y := newYielder(&Forwarder{opts: Options{Linger: 8 * time.Millisecond}}); y.quietFor != 2*time.Millisecond {
		t.Errorf("quietFor under a short Linger %v", y.quietFor)
	}
}

// Full batches go as soon as writes pause, long before Linger.
func TestDeliveryInPause(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 100, Linger: time.Hour})
	defer f.Close()
	const devices, steps = 10, 50
	writeBatches(t, db, sensorPoints(devices, steps, t0), 70)
	waitFor(t, "full batches after the writes", 10*time.Second, func() bool { return f.Stats().SamplesSent == devices*steps })
	checkSensor(t, r.received(), devices, steps, t0, 1e6)
	if st := f.Stats(); st.Batches != devices*steps/100 {
		t.Errorf("%d batches, want %d full ones", st.Batches, devices*steps/100)
	}
}

// Writes that do not pause do not starve delivery: it runs at most about
// Linger behind them, and everything arrives in order.
func TestDeliveryUnderWrites(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 100, Linger: 50 * time.Millisecond})
	defer f.Close()
	const devices = 10
	deadline := time.Now().Add(10 * time.Second)
	steps := 0
	for f.Stats().SamplesSent == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing delivered in 10 s of writes (%d samples written)", steps*devices)
		}
		pts := sensorPoints(devices, 1, t0+int64(steps)*int64(time.Second))
		writeBatches(t, db, pts, devices)
		steps++
	}
	waitFor(t, "every sample", 10*time.Second, func() bool { return f.Stats().SamplesSent == int64(devices*steps) })
	got := r.received()
	bySeries := map[string]int64{}
	for _, g := range got {
		if last, ok := bySeries[g.series]; ok && g.time <= last {
			t.Fatalf("series %s: %d after %d", g.series, g.time, last)
		}
		bySeries[g.series] = g.time
	}
	if len(got) != devices*steps || len(bySeries) != devices {
		t.Fatalf("%d samples of %d series, want %d of %d", len(got), len(bySeries), devices*steps, devices)
	}
}

// BacklogSamples counts a sample from the moment its write returns until
// the remote has accepted it, with no gap while the sender reads and
// decodes a frame: a caller that waits for a zero backlog before it closes
// (as a process about to exit does) never leaves a sample behind.
func TestBacklogHasNoGap(t *testing.T) {
	r := newFakeRemote(t, Prometheus)
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := newForwarder(t, db, Options{URL: r.srv.URL, Protocol: Prometheus, BatchSize: 50_000, Linger: time.Millisecond})
	defer f.Close()
	const devices, steps = 5000, 4 // one frame of 5000 samples a step
	for s := range steps {
		pts := sensorPoints(devices, s+1, t0)[s*devices:]
		if err := db.Write(pts); err != nil {
			t.Fatal(err)
		}
		want := (s + 1) * devices
		// Spin (no sleep) so that a gap of microseconds is seen.
		for f.Stats().BacklogSamples != 0 {
		}
		if n := len(r.received()); n != want {
			t.Fatalf("step %d: the backlog read 0 with %d of %d samples at the remote", s, n, want)
		}
	}
}
