package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeForward runs strata serve with --forward-url pointing at a
// loopback remote, writes through the InfluxDB endpoint and checks that the
// remote receives remote-write requests and that /metrics reports what the
// forwarder sent.
func TestServeForward(t *testing.T) {
	var requests atomic.Int64
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Encoding") != "snappy" || r.URL.Path != "/api/v1/write" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer remote.Close()

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- serveMain(ctx, []string{"--db", filepath.Join(t.TempDir(), "db"), "--listen", "127.0.0.1:0",
			"--sync", "never", "--forward-url", remote.URL + "/api/v1/write", "--forward-protocol", "prometheus",
			"--forward-linger", "10ms"}, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "strata serve: listening on "); ok {
				addr <- a
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("serve did not start listening")
	}

	var body strings.Builder
	for i := range 100 {
		fmt.Fprintf(&body, "sensor,device_id=dev-%d temperature=%d.5 %d\n", i, i, 1_700_000_000_000_000_000+int64(i))
	}
	resp, err := http.Post(base+"/api/v2/write?bucket=b&org=o", "text/plain", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write: %s", resp.Status)
	}

	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "strata_forward_samples_sent_total 100") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forwarder did not report 100 samples sent; remote got %d requests; metrics:\n%s", requests.Load(), grepLines(string(b), "strata_forward_"))
		}
		time.Sleep(10 * time.Millisecond) // polling an observable condition, bounded by the deadline
	}
	if requests.Load() == 0 {
		t.Fatal("the remote received no request")
	}
	// The operator page's status endpoint shows the forwarder.
	resp, err = http.Get(base + "/api/v1/status/strata")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Data struct {
			Forward *struct {
				Protocol    string `json:"protocol"`
				SamplesSent int64  `json:"samplesSent"`
			} `json:"forward"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if f := st.Data.Forward; f == nil || f.Protocol != "prometheus" || f.SamplesSent != 100 {
		t.Fatalf("status forward = %+v, want protocol prometheus and 100 samples sent", f)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
