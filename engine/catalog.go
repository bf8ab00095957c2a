package engine

// The series catalog file (SERIES) makes series ids and kinds durable beyond
// the WAL files that first logged them. It is append-only; every flush
// appends the series created since the previous one before the manifest
// that drops those WAL files is written.
//
//	file    := header record*
//	header  := magic "SSER" (4) | version (1): 1 or 2
//	record  := length uint32 LE (4) | crc32c(payload) uint32 LE (4) | payload (length)
//	payload := entries                                     (version 1)
//	payload := codec (1) | body                            (version 2)
//	           codec 0: body is entries
//	           codec 1: body is rawLen uvarint | zstd frame of the rawLen
//	                    bytes of entries (rawLen <= 256 * len(frame))
//	entries := count uvarint | entry{count}
//	entry   := id uvarint | kind (1) | keylen uvarint | key (keylen)
//
// New files are version 2; a version 1 file keeps getting version 1
// records. Keys compress several times over (they share measurement, tag
// keys and most of their values), so at high cardinality the catalog is
// a fraction of the data instead of most of it.
//
// Ids are dense: the first entry of the file is id 0 and every entry is one
// past the previous. A damaged record at the end of the file is the torn
// tail of an interrupted append (the WAL still holds those series) and is
// cut off; damage before a valid record is corruption. The record header
// is catalogLayout to the record package, which seals, checks and
// resynchronizes the records (as it does the WAL's and the forward queue's).
//
// These constants are part of the durable format and must not be changed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/record"
	"github.com/stratadb/strata/internal/vfs"
)

const (
	catalogMagic      = "SSER"
	catalogVersion    = 2
	catalogHeaderSize = 5
	catalogMaxRecord  = 1 << 30

	catalogRaw  = 0
	catalogZstd = 1
	// catalogMaxRatio bounds rawLen against a compressed body.
	catalogMaxRatio = 256
)

// catalogMinCompress is the smallest entries payload worth compressing.
const catalogMinCompress = 256

var catalogEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	// A record's neighbouring keys are what it compresses against: a small
	// window loses nothing and keeps the encoder's memory to a fraction
	// of the default's 8 MiB history.
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(256<<10), zstd.WithLowerEncoderMem(true))
})

var catalogDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(catalogMaxRecord), zstd.WithDecodeAllCapLimit(true))
})

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// catalogLayout is the record header drawn above: length, then the crc32c
// of the payload.
var catalogLayout = &record.Layout{HeaderSize: 8, LengthAt: 0, MinPayload: 1, MaxPayload: catalogMaxRecord,
	PayloadCRC: record.CRC{At: 4}}

// seriesMeta describes one series. It never changes once created. The
// strings of the series and of its tag set are substrings of key when the
// key has no escapes, so a series holds one string allocation.
type seriesMeta struct {
	key   string // canonical series key
	kind  Kind
	set   *tagSet
	field string
}

// tagSet is a measurement with a sorted tag set: the identity that the
// fields of a point share. Points are resolved to a tagSet by hashing their
// parts, so the hot write path builds no key strings for known series.
// tagSets and their tags are carved from slabs (see catalog.newSet). Ids
// are held in 32 bits here: 4 billion series would need a terabyte of
// catalog first.
type tagSet struct {
	measurement string
	tags        []Tag    // sorted by key
	first       uint32   // id of the set's first series
	more        []uint32 // ids of its other series (other fields)
	// byField holds every series of the set by field name once it has
	// more than fieldScanMax, so that resolving the fields of a wide point
	// costs O(1) per field, not O(fields): nil for narrow sets.
	byField map[string]uint32
	next    *tagSet // hash collision chain
}

// fieldScanMax is the most series of a tag set that field scans; a set
// with more looks fields up in its byField map.
const fieldScanMax = 8

