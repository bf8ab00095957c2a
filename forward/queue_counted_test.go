package forward

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// The counted file round-trips, and damage to any byte is refused.
func TestCountedRoundTrip(t *testing.T) {
	spans := []span{{1, 5}, {9, 12}, {1 << 40, 1<<40 + 7}}
	b := marshalCounted(spans)
	got, err := unmarshalCounted(b)
	if err != nil || len(got) != len(spans) {
		t.Fatalf("%v %v", got, err)
	}
	for i := range spans {
		if got[i] != spans[i] {
			t.Fatalf("span %d: %v, want %v", i, got[i], spans[i])
		}
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 1
		if _, err := unmarshalCounted(bad); !errors.Is(err, errQueueCorrupt) {
			t.Errorf("flip byte %d: %v", i, err)
		}
	}
}

// addSpan merges what touches; uncounted subtracts what is covered.
func TestSpans(t *testing.T) {
	var s []span
	s = addSpan(s, 10, 20)
	s = addSpan(s, 30, 40)
	s = addSpan(s, 20, 25) // touches the first
	s = addSpan(s, 5, 6)
	if want := []span{{5, 6}, {10, 25}, {30, 40}}; len(s) != 3 || s[0] != want[0] || s[1] != want[1] || s[2] != want[2] {
		t.Fatalf("spans %v, want %v", s, want)
	}
	if n := uncounted(s, 0, 50); n != 50-1-15-10 {
		t.Fatalf("uncounted %d", n)
	}
	if n := uncounted(s, 12, 24); n != 0 {
		t.Fatalf("uncounted inside a span: %d", n)
	}
	s = addSpan(s, 0, 100)
	if len(s) != 1 || s[0] != (span{0, 100}) {
		t.Fatalf("spans %v", s)
	}
	if p := pruneSpans([]span{{1, 2}, {3, 9}, {10, 12}}, 9); len(p) != 1 || p[0] != (span{10, 12}) {
		t.Fatalf("pruned %v", p)
	}
	var many []span
	for i := range uint64(countedMax + 5) {
		many = addSpan(many, 3*i, 3*i+1)
	}
	if len(many) != countedMax || many[0].lo != 0 {
		t.Fatalf("%d spans from %d, want %d from 0", len(many), many[0].lo, countedMax)
	}
}

func FuzzCounted(f *testing.F) {
	f.Add(marshalCounted(nil))
	f.Add(marshalCounted([]span{{1, 5}, {9, 12}}))
	f.Add([]byte("SFWL\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, err := unmarshalCounted(b)
		if err != nil {
			return
		}
		if !bytes.Equal(marshalCounted(spans), b) {
			t.Fatalf("counted %x does not round-trip", b)
		}
	})
}

// Normal operation counts no loss, however often the queue restarts:
// frames delivered and acknowledged a few at a time, files removed once
// delivered, the backlog bounds dropping files, a restart (clean or a
// kill -9) between any two steps, version 1 files of an earlier release
// in front.
func TestQueueNoFalseLoss(t *testing.T) {
	for _, crash := range []bool{false, true} {
		m := vfs.NewMem()
		if err := m.MkdirAll(memDir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, _ := m.Create(path.Join(memDir, queueFileName(1)))
		v1 := appendQueueHeaderV1(nil, 1)
		for s := uint64(1); s <= 3; s++ {
			v1 = appendFrameV1(v1, s, 0, 2, 1, fmt.Appendf(nil, "payload %d", s))
		}
		f.Write(v1)
		f.Close()
		next := uint64(4)
		var acked cursor
		for round := range 12 {
			q, rec := memQueue(t, m, 200, 0, 1<<62, time.Now)
			q.mu.Lock()
			damaged := q.damaged
			q.mu.Unlock()
			if damaged != 0 {
				t.Fatalf("crash %v round %d: counted %d lost; log %q", crash, round, damaged, rec.take())
			}
			for range 5 {
				put(t, q, next, int(next%3+1))
				next++
			}
			var rb readBuf
			for k := 0; k < 4; k++ {
				fr, ok, err := q.next(&rb)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if fr.seq < acked.seq {
					k--
					continue // delivered before the restart
				}
				acked = cursor{seq: fr.seq, done: fr.samples, count: fr.count + uint64(fr.samples), countOK: fr.hdrOK}
			}
			if err := q.saveCursor(acked); err != nil {
				t.Fatal(err)
			}
			if err := q.removeDone(acked); err != nil {
				t.Fatal(err)
			}
			if round%4 == 3 {
				q.trim(1, 0) // the byte bound: drop all unread
				q.removeDone(acked)
			}
			if crash {
				m = m.Clone() // a kill -9: no close
				q.close()
				continue
			}
			if err := q.close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
