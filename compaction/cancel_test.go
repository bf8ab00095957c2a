package compaction

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// TestMergeCancelWithinSeries cancels a merge of one long series (two
// interleaved inputs, so every block is decoded) partway through, and
// checks that Merge reads no block after the cancel, returns the context's
// error and leaves no output file.
func TestMergeCancelWithinSeries(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	const n = 20000 // per input: 2,500 blocks of 8
	even, odd := make([]int64, n), make([]int64, n)
	for i := range n {
		even[i], odd[i] = int64(2*i), int64(2*i+1)
	}
	a := writeSeg(t, fs, filepath.Join(dir, "a.seg"), 8, []tseries{{key: "long", kind: point.KindFloat, samples: floats(0, even...)}})
	b := writeSeg(t, fs, filepath.Join(dir, "b.seg"), 8, []tseries{{key: "long", kind: point.KindFloat, samples: floats(0, odd...)}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const cancelAt = 100
	blocks, atCancel := 0, 0
	o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 8}
	opts := o.mergeOpts()
	opts.onBlockRead = func() {
		blocks++
		if blocks == cancelAt {
			atCancel = blocks
			cancel()
		}
	}
	metas, _, err := Merge(ctx, []Input{{Reader: a}, {Reader: b}}, opts)
	if !errors.Is(err, context.Canceled) || metas != nil {
		t.Fatalf("Merge = %v, %v; want context.Canceled", metas, err)
	}
	if atCancel == 0 {
		t.Fatalf("only %d blocks read: the merge ended before the cancel", blocks)
	}
	if late := blocks - atCancel; late != 0 {
		t.Errorf("%d blocks read after the cancel, want 0", late)
	}
	if names := listDir(t, o.dir); len(names) != 0 {
		t.Errorf("files left after cancel: %v", names)
	}
}
