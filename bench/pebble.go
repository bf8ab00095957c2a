package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/stratadb/strata/engine"
)

type pebbleStore struct {
	db   *pebble.DB
	wo   *pebble.WriteOptions
	dict *kvDict
}

func openPebble(dir string, cfg Config, dur Durability) (store, error) {
	// The library's defaults: 4 MiB memtable, 8 MiB block cache.
	o := &pebble.Options{Logger: quietLogger{}}
	if cfg == ConfigEqualMemory {
		// The block cache keeps its default of 8 MiB, as LevelDB's does.
		o.MemTableSize = equalMemory
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	s := &pebbleStore{db: db, wo: pebble.NoSync, dict: newKVDict()}
	if dur == Durable {
		s.wo = pebble.Sync
	}
	if err := s.loadDict(); err != nil {
		db.Close()
		return nil, fmt.Errorf("load series dictionary: %w", err)
	}
	return s, nil
}

func (s *pebbleStore) loadDict() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: dictLower, UpperBound: dictUpper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := s.dict.load(it.Key(), it.Value()); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	return it.Close()
}

// quietLogger drops Pebble's informational messages (WAL replay on every
// reopen) and keeps its fatal ones.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

type pebbleBatch struct{ *pebble.Batch }

// put ignores Set's error: it can only come from an indexed batch, and
// NewBatch's are not indexed.
func (b pebbleBatch) put(k, v []byte) { b.Set(k, v, nil) }

// write stores a batch as one pebble.Batch.
func (s *pebbleStore) write(points []engine.Point) error {
	b := s.db.NewBatch()
	err := s.dict.encode(points, pebbleBatch{b})
	if err == nil {
		err = b.Commit(s.wo)
	}
	s.dict.done(err)
	return errors.Join(err, b.Close())
}

type pebbleIter struct{ *pebble.Iterator }

func (it pebbleIter) seek(k []byte) bool { return it.SeekGE(k) }
func (it pebbleIter) next() bool         { return it.Next() }
func (it pebbleIter) key() []byte        { return it.Key() }
func (it pebbleIter) value() []byte      { return it.Value() }

func (s *pebbleStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: dictUpper})
	if err != nil {
		return err
	}
	err = s.dict.query(ctx, pebbleIter{it}, q, rs)
	return errors.Join(err, it.Close())
}

func (s *pebbleStore) close() error { return s.db.Close() }

// compactions returns the compactions Pebble ran, from its Metrics.
func (s *pebbleStore) compactions() (int64, bool) { return s.db.Metrics().Compact.Count, true }
