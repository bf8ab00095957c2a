package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

func TestServeUsage(t *testing.T) {
	if _, ok := commands["serve"]; !ok {
		t.Fatal("serve is not registered")
	}
	tmp := t.TempDir()
	run := func(want int, stderr string, args ...string) {
		t.Helper()
		var errOut bytes.Buffer
		got := serveMain(context.Background(), args, &errOut)
		if got != want || !strings.Contains(errOut.String(), stderr) {
			t.Errorf("serve %q: exit %d, stderr:\n%s\nwant exit %d and %q", args, got, errOut.String(), want, stderr)
		}
	}
	// --help documents every flag.
	var help bytes.Buffer
	if got := serveMain(context.Background(), []string{"--help"}, &help); got != 0 {
		t.Errorf("--help: exit %d", got)
	}
	for _, flag := range []string{"-db", "-listen", "-token", "-token-file", "-max-body-bytes", "-sync", "-sync-interval",
		"-memtable-bytes", "-retention", "-read-header-timeout", "-read-timeout", "-write-timeout", "-idle-timeout",
		"-query-timeout", "-shutdown-timeout", "-max-disk", "10GiB", "-max-series", "-max-series-per-measurement", "127.0.0.1:8086", "/api/v2/write", "/api/v1/write", "/api/v1/query"} {
		if !strings.Contains(help.String(), flag) {
			t.Errorf("--help does not mention %s", flag)
		}
	}
	run(2, "--db is required")
	run(2, `unexpected argument "x"`, "--db", filepath.Join(tmp, "db"), "x")
	run(2, `--sync must be always, interval or never, not "x"`, "--db", filepath.Join(tmp, "db"), "--sync", "x")
	run(2, "--max-body-bytes must be positive", "--db", filepath.Join(tmp, "db"), "--max-body-bytes", "0")
	run(2, `--max-disk "10 apples"`, "--db", filepath.Join(tmp, "db"), "--max-disk", "10 apples")
	run(2, `--max-disk "0"`, "--db", filepath.Join(tmp, "db"), "--max-disk", "0")
	run(2, "must not be negative", "--db", filepath.Join(tmp, "db"), "--max-series", "-1")
	run(2, "exclusive", "--db", filepath.Join(tmp, "db"), "--token", "a", "--token-file", "b")
	empty := filepath.Join(tmp, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	// A token file or an address that cannot be used is a failure (1), not
	// a usage error: the command line itself is well formed.
	run(1, "is empty", "--db", filepath.Join(tmp, "db"), "--token-file", empty)
	run(1, "no such file", "--db", filepath.Join(tmp, "db"), "--token-file", filepath.Join(tmp, "missing"))
	run(1, "listen", "--db", filepath.Join(tmp, "db"), "--listen", "256.0.0.1:bad")
	if _, err := os.Stat(filepath.Join(tmp, "db", "x")); err == nil {
		t.Error("unexpected file")
	}
}

// TestServeChild is the serve command run by TestServeSignals in a child
// process; it does nothing in a normal test run.
func TestServeChild(t *testing.T) {
	args := os.Getenv("STRATA_SERVE_CHILD_ARGS")
	if args == "" {
		return
	}
	os.Exit(serveMain(serveSignals(), strings.Split(args, "\x1f"), os.Stderr))
}

// TestServeSignals runs strata serve in a child process, writes through it,
// and checks that SIGTERM and SIGINT let a request in flight finish, close
// the database (its lock is free and every write is there) and exit 0.
func TestServeSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "STRATA_SERVE_CHILD_ARGS="+strings.Join(
				[]string{"--db", dir, "--listen", "127.0.0.1:0", "--token", "tok", "--sync", "always"}, "\x1f"))
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				done <- cmd.Wait()
			}()
			t.Cleanup(func() { cmd.Process.Kill() })
			waitLine := func(prefix string) string {
				t.Helper()
				timeout := time.After(30 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("child exited before %q", prefix)
						}
						if rest, ok := strings.CutPrefix(l, prefix); ok {
							return rest
						}
					case <-timeout:
						t.Fatalf("no %q from the child", prefix)
					}
				}
			}
			addr := waitLine("strata serve: listening on ")
			url := "http://" + addr

			// Each request on a connection of its own: the server closes
			// idle keep-alive connections at shutdown, and one that is
			// about to carry a request looks idle to it.
			// With Expect: 100-continue the body is sent only once the
			// handler reads it, so a body write that returned proves the
			// request is being served (not waiting in the accept queue).
			post := func(body io.Reader) (*http.Response, error) {
				req, _ := http.NewRequest("POST", url+"/api/v2/write?precision=s", body)
				req.Header.Set("Authorization", "Token tok")
				req.Header.Set("Expect", "100-continue")
				tr := &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: time.Minute}
				defer tr.CloseIdleConnections()
				return (&http.Client{Transport: tr}).Do(req)
			}
			resp, err := post(strings.NewReader("m v=1 1\nm v=2 2\n"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("write: %d", resp.StatusCode)
			}

			// A request in flight: its body arrives after the signal.
			pr, pw := io.Pipe()
			respc := make(chan *http.Response, 1)
			errc := make(chan error, 1)
			go func() {
				resp, err := post(pr)
				if err != nil {
					errc <- err
					return
				}
				respc <- resp
			}()
			if _, err := pw.Write([]byte("m v=3 3\n")); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waitLine("strata serve: stopped accepting connections")
			// New connections are refused once shutdown has begun.
			if resp, err := post(strings.NewReader("m v=9 9\n")); err == nil {
				resp.Body.Close()
				t.Errorf("a new request after the signal got %d", resp.StatusCode)
			}
			pw.Write([]byte("m v=4 4\n"))
			pw.Close()
			select {
			case resp := <-respc:
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("in-flight write: %d", resp.StatusCode)
				}
			case err := <-errc:
				t.Fatalf("in-flight write: %v", err)
			}
			waitLine("strata serve: database closed")
			for range lines {
			}
			if err := <-done; err != nil {
				t.Fatalf("child: %v", err)
			}

			db, err := engine.Open(dir, nil) // fails if the lock were still held
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{
				Measurement: "m", Start: math.MinInt64, End: math.MaxInt64}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range res {
				for _, smp := range s.Samples {
					got = append(got, fmt.Sprintf("%d=%v", smp.Time/1e9, smp.Value))
				}
			}
			if want := "1=1 2=2 3=3 4=4"; strings.Join(got, " ") != want {
				t.Errorf("stored %q, want %q", strings.Join(got, " "), want)
			}
		})
	}
}
