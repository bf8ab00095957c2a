package bench

import (
	"context"
	"fmt"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/iterator"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"

	"github.com/stratadb/strata/engine"
)

type leveldbStore struct {
	db    *leveldb.DB
	wo    *opt.WriteOptions
	batch leveldb.Batch
	dict  *kvDict
}

func openLevelDB(dir string, cfg Config, dur Durability) (store, error) {
	var o *opt.Options // the library's defaults: 4 MiB write buffer, 8 MiB block cache
	if cfg == ConfigEqualMemory {
		// The block cache keeps its default of 8 MiB, as Pebble's does.
		o = &opt.Options{WriteBuffer: equalMemory, BlockCacheCapacity: opt.DefaultBlockCacheCapacity}
	}
	db, err := leveldb.OpenFile(dir, o)
	if err != nil {
		return nil, err
	}
	s := &leveldbStore{db: db, wo: &opt.WriteOptions{Sync: dur == Durable}, dict: newKVDict()}
	it := db.NewIterator(&util.Range{Start: dictLower, Limit: dictUpper}, nil)
	for it.Next() {
		if err = s.dict.load(it.Key(), it.Value()); err != nil {
			break
		}
	}
	it.Release()
	if err == nil {
		err = it.Error()
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("load series dictionary: %w", err)
	}
	return s, nil
}

type leveldbBatch struct{ *leveldb.Batch }

func (b leveldbBatch) put(k, v []byte) { b.Put(k, v) }

// write stores a batch as one leveldb.Batch.
func (s *leveldbStore) write(points []engine.Point) error {
	s.batch.Reset()
	err := s.dict.encode(points, leveldbBatch{&s.batch})
	if err == nil {
		err = s.db.Write(&s.batch, s.wo)
	}
	s.dict.done(err)
	return err
}

type leveldbIter struct{ iterator.Iterator }

func (it leveldbIter) seek(k []byte) bool { return it.Seek(k) }
func (it leveldbIter) next() bool         { return it.Next() }
func (it leveldbIter) key() []byte        { return it.Key() }
func (it leveldbIter) value() []byte      { return it.Value() }

func (s *leveldbStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	it := s.db.NewIterator(&util.Range{Start: dictUpper}, nil)
	err := s.dict.query(ctx, leveldbIter{it}, q, rs)
	it.Release()
	if err != nil {
		return err
	}
	return it.Error()
}

func (s *leveldbStore) close() error { return s.db.Close() }