// catalog maps series to dense ids and indexes them by measurement and tag.
// The single writer (holding DB.commitMu) reads without mu and takes mu to
// add series; queries take mu.RLock.
type catalog struct {
	mu     sync.RWMutex
	series []seriesMeta // by id
	sets   map[uint64]*tagSet
	idx    index    // by measurement and tag (index.go)
	order  keyOrder // ids ranked by key (index.go)

	// Slabs that new tag sets and their tags are carved from: one
	// allocation per many series instead of two per series.
	setSlab []tagSet
	tagSlab []Tag

	// indexLater: add leaves the index to whoever set it (parseCatalog,
	// which indexes the series on another goroutine while it decodes).
	indexLater bool
}

// Slab sizes, in elements.
const (
	setSlabLen = 512
	tagSlabLen = 2048
)

func newCatalog() *catalog {
	return &catalog{
		sets: make(map[uint64]*tagSet),
		idx:  newIndex(),
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

// field returns the id of the series of set s with field name.
func (c *catalog) field(s *tagSet, name string) (uint64, bool) {
	if s.byField != nil {
		id, ok := s.byField[name]
		return uint64(id), ok
	}
	if c.series[s.first].field == name {
		return uint64(s.first), true
	}
	for _, id := range s.more {
		if c.series[id].field == name {
			return uint64(id), true
		}
	}
	return 0, false
}

// lookup returns the id of the series with canonical key key.
func (c *catalog) lookup(key string) (uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lookupLocked(key)
}

// lookupKeys returns the ids of the n series key(i) names, in order, or
// false when one is not in the catalog.
func (c *catalog) lookupKeys(n int, key func(i int) []byte) ([]uint64, bool) {
	ids := make([]uint64, 0, n)
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := range n {
		id, ok := c.lookupLocked(string(key(i)))
		if !ok {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// lookupLocked is lookup for a caller that holds mu or is the single
// writer.
func (c *catalog) lookupLocked(key string) (uint64, bool) {
	var buf [8]Tag
	m, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		return 0, false
	}
	set := c.findSet(hashTagSet(m, tags), m, tags)
	if set == nil {
		return 0, false
	}
	return c.field(set, field)
}

// splitKey splits a canonical series key into its parts, appending the
// tags to tags. Without escapes in the key the parts are substrings of it.
func splitKey(key string, tags []Tag) (measurement string, _ []Tag, field string, err error) {
	if strings.IndexByte(key, '\\') >= 0 {
		m, parsed, f, err := point.ParseSeriesKey([]byte(key))
		return m, append(tags, parsed...), f, err
	}
	sp := strings.IndexByte(key, ' ')
	if sp <= 0 || sp == len(key)-1 || strings.LastIndexByte(key, ' ') != sp {
		return "", tags, "", errBadSeriesKey
	}
	field = key[sp+1:]
	rest := key[:sp]
	i := strings.IndexByte(rest, ',')
	if i < 0 {
		return rest, tags, field, nil
	}
	measurement, rest = rest[:i], rest[i+1:]
	if measurement == "" || rest == "" {
		return "", tags, "", errBadSeriesKey
	}
	for rest != "" {
		var kv string
		if i := strings.IndexByte(rest, ','); i >= 0 {
			kv, rest = rest[:i], rest[i+1:]
			if rest == "" {
				return "", tags, "", errBadSeriesKey
			}
		} else {
			kv, rest = rest, ""
		}
		eq := strings.IndexByte(kv, '=')
		if eq <= 0 || eq == len(kv)-1 || strings.IndexByte(kv[eq+1:], '=') >= 0 {
			return "", tags, "", errBadSeriesKey
		}
		tags = append(tags, Tag{Key: kv[:eq], Value: kv[eq+1:]})
	}
	return measurement, tags, field, nil
}

var errBadSeriesKey = errors.New("malformed series key")

// newSet returns a tagSet for (measurement, tags) carved from the slabs,
// with its own copy of tags.
func (c *catalog) newSet(h uint64, measurement string, tags []Tag, first uint32) *tagSet {
	if len(c.setSlab) == 0 {
		c.setSlab = make([]tagSet, setSlabLen)
	}
	s := &c.setSlab[0]
	c.setSlab = c.setSlab[1:]
	// tags itself is never kept (not even when empty), so that callers'
	// scratch tag arrays stay on their stacks.
	var own []Tag
	if len(tags) > 0 {
		if len(tags) > len(c.tagSlab) {
			c.tagSlab = make([]Tag, max(tagSlabLen, len(tags)))
		}
		own = c.tagSlab[:len(tags):len(tags)]
		c.tagSlab = c.tagSlab[len(tags):]
		copy(own, tags)
	}
	*s = tagSet{measurement: measurement, tags: own, first: first, next: c.sets[h]}
	c.sets[h] = s
	return s
}

// add registers a new series with the next id. The caller holds mu and has
// checked that the key is new and valid.
func (c *catalog) add(key string, kind Kind) uint64 {
	var buf [8]Tag
	measurement, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		panic(fmt.Sprintf("strata: catalog add of invalid key %q: %v", key, err))
	}
	h := hashTagSet(measurement, tags)
	return c.addParts(key, kind, measurement, tags, field, h, c.findSet(h, measurement, tags))
}

// addParts is add with the key already split and its tag set, hashed h,
// looked up (nil when new); tags may be scratch.
func (c *catalog) addParts(key string, kind Kind, measurement string, tags []Tag, field string, h uint64, set *tagSet) uint64 {
	id := uint64(len(c.series))
	if set == nil {
		set = c.newSet(h, measurement, tags, uint32(id))
	} else {
		set.more = append(set.more, uint32(id))
	}
	c.series = append(c.series, seriesMeta{key: key, kind: kind, set: set, field: field})
	switch {
	case set.byField != nil:
		set.byField[field] = uint32(id)
	case len(set.more) > fieldScanMax:
		set.byField = make(map[string]uint32, 2*len(set.more))
		set.byField[c.series[set.first].field] = set.first
		for _, id := range set.more {
			set.byField[c.series[id].field] = id
		}
	}
	if !c.indexLater {
		c.idx.add(id, set.measurement, set.tags) // set's own strings; tags may be scratch
	}
	return id
}

// addKey registers a series known only by its key (WAL replay).
func (c *catalog) addKey(key []byte, kind Kind) (uint64, error) {
	return c.addKeyString(string(key), kind)
}

// addKeyString registers a series known only by its key (catalog file,
// WAL replay). The catalog keeps key.
func (c *catalog) addKeyString(key string, kind Kind) (uint64, error) {
	var buf [8]Tag
	m, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		return 0, fmt.Errorf("series %q: %w", key, err)
	}
	if !kind.Valid() {
		return 0, fmt.Errorf("series %q has unknown kind %d", key, kind)
	}
	h := hashTagSet(m, tags)
	set := c.findSet(h, m, tags)
	if set != nil {
		if _, ok := c.field(set, field); ok {
			return 0, fmt.Errorf("series %q defined twice", key)
		}
	}
	c.mu.Lock()
	id := c.addParts(key, kind, m, tags, field, h, set)
	c.mu.Unlock()
	return id, nil
}

// The rest of the engine reads the catalog through the methods below,
// which take mu themselves: no other file touches mu, series, sets or idx.
// A seriesMeta never changes once added, so the pointers they return stay
// valid and may be read without the lock.

// len returns the number of series.
func (c *catalog) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.series)
}

