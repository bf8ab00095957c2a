package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/stratadb/strata/engine"
)

// rejectedLines is an input of n lines that are all rejected, each on a
// series of its own.
type rejectedLines struct {
	n, i int
	buf  []byte
	// limit records the soft memory limit seen while the ingest reads.
	limit int64
}

func (r *rejectedLines) Read(p []byte) (int, error) {
	r.limit = debug.SetMemoryLimit(-1)
	for len(r.buf) < len(p) && r.i < r.n {
		r.buf = r.appendLine(r.buf, r.i)
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

// appendLine appends line i ("m,host=h<i%1000> v=bad<i> <i>"), allocating
// nothing once buf has room, so that the test counts the ingest's
// allocations only.
func (r *rejectedLines) appendLine(buf []byte, i int) []byte {
	buf = append(buf, "m,host=h"...)
	buf = strconv.AppendInt(buf, int64(i%1000), 10)
	buf = append(buf, " v=bad"...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, int64(i), 10)
	return append(buf, '\n')
}

// decoderAllocs is how many allocations the line-protocol decoder makes
// for one entry of in, on its own: the error value of a syntax error.
func decoderAllocs(in []byte, entries int) float64 {
	return testing.AllocsPerRun(3, func() {
		d := lineprotocol.NewDecoderWithBytes(in)
		for d.Next() {
			if _, err := d.Measurement(); err != nil {
				continue
			}
			for {
				if k, _, err := d.NextTag(); err != nil || k == nil {
					break
				}
			}
			for {
				if k, _, _, err := d.NextFieldBytes(); err != nil || k == nil {
					break
				}
			}
			d.TimeBytes()
		}
	}) / float64(entries)
}

// TestIngestRejectedMemoryBound ingests many lines that are all rejected
// and bounds what that costs by construction: the bytes allocated per line
// (the garbage the collector must keep up with), the heap still in use
// after it (the kept rejections are bounded, not one per line), and a soft
// heap limit in force while the ingest runs, so that the collector runs
// when the heap nears it however busy the machine is. A rejected line
// allocates nothing beyond the decoder's own error value: its reason is
// worded only for the first lines, which the summary lists.
func TestIngestRejectedMemoryBound(t *testing.T) {
	const lines = 200_000
	dir := filepath.Join(t.TempDir(), "db")
	in := &rejectedLines{n: lines}
	var out, errOut bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := ingestMain(context.Background(), []string{"--db", dir}, in, &out, &errOut)
	runtime.ReadMemStats(&after)
	if code != ingestRejected || !strings.Contains(out.String(), fmt.Sprintf("%d lines, 0 points written, %d rejected", lines, lines)) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if strings.Count(out.String(), "\n  line ") != ingestShowRejected {
		t.Errorf("the summary lists more than %d rejections:\n%s", ingestShowRejected, out.String())
	}
	perLine := float64(after.TotalAlloc-before.TotalAlloc) / lines
	if perLine > 1024 {
		t.Errorf("%.0f bytes allocated per rejected line, want at most 1 KiB", perLine)
	}
	var sample []byte
	for i := range 10_000 {
		sample = in.appendLine(sample, i)
	}
	base := decoderAllocs(sample, 10_000)
	if allocs := float64(after.Mallocs-before.Mallocs) / lines; allocs > base+0.1 {
		t.Errorf("%.2f allocations per rejected line; the decoder alone makes %.2f", allocs, base)
	} else {
		t.Logf("%.2f allocations per rejected line (the decoder alone: %.2f)", allocs, base)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Errorf("heap in use grew by %d bytes after %d rejected lines", grown, lines)
	}
	opts := &engine.Options{}
	opts.EnsureDefaults()
	want := opts.MemTableBytes*int64(opts.MaxImmutableMemTables+1) + ingestHeapSlack
	if os.Getenv("GOMEMLIMIT") == "" && in.limit != want {
		t.Errorf("memory limit during the ingest %d, want %d", in.limit, want)
	}
	if l := debug.SetMemoryLimit(-1); l == want {
		t.Errorf("the ingest left its memory limit in place")
	}
	t.Logf("%.0f bytes allocated per rejected line", perLine)
}

// TestIngestFileInterrupted checks that an ingest of a FILE stopped by a
// signal before the end of the file exits 3, not 0, after writing what it
// read; the same interrupt on stdin is the usual end of the input.
func TestIngestFileInterrupted(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "in.lp")
	if err := os.WriteFile(file, []byte("m v=1 1\nm v=2 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := ingestMain(ctx, []string{"--db", filepath.Join(tmp, "db"), file}, nil, &out, &errOut)
	if code != ingestInterrupted || !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("file: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	// Read to its end, the same file exits 0.
	code = ingestMain(context.Background(), []string{"--db", filepath.Join(tmp, "db"), file}, nil, &out, &errOut)
	if code != ingestOK {
		t.Errorf("complete file: exit %d", code)
	}
}

// TestIngestFileSignalProcess runs 'strata ingest FIFO' as a process whose
// file never ends, and sends it SIGTERM once it has read three lines: it
// writes them and exits 3.
func TestIngestFileSignalProcess(t *testing.T) {
	tmp := t.TempDir()
	dir, fifo := filepath.Join(tmp, "db"), filepath.Join(tmp, "in.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "STRATA_TEST_ARGS="+strings.Join([]string{"ingest", "--db", dir, "--linger", "1h", fifo}, "\n"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	pw, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	// As in TestIngestSignalProcess: more than the pipe and the process's
	// buffers hold, so the write returns once the three lines are read.
	in := []byte("m v=1 1\nm v=2 2\nm v=3 3\n")
	for len(in) < 4<<20 {
		in = append(in, "# padding padding padding padding padding padding padding padding\n"...)
	}
	if _, err := pw.Write(in); err != nil {
		t.Fatalf("write: %v\nstderr:\n%s", err, errOut.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ingestInterrupted {
			t.Fatalf("exit: %v, want status %d\nstdout:\n%s\nstderr:\n%s", err, ingestInterrupted, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("strata ingest did not exit on SIGTERM")
	}
	if !strings.Contains(out.String(), "3 points written, 0 rejected") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
}
