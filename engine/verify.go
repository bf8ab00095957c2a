package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/stratadb/strata/segment"
)

// VerifyReport counts what Verify read.
type VerifyReport struct {
	Segments int
	Series   int64 // series entries across segments
	Blocks   int64
	Samples  int64 // samples in segment blocks
	Bytes    int64 // segment bytes
	// MemTableSamples counts the samples held in memtables: replayed from
	// the WAL at Open (all that a read-only DB holds beyond its segments)
	// or written since, not yet flushed.
	MemTableSamples int64
}

// Verify reads every block of every live segment, checking checksums and
// decoding every sample, and checks that each segment series is in the
// catalog with the same kind. It returns the first problem found (damaged
// bytes match ErrCorrupt and name the file and offset) with what it read
// until then. Writes and queries may run meanwhile; Verify reads a
// snapshot.
func (db *DB) Verify(ctx context.Context) (VerifyReport, error) {
	var rep VerifyReport
	if err := db.checkOpen(); err != nil {
		return rep, err
	}
	snap, err := db.acquireSnapshot()
	if err != nil {
		return rep, err
	}
	defer db.releaseSnapshot(snap)
	for _, m := range snap.imm {
		rep.MemTableSamples += int64(m.t.Len())
	}
	rep.MemTableSamples += int64(snap.mem.t.Len())
	var buf []Sample
	for _, level := range snap.v.Levels {
		for _, h := range level {
			rep.Segments++
			rep.Bytes += h.Meta.Size
			// Streamed: Verify loads no index it did not find loaded.
			it, err := h.Reader.Entries()
			if err != nil {
				return rep, err
			}
			defer it.Close()
			var s segment.SeriesIndex
			for i := 0; ; i++ {
				if i%checkContextEvery == 0 && ctx.Err() != nil {
					return rep, ctx.Err()
				}
				ok, err := it.Next(&s)
				if err != nil {
					return rep, err
				}
				if !ok {
					break
				}
				rep.Series++
				id, ok := db.cat.Lookup(string(s.Key))
				var kind Kind
				if m, known := db.cat.Meta(id); ok && known {
					kind = m.Kind
				}
				name := filepath.Base(h.Meta.Path)
				if !ok {
					return rep, fmt.Errorf("%w: segment %s holds series %q that the catalog lacks", ErrCorrupt, name, s.Key)
				}
				if kind != s.Kind {
					return rep, fmt.Errorf("%w: segment %s stores series %q as %s, the catalog says %s", ErrCorrupt, name, s.Key, s.Kind, kind)
				}
				for b := range s.Blocks {
					buf, err = db.decodeBlock(ctx, h.Reader, &s, b, buf[:0])
					if err != nil {
						return rep, err
					}
					rep.Blocks++
					rep.Samples += int64(len(buf))
				}
				for b := range s.Rollups {
					if err := h.Reader.CheckRollupHours(&s, b); err != nil {
						return rep, err
					}
					rep.Blocks++
				}
			}
		}
	}
	return rep, nil
}
