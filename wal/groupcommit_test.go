package wal

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// TestGroupCommitSharesFsync pins down group commit step by step: while a
// leader is inside its fsync, three more records are written and their
// SyncTo calls queue; when the leader returns, one more fsync covers all
// three.
func TestGroupCommitSharesFsync(t *testing.T) {
	var armed atomic.Bool
	entered := make(chan struct{})
	release := make(chan struct{})
	fs := vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	l := mustOpen(t, t.TempDir(), Options{FS: fs})
	defer mustClose(t, l)
	start := l.SyncCount()

	armed.Store(true)
	posA, err := l.Write(RecordBatch, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	go func() { errs <- l.SyncTo(posA) }()
	<-entered // the leader is inside fsync, its target fixed at posA

	var wg sync.WaitGroup
	for _, p := range []string{"b", "c", "d"} {
		pos, err := l.Write(RecordBatch, []byte(p)) // writes proceed during the fsync
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- l.SyncTo(pos) })
	}
	close(release)
	wg.Wait()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := l.SyncCount() - start; n != 2 {
		t.Errorf("%d fsyncs for 4 records synced by 4 callers, want 2 (the leader's, then one shared)", n)
	}
}

// yieldOnSync models a device where fsync takes time: the caller yields the
// processor before each fsync, so other writers run meanwhile even with
// GOMAXPROCS=1, as they would while a real fsync waits for the disk.
func yieldOnSync(op vfs.Op, _ string) error {
	if op == vfs.OpSync {
		runtime.Gosched()
	}
	return nil
}

// groupCommit runs n goroutines that each Append m small records under
// SyncAlways and returns the fsyncs they caused.
func groupCommit(tb testing.TB, fs vfs.FS, n, m int) int64 {
	l, err := Open(tb.TempDir(), Options{FS: fs})
	if err != nil {
		tb.Fatal(err)
	}
	start := l.SyncCount()
	var wg sync.WaitGroup
	payload := make([]byte, 64)
	for range n {
		wg.Go(func() {
			for range m {
				if _, err := l.Append(RecordBatch, payload); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	fsyncs := l.SyncCount() - start
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return fsyncs
}

func TestGroupCommitRatio(t *testing.T) {
	fs := vfs.Inject(vfs.Default, yieldOnSync)
	const m = 40
	for _, n := range []int{1, 2, 4, 8, 16} {
		fsyncs := groupCommit(t, fs, n, m)
		writes := int64(n * m)
		t.Logf("writers=%2d writes=%4d fsyncs=%4d fsyncs/write=%.3f", n, writes, fsyncs, float64(fsyncs)/float64(writes))
		if fsyncs > writes {
			t.Errorf("writers=%d: %d fsyncs for %d writes", n, fsyncs, writes)
		}
		if n >= 4 && fsyncs >= writes {
			t.Errorf("writers=%d: %d fsyncs for %d writes: no fsync was shared", n, fsyncs, writes)
		}
	}
}

// BenchmarkGroupCommit measures Append under SyncAlways with n concurrent
// writers on the real filesystem. One iteration is one round in which each
// writer appends one 64-byte record.
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("writers=%d", n), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			payload := make([]byte, 64)
			work := make(chan struct{})
			var round, workers sync.WaitGroup
			for range n {
				workers.Go(func() {
					for range work {
						if _, err := l.Append(RecordBatch, payload); err != nil {
							b.Error(err)
						}
						round.Done()
					}
				})
			}
			b.ReportAllocs()
			start := l.SyncCount()
			for b.Loop() {
				round.Add(n)
				for range n {
					work <- struct{}{}
				}
				round.Wait()
			}
			fsyncs := l.SyncCount() - start
			close(work)
			workers.Wait()
			writes := float64(b.N * n)
			b.ReportMetric(float64(fsyncs)/writes, "fsyncs/write")
			b.ReportMetric(writes/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
