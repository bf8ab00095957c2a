package forward

import (
	"bytes"
	"os"
	"testing"
)

// A fault writing the mapping (here the file cut under it, as an I/O
// error would; the frame is small enough to be copied into the mapping)
// loses that frame, counted, not the process: the queue goes
// on in a new file, appended to with write(2).
func TestQueueMappedFault(t *testing.T) {
	dir := t.TempDir()
	q, rec := openRecorded(t, dir, 1<<20, 1<<62)
	defer q.close()
	put(t, q, 1, 1)
	path := lastQueueFile(t, dir)
	if err := os.Truncate(path, fileOf(1)); err != nil {
		t.Fatal(err)
	}
	if err := q.prepare(2, 7, 1, bytes.Repeat([]byte("z"), 8<<10)); err == nil {
		t.Fatal("no error writing past the end of a cut mapped file")
	}
	if pub, lost := q.commit(2, true); pub != 0 || lost != 7 {
		t.Fatalf("faulted frame: published %d lost %d, want 0 and 7", pub, lost)
	}
	if len(rec.take()) == 0 {
		t.Error("the fault was not logged")
	}
	put(t, q, 3, 1)
	if lastQueueFile(t, dir) == path {
		t.Error("still appending to the faulted file")
	}
	if q.amap != nil {
		t.Error("still mapping queue files after a fault")
	}
	equalSeqs(t, drain(t, q), 1, 3)
}
