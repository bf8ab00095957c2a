package forward

// End-to-end tests against a real VictoriaMetrics single-node, built from
// its Go module (the release pinned in internal/vmtool) into the user cache
// directory once and reused, and started on loopback with its data in a
// temporary directory.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

const vmVersion = "v1.151.0" // keep in step with internal/vmtool/go.mod

var (
	vmOnce sync.Once
	vmPath string
	vmErr  error
)

// vmBinary returns the path of the VictoriaMetrics binary, building it on
// first use.
func vmBinary(t testing.TB) string {
	t.Helper()
	vmOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		vmPath = filepath.Join(cache, "strata", "victoria-metrics-"+vmVersion)
		if _, err := os.Stat(vmPath); err == nil {
			return
		}
		if vmErr = os.MkdirAll(filepath.Dir(vmPath), 0o755); vmErr != nil {
			return
		}
		tool, err := filepath.Abs(filepath.Join("internal", "vmtool"))
		if err != nil {
			vmErr = err
			return
		}
		tmp := fmt.Sprintf("%s.tmp%d", vmPath, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics")
		cmd.Dir = tool
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			vmErr = fmt.Errorf("build victoria-metrics: %v\n%s", err, out)
			return
		}
		t.Logf("built victoria-metrics %s in %v", vmVersion, time.Since(start).Round(time.Second))
		vmErr = os.Rename(tmp, vmPath)
	})
	if vmErr != nil {
		t.Fatal(vmErr)
	}
	return vmPath
}

