package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeForwardQueueUnopenable starts strata serve with a forward queue
// directory that cannot be created (its parent is a regular file, as a
// full or broken disk would refuse it). The gateway must start and store
// writes anyway; once the directory can be created, the forwarder opens by
// itself and forwards what is written from then on.
func TestServeForwardQueueUnopenable(t *testing.T) {
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer remote.Close()

	tmp := t.TempDir()
	blocker := filepath.Join(tmp, "blocker")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- serveMain(ctx, []string{"--db", filepath.Join(tmp, "db"), "--listen", "127.0.0.1:0",
			"--sync", "never", "--forward-url", remote.URL + "/api/v1/write",
			"--forward-dir", filepath.Join(blocker, "queue"), "--forward-linger", "10ms",
			"--forward-min-backoff", "10ms", "--forward-max-backoff", "50ms"}, pw)
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	}()
	addr := make(chan string, 1)
	opened := make(chan struct{})
	refused := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		var sawOpen, sawRefused bool
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "strata serve: listening on "); ok {
				addr <- a
			}
			if !sawRefused && strings.Contains(line, "forwarding is off until its queue opens") {
				sawRefused = true
				close(refused)
			}
			if !sawOpen && strings.Contains(line, "forwarding queue opened") {
				sawOpen = true
				close(opened)
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case code := <-done:
		done <- code
		t.Fatalf("serve exited %d instead of starting without its forward queue", code)
	case <-time.After(time.Minute):
		t.Fatal("serve did not start listening")
	}
	select {
	case <-refused:
	case <-time.After(time.Minute):
		t.Fatal("serve did not log that forwarding is off")
	}

	write := func(from, n int) {
		t.Helper()
		var body strings.Builder
		for i := from; i < from+n; i++ {
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
	}
	write(0, 50) // stored, not forwarded: the queue is not open

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "strata_forward_samples_sent_total 0") {
		t.Fatalf("metrics before the queue opens:\n%s", grepLines(string(b), "strata_forward_"))
	}

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	select {
	case <-opened:
	case <-time.After(time.Minute):
		t.Fatal("the forwarder did not open its queue once it could")
	}
	write(50, 100)

	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "strata_forward_samples_sent_total 100\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forwarder did not report 100 samples sent; metrics:\n%s", grepLines(string(b), "strata_forward_"))
		}
		time.Sleep(10 * time.Millisecond) // polling an observable condition, bounded by the deadline
	}
}
