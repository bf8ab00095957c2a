package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stratadb/strata/engine"
)

// Key layout shared by the LevelDB and Pebble adapters. Every key is 16
// bytes:
//
//	data:       | series id (8, big-endian, >= 1) | time (8, big-endian, sign bit flipped) |
//	dictionary: | 0 (8)                           | series id (8, big-endian)              |
//
// Flipping the time's sign bit makes negative times sort before positive
// ones. A data value is the float's IEEE 754 bits (8, big-endian); a
// dictionary value is the series' canonical key, written once, in the same
// batch as the series' first sample. Series ids are assigned densely from 1
// in the order series are first written.

func dataKey(dst []byte, id uint64, t int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, id)
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

func dictKey(dst []byte, id uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, 0)
	return binary.BigEndian.AppendUint64(dst, id)
}

// dictLower and dictUpper bound the dictionary keys.
var (
	dictLower = dictKey(nil, 0)
	dictUpper = dataKey(nil, 1, math.MinInt64)
)

func decodeDataKey(k []byte) (id uint64, t int64, ok bool) {
	if len(k) != 16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k), int64(binary.BigEndian.Uint64(k[8:]) ^ (1 << 63)), true
}

// kvDict is the series dictionary of a key-value store: the series index
// (ids from 1, found without building keys), persisted under the
// dictionary prefix. One goroutine writes (load, encode, done) while others
// query; the index locks itself.
type kvDict struct {
	idx  seriesIndex
	base int // series before the batch being built
	key  []byte
	val  [8]byte
}

func newKVDict() *kvDict { return &kvDict{} }

// load adds a persisted dictionary entry.
func (d *kvDict) load(k, v []byte) error {
	if len(k) != 16 {
		return fmt.Errorf("bad dictionary key %x", k)
	}
	return d.idx.addKey(binary.BigEndian.Uint64(k[8:]), string(v))
}

// kvBatch receives the puts of one write.
type kvBatch interface{ put(k, v []byte) }

// encode adds the puts for points to b: a dictionary entry for each new
// series and one data entry per field. New series stay pending until
// commit or rollback.
func (d *kvDict) encode(points []engine.Point, b kvBatch) error {
	d.base = d.idx.count()
	for i := range points {
		p := &points[i]
		set := d.idx.set(p)
		for f := range p.Fields {
			v, err := floatValue(p, f)
			if err != nil {
				return err
			}
			id, added := d.idx.field(set, p, f)
			if added {
				d.key = dictKey(d.key[:0], id)
				b.put(d.key, []byte(d.idx.series[id-1].key))
			}
			d.key = dataKey(d.key[:0], id, p.Time)
			binary.BigEndian.PutUint64(d.val[:], math.Float64bits(v))
			b.put(d.key, d.val[:])
		}
	}
	return nil
}

// done settles the pending series after a batch was written (err == nil)
// or failed (they are forgotten).
func (d *kvDict) done(err error) {
	if err != nil {
		d.idx.truncate(d.base)
	}
	d.base = d.idx.count()
}

// kvIter is the part of the stores' iterators the queries use.
type kvIter interface {
	seek(k []byte) bool
	next() bool
	key() []byte
	value() []byte
}

// query answers q by seeking to each selected series' start and iterating
// to its end; means are computed in Go.
func (d *kvDict) query(ctx context.Context, it kvIter, q engine.Query, rs *resultSet) error {
	ans, err := newAnswer(&q, rs)
	if err != nil {
		return err
	}
	var key []byte
	for n, s := range d.idx.selectSeries(&q.Selector, nil) {
		if n%128 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		ans.series(s.key)
		key = dataKey(key[:0], s.id, q.Start)
		for ok := it.seek(key); ok; ok = it.next() {
			sid, t, valid := decodeDataKey(it.key())
			if !valid || sid != s.id || t >= q.End {
				break
			}
			val := it.value()
			if len(val) != 8 {
				return fmt.Errorf("series %d at %d: value of %d bytes", sid, t, len(val))
			}
			ans.add(t, math.Float64frombits(binary.BigEndian.Uint64(val)))
		}
	}
	ans.flush()
	return nil
}