// meta returns the series with id, or false when there is none.
func (c *catalog) meta(id uint64) (*seriesMeta, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if id >= uint64(len(c.series)) {
		return nil, false
	}
	return &c.series[id], true
}

// metas returns the series of ids, which must all exist.
func (c *catalog) metas(ids []uint64) []*seriesMeta {
	out := make([]*seriesMeta, len(ids))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, id := range ids {
		out[i] = &c.series[id]
	}
	return out
}

// keys returns the canonical keys of the series of ids, which must all
// exist.
func (c *catalog) keys(ids []uint64) []string {
	out := make([]string, len(ids))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, id := range ids {
		out[i] = c.series[id].key
	}
	return out
}

// fieldKind returns the id and kind of the series of set s with field
// name. Only the single writer (holding DB.commitMu), which alone adds
// series, calls it: it reads without mu.
func (c *catalog) fieldKind(s *tagSet, name string) (uint64, Kind, bool) {
	id, ok := c.field(s, name)
	if !ok {
		return 0, 0, false
	}
	return id, c.series[id].kind, true
}

// findField returns the id and kind of the series of field in the tag
// set (measurement, sorted tags) hashed h, if there is one (ok), whether
// the tag set is known, and the number of series the catalog held when
// it looked.
func (c *catalog) findField(h uint64, measurement string, tags []Tag, field string) (id uint64, kind Kind, n int, setKnown, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if set := c.findSet(h, measurement, tags); set != nil {
		setKnown = true
		if id, ok = c.field(set, field); ok {
			kind = c.series[id].kind
		}
	}
	return id, kind, len(c.series), setKnown, ok
}

