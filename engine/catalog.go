package engine

// The series catalog file (SERIES) makes series ids and kinds durable beyond
// the WAL files that first logged them. It is append-only; every flush
// appends the series created since the previous one before the manifest
// that drops those WAL files is written.
//
//	file   := header record*
//	header := magic "SSER" (4) | version (1)
//	record := length uint32 LE (4) | crc32c(payload) uint32 LE (4) | payload (length)
//	payload:= count uvarint | entry{count}
//	entry  := id uvarint | kind (1) | keylen uvarint | key (keylen)
//
// Ids are dense: the first entry of the file is id 0 and every entry is one
// past the previous. A damaged record at the end of the file is the torn
// tail of an interrupted append (the WAL still holds those series) and is
// cut off; damage before a valid record is corruption.
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"sync"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

const (
	catalogMagic      = "SSER"
	catalogVersion    = 1
	catalogHeaderSize = 5
	catalogMaxRecord  = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seriesMeta describes one series. It never changes once created.
type seriesMeta struct {
	key   string // canonical series key
	kind  Kind
	set   *tagSet
	field string
}

// tagSet is a measurement with a sorted tag set: the identity that the
// fields of a point share. Points are resolved to a tagSet by hashing their
// parts, so the hot write path builds no key strings for known series.
type tagSet struct {
	hash        uint64
	measurement string
	tags        []Tag // sorted by key
	fields      []fieldID
	next        *tagSet // hash collision chain
}

type fieldID struct {
	name string
	id   uint64
}

// catalog maps series to dense ids and indexes them by measurement and tag.
// The single writer (holding DB.commitMu) reads without mu and takes mu to
// add series; queries take mu.RLock.
type catalog struct {
	mu     sync.RWMutex
	series []seriesMeta // by id
	byKey  map[string]uint64
	sets   map[uint64]*tagSet
	idx    index    // by measurement and tag (index.go)
	order  keyOrder // ids ranked by key (index.go)
}

func newCatalog() *catalog {
	return &catalog{
		byKey: make(map[string]uint64),
		sets:  make(map[uint64]*tagSet),
		idx:   newIndex(),
	}
}

// tagSetSeed seeds the in-memory tag-set hash. Hashes are never stored, so
// a per-process seed is fine; every hit is confirmed by comparing the parts.
var tagSetSeed = maphash.MakeSeed()

// hashTagSet hashes (measurement, sorted tags). Each part is hashed on its
// own and folded in order, so part boundaries are part of the hash.
func hashTagSet(measurement string, tags []Tag) uint64 {
	h := maphash.String(tagSetSeed, measurement)
	for _, t := range tags {
		h = (h^maphash.String(tagSetSeed, t.Key))*0x9E3779B97F4A7C15 + 1
		h = (h^maphash.String(tagSetSeed, t.Value))*0x9E3779B97F4A7C15 + 2
	}
	return h
}

func tagsEqual(a, b []Tag) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// findSet returns the tagSet for (measurement, sorted tags) or nil.
func (c *catalog) findSet(h uint64, measurement string, tags []Tag) *tagSet {
	for s := c.sets[h]; s != nil; s = s.next {
		if s.measurement == measurement && tagsEqual(s.tags, tags) {
			return s
		}
	}
	return nil
}

func (s *tagSet) field(name string) (uint64, bool) {
	for _, f := range s.fields {
		if f.name == name {
			return f.id, true
		}
	}
	return 0, false
}

// add registers a new series with the next id. The caller holds mu and has
// checked that the key is new. tags must be sorted and owned by the catalog.
func (c *catalog) add(key string, kind Kind, measurement string, tags []Tag, field string) uint64 {
	id := uint64(len(c.series))
	h := hashTagSet(measurement, tags)
	set := c.findSet(h, measurement, tags)
	if set == nil {
		set = &tagSet{hash: h, measurement: measurement, tags: tags, next: c.sets[h]}
		c.sets[h] = set
	}
	set.fields = append(set.fields, fieldID{name: field, id: id})
	c.series = append(c.series, seriesMeta{key: key, kind: kind, set: set, field: field})
	c.byKey[key] = id
	c.idx.add(id, measurement, tags)
	return id
}

// addKey registers a series known only by its key (catalog file, WAL replay).
func (c *catalog) addKey(key []byte, kind Kind) (uint64, error) {
	m, tags, field, err := point.ParseSeriesKey(key)
	if err != nil {
		return 0, err
	}
	if !kind.Valid() {
		return 0, fmt.Errorf("series %q has unknown kind %d", key, kind)
	}
	k := string(key)
	if _, ok := c.byKey[k]; ok {
		return 0, fmt.Errorf("series %q defined twice", key)
	}
	c.mu.Lock()
	id := c.add(k, kind, m, tags, field)
	c.mu.Unlock()
	return id, nil
}

func (c *catalog) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.series)
}

