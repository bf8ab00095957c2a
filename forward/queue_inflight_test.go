package forward

import (
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// A file that trim drops while the sender holds frames read from it, none
// of them acknowledged, stays until they are: removeDone must not remove
// it when the acknowledged position is before it, or a restart (Close, or
// a kill -9) before the delivery loses those frames without counting them.
func TestTrimKeepsFileOfFramesInFlight(t *testing.T) {
	m := vfs.NewMem()
	// Three frames ("payload N", one digit) a file.
	seg := int64(queueHeaderSize + 2*(frameHeaderSize+9) + 1)
	q, _ := memQueue(t, m, seg, 0, 1<<62, time.Now)
	for seq := uint64(1); seq <= 7; seq++ {
		put(t, q, seq, 2)
	}
	// Frames 1-3 (the first file) are delivered.
	var rb readBuf
	var acked cursor
	for range 3 {
		fr, ok, err := q.next(&rb)
		if err != nil || !ok {
			t.Fatalf("next: %v %v", ok, err)
		}
		acked = cursor{seq: fr.seq, done: fr.samples, count: fr.count + uint64(fr.samples), countOK: fr.hdrOK}
	}
	if err := q.saveCursor(acked); err != nil {
		t.Fatal(err)
	}
	if err := q.removeDone(acked); err != nil {
		t.Fatal(err)
	}
	// The sender reads frame 4 and tries to deliver it (a remote outage)
	// while the backlog bound drops everything unread: frames 5 to 7.
	fr, ok, err := q.next(&rb)
	if err != nil || !ok || fr.seq != 4 {
		t.Fatalf("next: frame %d %v %v", fr.seq, ok, err)
	}
	if n := q.trim(1, 0); n != 6 {
		t.Fatalf("trim dropped %d samples, want 6 (frames 5 to 7)", n)
	}
	if err := q.removeDone(acked); err != nil {
		t.Fatal(err)
	}
	// Closed before frame 4 was delivered: it is still owed.
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	q, rec := memQueue(t, m, seg, 0, 1<<62, time.Now)
	defer q.close()
	q.mu.Lock()
	damaged := q.damaged
	q.mu.Unlock()
	var seqs []uint64
	for {
		fr, ok, err := q.next(&rb)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if fr.seq > acked.seq {
			seqs = append(seqs, fr.seq)
		}
	}
	if len(seqs) == 0 || seqs[0] != 4 {
		t.Fatalf("after the restart the queue holds frames %v past the acknowledged %d, counted lost %d: frame 4, read and never delivered, is gone (log %q)",
			seqs, acked.seq, damaged, rec.take())
	}
}