// since returns the series with ids from from on. The slice is shared:
// callers must not modify it.
func (c *catalog) since(from int) []seriesMeta {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if from >= len(c.series) {
		return nil
	}
	return c.series[from:len(c.series):len(c.series)]
}

// addAll registers n new series, key(i) and kind(i) for the i-th, with
// the next ids. The caller is the single writer and has checked that the
// keys are new and valid.
func (c *catalog) addAll(n int, series func(i int) (key string, kind Kind)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		c.add(series(i))
	}
}

// measurements returns the names of the measurements, sorted. The slice
// is shared: callers must not modify it.
func (c *catalog) measurements() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.idx.sorted
}

// measurementIDs returns the ascending ids of measurement's series. The
// slice is shared: callers must not modify it.
func (c *catalog) measurementIDs(measurement string) []uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if mi := c.idx.measurements[measurement]; mi != nil {
		return mi.ids
	}
	return nil
}

// selectedBy reports whether the series is selected by sel's series part
// (measurement, field, tags and matchers).
func (s *seriesMeta) selectedBy(sel *Selector) bool {
	if s.set.measurement != sel.Measurement || (sel.Field != "" && s.field != sel.Field) {
		return false
	}
	if len(sel.Tags) == 0 && len(sel.Matchers) == 0 {
		return true
	}
	ms, ok := compileStoredSelector(sel)
	return ok && matchTags(s.set.tags, ms)
}

// appendCatalogEntries encodes series [from, to) as one record payload.
func (c *catalog) appendCatalogEntries(dst []byte, from, to int) []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	dst = binary.AppendUvarint(dst, uint64(to-from))
	n := 0
	for id := from; id < to; id++ {
		n += len(c.series[id].key) + 2*binary.MaxVarintLen64
	}
	dst = slices.Grow(dst, n)
	for id := from; id < to; id++ {
		s := &c.series[id]
		dst = binary.AppendUvarint(dst, uint64(id))
		dst = append(dst, byte(s.kind))
		dst = binary.AppendUvarint(dst, uint64(len(s.key)))
		dst = append(dst, s.key...)
	}
	return dst
}

// catalogFileSize returns the size of the SERIES file (0 before it
// exists).
func (db *DB) catalogFileSize() int64 {
	db.versionMu.Lock()
	defer db.versionMu.Unlock()
	if db.catf == nil {
		return 0
	}
	return db.catf.size
}

// catalogFile is the open SERIES file.
type catalogFile struct {
	fs      vfs.FS
	path    string
	f       vfs.File
	version byte  // of the file, which its records follow
	n       int   // series persisted
	size    int64 // bytes in the file
}

func nextCatalogRecord(b []byte) ([]byte, int, error) {
	f, bad := catalogLayout.Parse(b)
	switch bad {
	case record.OK:
		return f.Payload, int(f.Size), nil
	case record.Short:
		return nil, 0, errors.New("short record header")
	case record.BadCRC:
		return nil, 0, errors.New("record checksum mismatch")
	}
	return nil, 0, fmt.Errorf("bad record length %d", catalogLayout.Length(b))
}

func laterValidRecord(b []byte) bool {
	_, found, _ := catalogLayout.Scan(record.Mem(b), 0)
	return found
}

// decodeCatalogRecord decodes the payload of a record of a file of the
// given version into c.
func decodeCatalogRecord(p []byte, version byte, c *catalog) error {
	raw, err := catalogRecordEntries(p, version)
	if err != nil {
		return err
	}
	return decodeCatalogPayload(raw, c)
}