// vm is a running VictoriaMetrics.
type vm struct {
	t    testing.TB
	bin  string
	data string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startVM(t testing.TB) *vm {
	v := &vm{t: t, bin: vmBinary(t), data: t.TempDir(), addr: freeAddr(t)}
	v.start()
	t.Cleanup(v.stop)
	return v
}

func (v *vm) url(path string) string { return "http://" + v.addr + path }

func (v *vm) start() {
	v.t.Helper()
	v.cmd = exec.Command(v.bin,
		"-httpListenAddr="+v.addr,
		"-storageDataPath="+v.data,
		"-retentionPeriod=100y",
		"-loggerLevel=ERROR",
		"-search.latencyOffset=0s",
		"-search.disableCache",
	)
	v.cmd.Stdout, v.cmd.Stderr = io.Discard, os.Stderr
	dieWithParent(v.cmd)
	if err := v.cmd.Start(); err != nil {
		v.t.Fatal(err)
	}
	v.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(v.cmd, v.done)
	waitFor(v.t, "victoria-metrics to start", time.Minute, func() bool {
		select {
		case <-v.done:
			v.t.Fatal("victoria-metrics exited")
		default:
		}
		resp, err := http.Get(v.url("/health"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// stop stops VictoriaMetrics gracefully (its data is kept for a restart).
func (v *vm) stop() {
	if v.cmd == nil {
		return
	}
	v.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-v.done:
	case <-time.After(time.Minute):
		v.cmd.Process.Kill()
		<-v.done
	}
	v.cmd = nil
}

// vmSample is one exported sample.
type vmSample struct {
	series string
	time   int64 // ms
	value  float64
}

// export returns every sample of the metrics matching match.
func (v *vm) export(match string) ([]vmSample, error) {
	resp, err := http.Get(v.url("/api/v1/export?match[]=" + url.QueryEscape(match)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("export: %d %s", resp.StatusCode, b)
	}
	var out []vmSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Values     []float64         `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, err
		}
		series := line.Metric["__name__"] + "{device_id=" + line.Metric["device_id"] + "}"
		for i := range line.Values {
			out = append(out, vmSample{series: series, time: line.Timestamps[i], value: line.Values[i]})
		}
	}
	return out, sc.Err()
}

// count returns how many samples of the sensor metric VictoriaMetrics holds.
func (v *vm) count() int {
	s, err := v.export(`{__name__="sensor_temperature"}`)
	if err != nil {
		return -1
	}
	return len(s)
}

// The dataset of these tests: devices x steps points, the value of device
// d at step s is d + s/100, one step a second from t0.
func vmPoints(devices, from, to int) []engine.Point {
	pts := make([]engine.Point, 0, devices*(to-from))
	for s := from; s < to; s++ {
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

// checkExport checks that VictoriaMetrics holds every point of steps
// [0, steps) of every device, with its value, and returns how many extra
// copies (at-least-once duplicates) it holds.
func checkExport(t testing.TB, v *vm, devices, steps int) (dups int) {
	t.Helper()
	samples, err := v.export(`{__name__="sensor_temperature"}`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		series string
		time   int64
	}
	seen := make(map[key]int, len(samples))
	for _, s := range samples {
		k := key{s.series, s.time}
		seen[k]++
		if seen[k] > 1 {
			dups++
		}
		var d int
		if _, err := fmt.Sscanf(s.series, "sensor_temperature{device_id=dev-%d}", &d); err != nil {
			t.Fatalf("unexpected series %q", s.series)
		}
		step := (s.time - t0/1e6) / 1000
		if want := float64(d) + float64(step)/100; math.Abs(s.value-want) > 1e-9 || step < 0 || step >= int64(steps) {
			t.Fatalf("%s at %d = %v, want %v", s.series, s.time, s.value, want)
		}
	}
	if len(seen) != devices*steps {
		t.Fatalf("victoria-metrics holds %d distinct points, want %d", len(seen), devices*steps)
	}
	return dups
}

// waitVM polls VictoriaMetrics (an export per poll) for up to a minute,
// until it holds at least want samples of the sensor metric.
func waitVM(t testing.TB, v *vm, what string, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n := v.count()
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: victoria-metrics holds %d of %d samples", what, n, want)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
}

func waitSent(t testing.TB, f *Forwarder, n int64, d time.Duration) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d samples sent", n), d, func() bool { return f.Stats().SamplesSent >= n })
}

// 200k points written through strata reach VictoriaMetrics, over remote
// write and over line protocol, through a stop of VictoriaMetrics in the
// middle (writes go on locally meanwhile).
func TestVictoriaMetrics(t *testing.T) {
	const devices, steps = 1000, 200 // 200k points
	for _, c := range []struct {
		proto Protocol
		path  string
	}{{Prometheus, "/api/v1/write"}, {Influx, "/write"}} {
		t.Run(string(c.proto), func(t *testing.T) {
			v := startVM(t)
			db := openDB(t, t.TempDir())
			defer db.Close()
			f := newForwarder(t, db, Options{URL: v.url(c.path), Protocol: c.proto, Linger: 50 * time.Millisecond,
				MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
			defer f.Close()

			start := time.Now()
			writeBatches(t, db, vmPoints(devices, 0, steps/2), 10_000)
			waitSent(t, f, devices*steps/2, 2*time.Minute)
			waitVM(t, v, "the first half in victoria-metrics", devices*steps/2)
			t.Logf("first 100k points delivered and visible in %v", time.Since(start).Round(time.Millisecond))

			// Outage: writes go on locally, delivery retries.
			v.stop()
			retries := f.Stats().Retries
			writeBatches(t, db, vmPoints(devices, steps/2, steps), 10_000)
			waitFor(t, "retries during the outage", time.Minute, func() bool { return f.Stats().Retries > retries+2 })
			if st := f.Stats(); st.BacklogSamples == 0 || st.Lag == 0 {
				t.Errorf("during the outage: %+v", st)
			}
			v.start()
			waitSent(t, f, devices*steps, 2*time.Minute)
			waitVM(t, v, "every point in victoria-metrics", devices*steps)
			if dups := checkExport(t, v, devices, steps); dups != 0 {
				t.Errorf("%d duplicates without a crash", dups)
			}
			st := f.Stats()
			if st.SamplesDropped != 0 || st.BacklogSamples != 0 || st.SamplesQueued != devices*steps {
				t.Errorf("stats %+v", st)
			}
			t.Logf("stats after the outage: sent %d, requests %d, retries %d", st.SamplesSent, st.Requests, st.Retries)
		})
	}
}

// A strata process killed with SIGKILL in the middle of forwarding and
// started again delivers everything: the queue and the cursor are durable.
func TestVictoriaMetricsKill9(t *testing.T) {
	const devices, steps = 1000, 200
	v := startVM(t)
	dir := t.TempDir()
	run := func(killAfter int) (sent int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestForwardChild$", "-test.v")
		cmd.Env = append(os.Environ(), "STRATA_FORWARD_CHILD="+dir, "STRATA_FORWARD_URL="+v.url("/api/v1/write"),
			fmt.Sprintf("STRATA_FORWARD_SHAPE=%d,%d", devices, steps))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		killed := false
		for sc.Scan() {
			line := sc.Text()
			n, ok := strings.CutPrefix(line, "sent ")
			if !ok {
				t.Logf("child: %s", line)
			}
			if ok {
				sent, _ = strconv.ParseInt(n, 10, 64)
				if killAfter > 0 && sent >= int64(killAfter) && !killed {
					cmd.Process.Kill() // SIGKILL, mid-forwarding
					killed = true
				}
			}
		}
		err = cmd.Wait()
		if killAfter > 0 && !killed {
			t.Fatalf("child ended before it could be killed: %v", err)
		}
		if killAfter == 0 && err != nil {
			t.Fatalf("child: %v", err)
		}
		return sent
	}
	sent := run(devices * steps / 4)
	t.Logf("killed the forwarding process after it reported %d samples sent; victoria-metrics shows %d so far", sent, v.count())
	run(0)
	waitVM(t, v, "every point in victoria-metrics", devices*steps)
	dups := checkExport(t, v, devices, steps)
	t.Logf("every one of %d points arrived; %d duplicates (at least once: batches in flight at the kill)", devices*steps, dups)
}

// TestForwardChild is the process TestVictoriaMetricsKill9 kills: run with
// STRATA_FORWARD_CHILD set, it opens the database there, forwards, writes
// the steps the database does not hold yet, reports its progress on stdout,
// and exits once everything is delivered. Run by go test directly, it has
// nothing to do.
func TestForwardChild(t *testing.T) {
	dir := os.Getenv("STRATA_FORWARD_CHILD")
	if dir == "" {
		return
	}
	var devices, steps int
	fmt.Sscanf(os.Getenv("STRATA_FORWARD_SHAPE"), "%d,%d", &devices, &steps)
	db := openDB(t, dir)
	f := newForwarder(t, db, Options{URL: os.Getenv("STRATA_FORWARD_URL"), Protocol: Prometheus,
		BatchSize: 2000, Linger: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	// Resume after the last step stored (each step is one atomic Write).
	next := 0
	res, err := db.Query(context.Background(), engine.Query{Agg: engine.AggCount, Selector: engine.Selector{Measurement: "sensor",
		Tags: []engine.Tag{{Key: "device_id", Value: "dev-0000"}}, Start: t0, End: t0 + int64(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) > 0 {
		next = int(res[0].Samples[0].Value.Int())
	}
	fmt.Printf("resume %d\n", next)
	for s := next; s < steps; s++ {
		if err := db.Write(vmPoints(devices, s, s+1)); err != nil {
			t.Fatal(err)
		}
		// Keep writing ahead of delivery by a few steps, so that the kill
		// finds writes and deliveries both in progress.
		for f.Stats().BacklogSamples > int64(20*devices) {
			fmt.Printf("sent %d\n", f.Stats().SamplesSent)
			time.Sleep(time.Millisecond) // pacing, not synchronisation
		}
	}
	for {
		st := f.Stats()
		fmt.Printf("sent %d\n", st.SamplesSent)
		if st.BacklogSamples == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // progress report interval
	}
	st := f.Stats()
	fmt.Printf("stats sent %d, dropped %d, queued %d\n", st.SamplesSent, st.SamplesDropped, st.SamplesQueued)
	if st.SamplesDropped != 0 {
		t.Errorf("dropped %d samples: %+v", st.SamplesDropped, st)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// With VictoriaMetrics down, a backlog past MaxBacklogBytes drops the
// oldest undelivered data from the queue, counted in Stats; the database
// holds all of it; once VictoriaMetrics is up, the rest arrives.
func TestVictoriaMetricsBacklogBound(t *testing.T) {
	const devices, steps = 1000, 200
	v := startVM(t)
	v.stop()
	db := openDB(t, t.TempDir())
	defer db.Close()
	const bound = 1 << 20
	f := newForwarder(t, db, Options{URL: v.url("/api/v1/write"), Protocol: Prometheus, Linger: 10 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxBacklogBytes: bound, SegmentBytes: 128 << 10})
	defer f.Close()
	writeBatches(t, db, vmPoints(devices, 0, steps), 10_000)
	// The bound is enforced in the background right after each write.
	waitFor(t, "backlog drops down to the bound", time.Minute, func() bool {
		s := f.Stats()
		return s.DroppedBacklog > 0 && s.BacklogBytes <= bound
	})
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "sensor", Start: t0, End: t0 + int64(time.Hour)}, Agg: engine.AggCount})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range res {
		n += s.Samples[0].Value.Int()
	}
	if n != devices*steps {
		t.Fatalf("the database holds %d points, want %d", n, devices*steps)
	}
	v.start()
	var st Stats
	waitFor(t, "the rest delivered", 2*time.Minute, func() bool {
		s := f.Stats()
		return s.SamplesSent+s.DroppedBacklog == devices*steps && s.BacklogSamples == 0
	})
	st = f.Stats()
	waitVM(t, v, "victoria-metrics to show what was sent", int(st.SamplesSent))
	if c := int64(v.count()); c != st.SamplesSent {
		t.Fatalf("victoria-metrics holds %d points, stats say %d sent", c, st.SamplesSent)
	}
	t.Logf("backlog bound %d bytes: dropped %d of %d points, delivered %d", bound, st.DroppedBacklog, devices*steps, st.SamplesSent)
}