// appendCatalogEntries encodes series [from, to) as one record payload.
func (c *catalog) appendCatalogEntries(dst []byte, from, to int) []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	dst = binary.AppendUvarint(dst, uint64(to-from))
	for id := from; id < to; id++ {
		s := &c.series[id]
		dst = binary.AppendUvarint(dst, uint64(id))
		dst = append(dst, byte(s.kind))
		dst = binary.AppendUvarint(dst, uint64(len(s.key)))
		dst = append(dst, s.key...)
	}
	return dst
}

// catalogFile is the open SERIES file.
type catalogFile struct {
	fs   vfs.FS
	path string
	f    vfs.File
	n    int   // series persisted
	size int64 // bytes in the file
}

func nextCatalogRecord(b []byte) ([]byte, int, error) {
	if len(b) < 8 {
		return nil, 0, errors.New("short record header")
	}
	n := binary.LittleEndian.Uint32(b)
	sum := binary.LittleEndian.Uint32(b[4:])
	if n == 0 || n > catalogMaxRecord || int64(n) > int64(len(b)-8) {
		return nil, 0, fmt.Errorf("bad record length %d", n)
	}
	p := b[8 : 8+n]
	if crc32.Checksum(p, castagnoli) != sum {
		return nil, 0, errors.New("record checksum mismatch")
	}
	return p, 8 + int(n), nil
}

func laterValidRecord(b []byte) bool {
	for i := 0; i+8 <= len(b); i++ {
		if _, _, err := nextCatalogRecord(b[i:]); err == nil {
			return true
		}
	}
	return false
}

func decodeCatalogPayload(p []byte, c *catalog) error {
	count, n := binary.Uvarint(p)
	if n <= 0 || count > uint64(len(p)) {
		return errors.New("bad entry count")
	}
	p = p[n:]
	for range count {
		id, n := binary.Uvarint(p)
		if n <= 0 || len(p) < n+1 {
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
		kind := Kind(p[0])
		p = p[1:]
		kl, n := binary.Uvarint(p)
		if n <= 0 || kl > uint64(len(p)-n) {
			return io.ErrUnexpectedEOF
		}
		key := p[n : n+int(kl)]
		p = p[n+int(kl):]
		if id != uint64(len(c.series)) {
			return fmt.Errorf("series id %d out of sequence (want %d)", id, len(c.series))
		}
		if _, err := c.addKey(key, kind); err != nil {
			return err
		}
	}
	if len(p) != 0 {
		return errors.New("trailing bytes in record")
	}
	return nil
}

// persist appends series [cf.n, to) and fsyncs.
func (cf *catalogFile) persist(c *catalog, to int) error {
	if to <= cf.n {
		return nil
	}
	buf := make([]byte, 8, 8+64*(to-cf.n))
	buf = c.appendCatalogEntries(buf, cf.n, to)
	binary.LittleEndian.PutUint32(buf, uint32(len(buf)-8))
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(buf[8:], castagnoli))
	if _, err := cf.f.Write(buf); err != nil {
		cf.f.Truncate(cf.size) // never leave a partial record before a later one
		return fmt.Errorf("append series catalog: %w", err)
	}
	if err := cf.f.Sync(); err != nil {
		cf.f.Truncate(cf.size)
		return fmt.Errorf("sync series catalog: %w", err)
	}
	cf.n = to
	cf.size += int64(len(buf))
	return nil
}

func (cf *catalogFile) close() error { return cf.f.Close() }