// catalogRecordEntries returns the entries of a record of a file of the
// given version, decompressed.
func catalogRecordEntries(p []byte, version byte) ([]byte, error) {
	if version == 1 {
		return p, nil
	}
	if len(p) == 0 {
		return nil, errors.New("empty record")
	}
	switch p[0] {
	case catalogRaw:
		return p[1:], nil
	case catalogZstd:
		rawLen, n := binary.Uvarint(p[1:])
		body := p[1+max(n, 0):]
		if n <= 0 || rawLen == 0 || rawLen > catalogMaxRecord || rawLen > catalogMaxRatio*uint64(len(body)) {
			return nil, fmt.Errorf("bad raw length %d for %d compressed bytes", rawLen, len(body))
		}
		dec, err := catalogDecoder()
		if err != nil {
			return nil, err
		}
		raw, err := dec.DecodeAll(body, make([]byte, 0, rawLen))
		if err != nil {
			return nil, fmt.Errorf("decompress: %w", err)
		}
		if uint64(len(raw)) != rawLen {
			return nil, fmt.Errorf("decompressed %d bytes, want %d", len(raw), rawLen)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("unknown codec %d", p[0])
}

// reserve sizes c for n more series, so that loading a catalog of a
// million series does not grow its slice and maps step by step.
func (c *catalog) reserve(n int) {
	c.series = slices.Grow(c.series, n)
	if len(c.sets) == 0 {
		c.sets = make(map[uint64]*tagSet, n)
	}
}

func decodeCatalogPayload(p []byte, c *catalog) error {
	// The keys of a record are substrings of one string: one allocation
	// per record instead of one per series.
	str := string(p)
	base := len(p)
	count, n := binary.Uvarint(p)
	if n <= 0 || count > uint64(len(p)) {
		return errors.New("bad entry count")
	}
	p = p[n:]
	// Size for the record up front (count is bounded by its length).
	c.series = slices.Grow(c.series, int(count))
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
		at := base - len(p) + n
		key := str[at : at+int(kl)]
		p = p[n+int(kl):]
		if id != uint64(len(c.series)) {
			return fmt.Errorf("series id %d out of sequence (want %d)", id, len(c.series))
		}
		if _, err := c.addKeyString(key, kind); err != nil {
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
	if cf.version == 1 {
		buf = c.appendCatalogEntries(buf, cf.n, to)
	} else {
		var err error
		if buf, err = appendCatalogPayload(buf, c.appendCatalogEntries(nil, cf.n, to)); err != nil {
			return err
		}
	}
	catalogLayout.Seal(buf[:8], buf[8:])
	if _, err := record.Write(cf.f, buf); err != nil {
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

// appendCatalogPayload appends the version 2 payload of entries:
// compressed when that pays.
func appendCatalogPayload(dst, entries []byte) ([]byte, error) {
	if len(entries) >= catalogMinCompress {
		enc, err := catalogEncoder()
		if err != nil {
			return nil, err
		}
		start := len(dst)
		dst = append(dst, catalogZstd)
		dst = binary.AppendUvarint(dst, uint64(len(entries)))
		body := len(dst)
		dst = enc.EncodeAll(entries, dst)
		if c := len(dst) - body; c < len(entries) && uint64(len(entries)) <= catalogMaxRatio*uint64(c) {
			return dst, nil
		}
		dst = dst[:start]
	}
	dst = append(dst, catalogRaw)
	return append(dst, entries...), nil
}

// loadedCatalog is what readCatalog found, for recover to open the file
// once everything is validated.
type loadedCatalog struct {
	path    string
	exists  bool
	version byte  // of the file, which appended records follow
	n       int   // series in the file
	valid   int64 // bytes of intact records, the header included
	torn    int64 // bytes of a torn tail after them
}

// parseCatalog decodes a catalog file of version 1 or 2 into c. It returns
// the file's version, the length of the intact prefix and of a torn tail
// after it; damage before an intact record is corruption.
func parseCatalog(path string, data []byte, c *catalog) (version byte, valid, torn int64, err error) {
	if len(data) == 0 {
		return 0, 0, 0, nil // created, then a crash before its header
	}
	if len(data) < catalogHeaderSize || string(data[:4]) != catalogMagic {
		if len(data) < catalogHeaderSize && string(data) == catalogMagic[:min(len(data), 4)] {
			return 0, 0, int64(len(data)), nil // torn header
		}
		return 0, 0, 0, corruptf(path, 0, "bad magic")
	}
	version = data[4]
	if version != 1 && version != catalogVersion {
		return 0, 0, 0, corruptf(path, 4, "unsupported version %d", version)
	}
	// First the records' framing and entries, so that c can be sized for
	// every series at once; then the entries in order. Errors keep the
	// order of a single pass: a record's bad entries before a later
	// record's bad framing or compression.
	type record struct {
		off     int64
		entries []byte
	}
	var records []record
	var tail error // what ends the records early: corruption, or nil for a torn tail
	off := int64(catalogHeaderSize)
	rest := data[catalogHeaderSize:]
	total := 0
	for len(rest) > 0 {
		payload, n, perr := nextCatalogRecord(rest)
		if perr != nil {
			// A bad record is a torn tail only if no valid record follows it.
			if laterValidRecord(rest[1:]) {
				tail = corruptf(path, off, "%v", perr)
			} else {
				torn = int64(len(rest))
			}
			break
		}
		entries, err := catalogRecordEntries(payload, version)
		if err != nil {
			tail = corruptf(path, off, "%v", err)
			break
		}
		if count, k := binary.Uvarint(entries); k > 0 && count <= uint64(len(entries)) {
			total += int(count)
		}
		records = append(records, record{off, entries})
		off += int64(n)
		rest = rest[n:]
	}
	c.reserve(total)
	// The index by measurement and tag is built on another goroutine, a
	// record behind the decoding: each record's series are handed over as
	// a slice (valid however c.series grows after) once they are complete.
	// With a million series the two take about as long as each other.
	done := make(chan []seriesMeta, 4)
	var wg sync.WaitGroup
	from := len(c.series)
	wg.Go(func() {
		for series := range done {
			for ; from < len(series); from++ {
				m := &series[from]
				c.idx.add(uint64(from), m.set.measurement, m.set.tags)
			}
		}
	})
	c.indexLater = true
	var derr error
	for _, r := range records {
		if err := decodeCatalogPayload(r.entries, c); err != nil {
			derr = corruptf(path, r.off, "%v", err)
			break
		}
		done <- c.series
	}
	close(done)
	wg.Wait()
	c.indexLater = false
	if derr != nil {
		return 0, 0, 0, derr
	}
	if tail != nil {
		return 0, 0, 0, tail
	}
	return version, off, torn, nil
}

// open opens the catalog file for appending, creating it or cutting its
// torn tail as readCatalog found.
func (lc *loadedCatalog) open(db *DB) error {
	fs := db.fs
	if !lc.exists || lc.valid < catalogHeaderSize {
		f, err := fs.Create(lc.path)
		if err != nil {
			return fmt.Errorf("create series catalog: %w", err)
		}
		hdr := append([]byte(catalogMagic), catalogVersion)
		if _, err := f.Write(hdr); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = vfs.SyncDirOf(fs, lc.path)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("create series catalog: %w", err)
		}
		db.catf = &catalogFile{fs: fs, path: lc.path, f: f, version: catalogVersion, size: catalogHeaderSize}
		return nil
	}
	f, err := fs.OpenReadWrite(lc.path)
	if err != nil {
		return fmt.Errorf("open series catalog: %w", err)
	}
	if lc.torn > 0 {
		err := f.Truncate(lc.valid)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("truncate torn tail of series catalog: %w", err)
		}
		db.logger.Warn("truncated torn tail of series catalog", "bytes", lc.torn)
	}
	db.catf = &catalogFile{fs: fs, path: lc.path, f: f, version: lc.version, n: lc.n, size: lc.valid}
	return nil
}
