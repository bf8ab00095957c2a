package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	influxhttp "github.com/influxdata/influxdb-client-go/v2/api/http"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	influxlog "github.com/influxdata/influxdb-client-go/v2/log"

	"github.com/stratadb/strata/engine"
)

// clientPoints are points of every field kind, with tag values and names
// that need escaping, at ms precision.
func clientPoints(n int) ([]*write.Point, map[string][]engine.Sample) {
	want := map[string][]engine.Sample{}
	var pts []*write.Point
	t0 := time.Unix(1_700_000_000, 0)
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		tags := map[string]string{"device": fmt.Sprintf("dev %d,x=y", i%5), "site": "s1"}
		fields := map[string]any{
			"temp":  20.5 + float64(i),
			"count": int64(-i),
			"u":     uint64(i),
			"ok":    i%2 == 0,
			"note":  fmt.Sprintf("reading \"%d\"\nline", i),
		}
		pts = append(pts, write.NewPoint("sensor data", tags, fields, at))
		tg := []engine.Tag{{Key: "device", Value: tags["device"]}, {Key: "site", Value: "s1"}}
		ns := at.UnixNano()
		add := func(field string, v engine.Value) {
			k := engine.SeriesKey("sensor data", tg, field)
			want[k] = append(want[k], engine.Sample{Time: ns, Value: v})
		}
		add("temp", engine.Float(20.5+float64(i)))
		add("count", engine.Int(int64(-i)))
		add("u", engine.Uint(uint64(i)))
		add("ok", engine.Bool(i%2 == 0))
		add("note", engine.String(fmt.Sprintf("reading \"%d\"\nline", i)))
	}
	return pts, want
}

func checkStored(t *testing.T, ts *testServer, m string, want map[string][]engine.Sample) {
	t.Helper()
	got := ts.all(m)
	if len(got) != len(want) {
		t.Errorf("%d series, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !samplesEqual(got[k], w) {
			t.Errorf("%s: got %d samples %v, want %d", k, len(got[k]), got[k][:min(3, len(got[k]))], len(w))
		}
	}
}

func TestInfluxClientBlocking(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "my-token"})
	client := influxdb2.NewClientWithOptions(ts.srv.URL, "my-token",
		influxdb2.DefaultOptions().SetUseGZip(true).SetPrecision(time.Millisecond))
	defer client.Close()
	api := client.WriteAPIBlocking("org", "bucket")
	pts, want := clientPoints(200)
	for i := 0; i < len(pts); i += 50 {
		if err := api.WritePoint(context.Background(), pts[i:i+50]...); err != nil {
			t.Fatal(err)
		}
	}
	checkStored(t, ts, "sensor data", want)

	// A partial write comes back as InfluxDB's error, naming the line.
	err := api.WriteRecord(context.Background(), "cl v=1 1", "cl v=oops 2", "cl v=3 3")
	var he *influxhttp.Error
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || he.Code != "invalid" ||
		!strings.Contains(he.Message, "line 2:") {
		t.Fatalf("partial write: %#v", err)
	}
	if n := ts.count("cl"); n != 2 {
		t.Errorf("%d points of the partial write stored, want 2", n)
	}

	// A wrong token is refused.
	bad := influxdb2.NewClient(ts.srv.URL, "wrong")
	defer bad.Close()
	err = bad.WriteAPIBlocking("o", "b").WriteRecord(context.Background(), "x v=1 1")
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %v", err)
	}

	// The client's health and ping checks.
	if ok, err := client.Ping(context.Background()); !ok || err != nil {
		t.Errorf("ping: %v %v", ok, err)
	}
	if h, err := client.Health(context.Background()); err != nil || h.Status != "pass" {
		t.Errorf("health: %+v %v", h, err)
	}
}

func TestInfluxClientBatching(t *testing.T) {
	ts := newTestServer(t, nil)
	client := influxdb2.NewClientWithOptions(ts.srv.URL, "",
		influxdb2.DefaultOptions().SetUseGZip(true).SetBatchSize(64).SetPrecision(time.Millisecond).
			SetFlushInterval(60_000))
	defer client.Close()
	api := client.WriteAPI("org", "bucket")
	var errs []error
	done := make(chan struct{})
	errCh := api.Errors()
	go func() {
		for err := range errCh {
			errs = append(errs, err)
		}
		close(done)
	}()
	pts, want := clientPoints(1000)
	for _, p := range pts {
		api.WritePoint(p)
	}
	api.Flush()
	checkStored(t, ts, "sensor data", want)

	// The batching client drops a batch whose error says "partial write"
	// (as InfluxDB's does) and logs the error instead of reporting it.
	logs := &captureLog{}
	defer func(l influxlog.Logger) { influxlog.Log = l }(influxlog.Log)
	influxlog.Log = logs
	api.WriteRecord("cb v=1 1")
	api.WriteRecord("cb v=\"conflict\" 2")
	api.Flush()
	client.Close()
	<-done
	if len(errs) != 0 {
		t.Errorf("errors %v", errs)
	}
	if !logs.contains("partial write: line 2:") {
		t.Errorf("the client did not log the partial write: %q", logs.lines)
	}
	if n := ts.count("cb"); n != 1 {
		t.Errorf("%d stored, want 1", n)
	}
}

// captureLog records what the InfluxDB client logs.
type captureLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLog) add(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *captureLog) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

func (l *captureLog) Debugf(string, ...any)          {}
func (l *captureLog) Debug(string)                   {}
func (l *captureLog) Infof(string, ...any)           {}
func (l *captureLog) Info(string)                    {}
func (l *captureLog) Warnf(format string, v ...any)  { l.add(format, v...) }
func (l *captureLog) Warn(msg string)                { l.add("%s", msg) }
func (l *captureLog) Errorf(format string, v ...any) { l.add(format, v...) }
func (l *captureLog) Error(msg string)               { l.add("%s", msg) }
func (l *captureLog) SetLogLevel(uint)               {}
func (l *captureLog) LogLevel() uint                 { return influxlog.DebugLevel }
func (l *captureLog) SetPrefix(string)               {}
