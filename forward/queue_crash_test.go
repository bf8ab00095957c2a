package forward

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// The queue under the fault injection and crash simulation the WAL's tests
// use (vfs.Inject with OnIndex, MemFS.CrashClone and CrashCloneRandom).

// queueWorkload queues frames 1..n of seq%3+1 samples on q (syncing every
// fourth), and returns the seqs published and the samples the queue said
// it lost, and the seqs published before the last successful sync.
func queueWorkload(q *queue, n int) (published []uint64, lost int64, synced []uint64) {
	for s := uint64(1); s <= uint64(n); s++ {
		samples := int(s%3 + 1)
		q.prepare(s, samples, 1, fmt.Appendf(nil, "payload %d", s))
		pub, l := q.commit(s, true)
		lost += l
		if pub > 0 {
			published = append(published, s)
		}
		if s%4 == 0 && q.sync() == nil {
			synced = slices.Clone(published)
		}
	}
	return published, lost, synced
}

func seqSamples(seqs []uint64) int64 {
	var n int64
	for _, s := range seqs {
		n += int64(s%3 + 1)
	}
	return n
}

// An injected error at every filesystem operation in turn, while the
// queue opens, queues, rolls files and closes: it never fails to open for
// anything but its directory, never delivers a frame it did not publish,
// and every sample is delivered after a reopen or counted as lost, at
// queueing or at the reopen.
func TestQueueErrorAtEveryOp(t *testing.T) {
	const frames = 12
	for i := int64(0); ; i++ {
		m := vfs.NewMem()
		inj := &vfs.OnIndex{N: i}
		fs := vfs.Inject(m, inj.Injector())
		q, _, err := openQueueConfig(queueConfig{fs: fs, dir: memDir, segBytes: 200, recovered: 1 << 62,
			logger: quiet(), now: time.Now})
		if err != nil {
			if !strings.Contains(err.Error(), "queue dir") {
				t.Fatalf("error at op %d: open failed: %v", i, err)
			}
			continue
		}
		published, lost, _ := queueWorkload(q, frames)
		q.close()
		q2, rec := memQueue(t, m, 200, 0, 1<<62, time.Now)
		got := drain(t, q2)
		q2.mu.Lock()
		damaged := q2.damaged
		q2.mu.Unlock()
		q2.close()
		for _, s := range got {
			if !slices.Contains(published, s) {
				t.Fatalf("error at op %d: read frame %d, never published (published %v)", i, s, published)
			}
		}
		total := seqSamples(seqsUpTo(frames))
		if read := seqSamples(got); read+lost+damaged != total {
			t.Fatalf("error at op %d: read %d + lost queueing %d + counted at reopen %d != %d; read %v published %v; log %q",
				i, read, lost, damaged, total, got, published, rec.take())
		}
		if inj.Count() <= i {
			if i < 30 {
				t.Fatalf("the workload ran clean at op %d: the injector never fired", i)
			}
			return
		}
	}
}

func seqsUpTo(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

// A power loss (only synced bytes survive, or synced bytes and a random
// part of the rest): every frame published before the last sync is read
// back, nothing is read that was not published, and what is counted lost
// is never more than what was lost (a crash makes the count a lower
// bound).
func TestQueueCrash(t *testing.T) {
	r := rand.New(rand.NewPCG(904, 7))
	for round := range 60 {
		m := vfs.NewMem()
		q, _ := memQueue(t, m, 200, 0, 1<<62, time.Now)
		n := 5 + r.IntN(20)
		published, _, synced := queueWorkload(q, n)
		crashed := m.CrashClone()
		if round%2 == 1 {
			crashed = m.CrashCloneRandom(r)
		}
		q.close()
		q2, rec := memQueue(t, crashed, 200, 0, 1<<62, time.Now)
		got := drain(t, q2)
		q2.mu.Lock()
		damaged := q2.damaged
		q2.mu.Unlock()
		q2.close()
		for _, s := range synced {
			if !slices.Contains(got, s) {
				t.Fatalf("round %d: frame %d, synced before the crash, is lost; read %v; log %q", round, s, got, rec.take())
			}
		}
		for _, s := range got {
			if !slices.Contains(published, s) {
				t.Fatalf("round %d: read frame %d, never published", round, s)
			}
		}
		if truth := seqSamples(published) - seqSamples(got); damaged > truth {
			t.Fatalf("round %d: counted %d lost, %d were; log %q", round, damaged, truth, rec.take())
		}
	}
}
