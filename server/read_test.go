package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/stratadb/strata/engine"
)

// writeReadFixture stores three measurements over the last two hours and
// returns the time of the newest sample.
func writeReadFixture(t *testing.T, db *engine.DB) time.Time {
	t.Helper()
	end := time.Now().Truncate(time.Minute)
	var pts []engine.Point
	for i := 0; i < 480; i++ { // every 15s for 2h
		ts := end.Add(-time.Duration(479-i) * 15 * time.Second).UnixNano()
		for _, host := range []string{"a", "b", "c"} {
			h := float64(host[0] - 'a')
			pts = append(pts,
				engine.Point{Measurement: "cpu", Tags: []engine.Tag{{Key: "host", Value: host}, {Key: "dc", Value: "eu"}},
					Fields: []engine.Field{{Key: "usage", Value: engine.Float(h*10 + float64(i%17))}, {Key: "value", Value: engine.Float(h + float64(i%5))}}, Time: ts},
				engine.Point{Measurement: "http_requests_total", Tags: []engine.Tag{{Key: "host", Value: host}, {Key: "code", Value: fmt.Sprint(200 + 300*(i%2))}},
					Fields: []engine.Field{{Key: "value", Value: engine.Float(float64(i) * (h + 1))}}, Time: ts})
		}
		pts = append(pts, engine.Point{Measurement: "temp", Tags: []engine.Tag{{Key: "room", Value: "r1"}},
			Fields: []engine.Field{{Key: "celsius", Value: engine.Int(int64(20 + i%3))}, {Key: "on", Value: engine.Bool(i%2 == 0)}}, Time: ts})
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	return end
}

// remoteRead sends a remote read request and returns its series, decoded
// from whichever response type the server chose.
func remoteRead(t *testing.T, ts *testServer, accept []prompb.ReadRequest_ResponseType, q *prompb.Query) (string, []prompb.TimeSeries) {
	t.Helper()
	raw, err := proto.Marshal(&prompb.ReadRequest{Queries: []*prompb.Query{q}, AcceptedResponseTypes: accept})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", ts.srv.URL+"/api/v1/read", bytes.NewReader(snappy.Encode(nil, raw)))
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("remote read: %d %s", resp.StatusCode, b)
	}
	ct := resp.Header.Get("Content-Type")
	var out []prompb.TimeSeries
	if strings.Contains(ct, "streamed") {
		cr := remote.NewChunkedReader(resp.Body, 50<<20, nil)
		for {
			var cres prompb.ChunkedReadResponse
			if err := cr.NextProto(&cres); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			for _, cs := range cres.ChunkedSeries {
				s := prompb.TimeSeries{Labels: cs.Labels}
				for _, c := range cs.Chunks {
					ch, err := chunkenc.FromData(chunkenc.EncXOR, c.Data)
					if err != nil {
						t.Fatal(err)
					}
					it := ch.Iterator(nil)
					for it.Next() == chunkenc.ValFloat {
						tt, v := it.At()
						s.Samples = append(s.Samples, prompb.Sample{Timestamp: tt, Value: v})
					}
				}
				out = append(out, s)
			}
		}
		return "streamed", out
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := snappy.Decode(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	var rr prompb.ReadResponse
	if err := proto.Unmarshal(dec, &rr); err != nil {
		t.Fatal(err)
	}
	for _, ts := range rr.Results[0].Timeseries {
		out = append(out, *ts)
	}
	return "samples", out
}

// TestRemoteReadResponseTypes reads the same series as raw samples and as
// streamed XOR chunks and checks both against the database.
func TestRemoteReadResponseTypes(t *testing.T) {
	ts := newTestServer(t, nil)
	end := writeReadFixture(t, ts.db)
	q := &prompb.Query{StartTimestampMs: end.Add(-time.Hour).UnixMilli(), EndTimestampMs: end.UnixMilli(),
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "cpu_usage"},
			{Type: prompb.LabelMatcher_RE, Name: "host", Value: "a|c"}}}
	want := ts.all("cpu")
	for _, accept := range [][]prompb.ReadRequest_ResponseType{
		{prompb.ReadRequest_SAMPLES},
		{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
	} {
		kind, series := remoteRead(t, ts, accept, q)
		if (kind == "streamed") != (accept[0] == prompb.ReadRequest_STREAMED_XOR_CHUNKS) {
			t.Errorf("accepted %v, answered %s", accept, kind)
		}
		if len(series) != 2 {
			t.Fatalf("%s: %d series, want 2", kind, len(series))
		}
		for _, s := range series {
			var host string
			for _, l := range s.Labels {
				if l.Name == "host" {
					host = l.Value
				}
			}
			key := "cpu,dc=eu,host=" + host + " usage"
			var exp []prompb.Sample
			for _, x := range want[key] {
				if ms := x.Time / 1e6; ms >= q.StartTimestampMs && ms <= q.EndTimestampMs {
					exp = append(exp, prompb.Sample{Timestamp: ms, Value: x.Value.Float()})
				}
			}
			if len(exp) == 0 || fmt.Sprint(s.Samples) != fmt.Sprint(exp) {
				t.Errorf("%s %s: got %d samples, want %d", kind, key, len(s.Samples), len(exp))
			}
		}
	}
	// A body that is not a snappy ReadRequest.
	if code, _, _ := ts.do("POST", "/api/v1/read", []byte("junk")); code != 400 {
		t.Errorf("junk: %d", code)
	}
}

// TestRemoteReadPrometheus starts a real Prometheus (the OS package) whose
// remote_read points at strata and whose local storage is empty, and
// checks that 20 PromQL queries answer exactly as strata's own query API.
func TestRemoteReadPrometheus(t *testing.T) {
	exe, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: bash scripts/test installs it (apt-get install -y prometheus)")
	}
	ts := newTestServer(t, nil)
	end := writeReadFixture(t, ts.db)

	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1h
remote_read:
  - url: %s/api/v1/read
    read_recent: true
`, ts.srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=info")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var logBuf bytes.Buffer
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			logBuf.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "Server is ready to receive web requests") {
				once = true
				close(ready)
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		<-logDone
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logBuf.String())
		}
	})
	select {
	case <-ready:
	case <-logDone:
		t.Fatal("prometheus exited")
	case <-time.After(60 * time.Second):
		t.Fatal("prometheus did not become ready")
	}

	// Range boundaries never on a sample: the Prometheus of the OS package
	// may be 2.x, whose ranges include their start, where 3.x's do not.
	at := fmt.Sprintf("%.3f", float64(end.Add(-37500*time.Millisecond).UnixMilli())/1000)
	queries := []string{
		`cpu_usage`,
		`cpu`,
		`cpu_usage{host="b"}`,
		`cpu_usage{host=~"a|c"}`,
		`cpu_usage{host!="a"}`,
		`http_requests_total`,
		`rate(http_requests_total[5m])`,
		`sum by (host) (rate(http_requests_total[10m]))`,
		`sum(cpu_usage)`,
		`avg_over_time(cpu_usage[30m])`,
		`max_over_time(cpu[1h])`,
		`min by (dc) (cpu_usage)`,
		`count(cpu_usage > 15)`,
		`temp_celsius`,
		`temp_on`,
		`increase(http_requests_total{code="200"}[15m])`,
		`topk(2, cpu_usage)`,
		`cpu_usage / on(host, dc) cpu`,
		`sum without (code) (http_requests_total)`,
		`quantile_over_time(0.5, temp_celsius[1h] offset 10m)`,
	}
	promURL := "http://" + addr
	for _, q := range queries {
		v := url.Values{"query": {q}, "time": {at}}
		want := normalizeQueryResult(t, ts.srv.URL, v)
		got := normalizeQueryResult(t, promURL, v)
		if !sameResults(got, want) {
			t.Errorf("%s:\nprometheus %s\n    strata %s", q, got, want)
		}
	}
}

// normalizeQueryResult runs an instant query and returns its result with
// series sorted, as JSON.
func normalizeQueryResult(t *testing.T, base string, v url.Values) string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Status != "success" {
		t.Fatalf("%s %s: %s", base, v.Get("query"), body.Error)
	}
	var rs []string
	for _, r := range body.Data.Result {
		// Timestamps are numbers whose formatting differs between
		// Prometheus versions (1.500 or 1.5): compare them as numbers.
		var x struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r, &x); err != nil {
			t.Fatal(err)
		}
		m, _ := json.Marshal(x.Metric)
		rs = append(rs, fmt.Sprintf("%s@%v=%v", m, x.Value[0], x.Value[1]))
		rs[len(rs)-1] = strings.ReplaceAll(rs[len(rs)-1], " ", "")
	}
	sort.Strings(rs)
	if len(rs) == 0 {
		t.Errorf("%s: empty result from %s", v.Get("query"), base)
	}
	return body.Data.ResultType + " " + strings.Join(rs, " ")
}

// sameResults compares two normalized results: the same series and
// timestamps, and values equal but for the last bits of a float (Prometheus
// 3 sums with Kahan compensation, 2.x does not).
func sameResults(a, b string) bool {
	if a == b {
		return true
	}
	as, bs := strings.Split(a, " "), strings.Split(b, " ")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		ka, va, _ := strings.Cut(as[i], "=")
		kb, vb, _ := strings.Cut(bs[i], "=")
		if ka != kb {
			return false
		}
		var fa, fb float64
		if _, err := fmt.Sscan(va, &fa); err != nil {
			return va == vb
		}
		if _, err := fmt.Sscan(vb, &fb); err != nil {
			return false
		}
		if d := fa - fb; d > 1e-12*max(1, fa, -fa) || -d > 1e-12*max(1, fa, -fa) {
			return false
		}
	}
	return true
}
