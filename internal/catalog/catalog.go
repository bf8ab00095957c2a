// Package catalog is strata's series catalog: it maps every series (a
// measurement, a sorted tag set and a field) to a dense id and a kind,
// keeps them durable in the SERIES file, and indexes them by measurement
// and tag for the selectors of queries, deletes and rules.
//
// A Catalog has one writer, which alone adds series, and any number of
// readers. Its lock and maps are private: callers go through the methods,
// which take the lock themselves. A Series never changes once added, so
// the pointers the methods return stay valid and may be read without the
// lock; callers must not modify them.
package catalog

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
//	           codec 1: body is rawLen uvarint | zstd frames, one after
//	                    the other, that decode to the rawLen bytes of
//	                    entries (rawLen <= 256 * len(frames)); a writer
//	                    compresses a large record a chunk at a time
//	                    (persist.go), a frame per chunk
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
	"hash/maphash"
	"io"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/record"
	"github.com/stratadb/strata/internal/vfs"
)

const (
	// Magic starts every SERIES file.
	Magic             = "SSER"
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

// catalogLayout is the record header drawn above: length, then the crc32c
// of the payload.
var catalogLayout = &record.Layout{HeaderSize: 8, LengthAt: 0, MinPayload: 1, MaxPayload: catalogMaxRecord,
	PayloadCRC: record.CRC{At: 4}}

// Series describes one series. It never changes once created: callers
// read its fields and must not modify them. The strings of the series and
// of its tag set are substrings of Key when the key has no escapes, so a
// series holds one string allocation.
type Series struct {
	Key  string // canonical series key
	Kind point.Kind
	// prev is the id of the series of Set added before this one, when
	// there is one: the series of a tag set are a chain from Set.last. It
	// sits in the padding after Kind, so it costs no space.
	prev  uint32
	Set   *Set
	Field string
}

// Set is a measurement with a sorted tag set: the identity that the
// fields of a point share. Points are resolved to a Set by hashing their
// parts, so the hot write path builds no key strings for known series.
// Sets are carved from slabs (see Catalog.newSet). Ids
// are held in 32 bits here: 4 billion series would need a terabyte of
// catalog first. Callers read Measurement and Tags and must not modify
// them.
type Set struct {
	// key is the canonical key of the set's first series. The set's
	// measurement and tags are parsed from it when asked for
	// (Measurement, Tags, AppendTags): held only in the key, they cost no
	// memory of their own, where a slice of tags cost 24 bytes and 32 a
	// tag (88 bytes a series at a million series of two tags).
	key string
	// last is the id of the set's latest series, n the number of its
	// series (one per field): they are the chain of Series.prev from
	// last, which keeps a set of one field (the common case) at 32 bytes
	// with no slice of ids of its own.
	last, n uint32
	// byField holds every series of the set by field name once it has
	// more than fieldScanMax, so that resolving the fields of a wide point
	// costs O(1) per field, not O(fields): nil for narrow sets.
	byField map[string]uint32
}

// fieldScanMax is the most series of a tag set that field scans; a set
// with more looks fields up in its byField map.
const fieldScanMax = 8

// Catalog maps series to dense ids and indexes them by measurement and tag.
// The single writer (the engine's commit lock holder) reads without mu and
// takes mu to add series; queries take mu.RLock.
type Catalog struct {
	mu     sync.RWMutex
	series seriesList // by id (series.go)
	sets   refTable   // the tag sets by HashSet: a reference is a set's number + 1
	idx    index      // by measurement and tag (index.go)
	order  keyOrder   // ids ranked by key (index.go)

	// The tag sets, numbered in the order they were added, in slabs of
	// setSlabLen: one allocation per many sets instead of one per set.
	setDir []*[setSlabLen]Set
	nsets  uint32

	// indexLater: add leaves the index to whoever set it (Parse,
	// which indexes the series on another goroutine while it decodes).
	indexLater bool
}

// setSlabLen is the size of a slab of sets, in sets.
const setSlabLen = 512

// New returns an empty catalog.
func New() *Catalog {
	return &Catalog{idx: newIndex()}
}

// tagSetSeed seeds the in-memory tag-set hash. Hashes are never stored, so
// a per-process seed is fine; every hit is confirmed by comparing the parts.
var tagSetSeed = maphash.MakeSeed()

// HashSet hashes (measurement, sorted tags). Each part is hashed on its
// own and folded in order, so part boundaries are part of the hash.
func HashSet(measurement string, tags []point.Tag) uint64 {
	h := maphash.String(tagSetSeed, measurement)
	for _, t := range tags {
		h = (h^maphash.String(tagSetSeed, t.Key))*0x9E3779B97F4A7C15 + 1
		h = (h^maphash.String(tagSetSeed, t.Value))*0x9E3779B97F4A7C15 + 2
	}
	return h
}

// Is reports whether s is the tag set (measurement, sorted tags). It
// compares them with s's key as it would be escaped, building nothing.
func (s *Set) Is(measurement string, tags []point.Tag) bool {
	i, ok := matchEscaped(s.key, 0, measurement, false)
	for _, t := range tags {
		if !ok || i >= len(s.key) || s.key[i] != ',' {
			return false
		}
		if i, ok = matchEscaped(s.key, i+1, t.Key, true); !ok || i >= len(s.key) || s.key[i] != '=' {
			return false
		}
		i, ok = matchEscaped(s.key, i+1, t.Value, true)
	}
	return ok && i < len(s.key) && s.key[i] == ' '
}

// MeasurementIs reports whether s's measurement is m.
func (s *Set) MeasurementIs(m string) bool {
	i, ok := matchEscaped(s.key, 0, m, false)
	return ok && i < len(s.key) && (s.key[i] == ',' || s.key[i] == ' ')
}

// matchEscaped reports whether key holds part, escaped as in a series key
// (equals signs too when eq), from byte i on, and returns the index of the
// byte after it.
func matchEscaped(key string, i int, part string, eq bool) (int, bool) {
	for j := 0; j < len(part); j++ {
		c := part[j]
		if c == ',' || c == ' ' || c == '\\' || (eq && c == '=') {
			if i >= len(key) || key[i] != '\\' {
				return i, false
			}
			i++
		}
		if i >= len(key) || key[i] != c {
			return i, false
		}
		i++
	}
	return i, true
}

// Measurement returns s's measurement.
func (s *Set) Measurement() string {
	if strings.IndexByte(s.key, '\\') < 0 {
		return s.key[:strings.IndexAny(s.key, ", ")]
	}
	m, _, _, _ := splitKey(s.key, nil)
	return m
}

// AppendTags appends s's tags, sorted by key, to dst. Their strings are
// s's (substrings of its key unless it has escapes).
func (s *Set) AppendTags(dst []point.Tag) []point.Tag {
	_, tags, _, err := splitKey(s.key, dst)
	if err != nil {
		panic(fmt.Sprintf("strata: catalog holds invalid key %q: %v", s.key, err))
	}
	return tags
}

// Tags returns s's tags, sorted by key, in a slice of their own.
func (s *Set) Tags() []point.Tag {
	return s.AppendTags(make([]point.Tag, 0, s.NumTags()))
}

// NumTags returns the number of s's tags.
func (s *Set) NumTags() int {
	if strings.IndexByte(s.key, '\\') >= 0 {
		var buf [8]point.Tag
		return len(s.AppendTags(buf[:0]))
	}
	return strings.Count(s.key[:strings.IndexByte(s.key, ' ')], ",")
}

// FindSet returns the Set for (measurement, sorted tags), hashed h by
// HashSet, or nil. The caller holds mu or is the single writer, which
// alone adds series: it reads without mu.
func (c *Catalog) FindSet(h uint64, measurement string, tags []point.Tag) *Set {
	for r, i := c.sets.first(h); r != 0; r, i = c.sets.next(h, i) {
		if s := c.setAt(r); s.Is(measurement, tags) {
			return s
		}
	}
	return nil
}

// setAt returns the set of reference r (its number + 1).
func (c *Catalog) setAt(r uint32) *Set {
	i := r - 1
	return &c.setDir[i/setSlabLen][i%setSlabLen]
}

// FindSets looks up many tag sets at once: out[i] is the set of
// (measurements[i], sorted tags[i]) hashed hs[i] by HashSet, or nil; a
// point whose hs[i] is 0 is skipped (out[i] nil). It does what FindSet
// does point by point, in two passes (every table lookup, then every
// comparison), so that the CPU overlaps the cache misses of different
// points: at high cardinality each lookup and each set compared is a miss.
func (c *Catalog) FindSets(hs []uint64, measurements []string, tags [][]point.Tag, out []*Set) {
	for i, h := range hs {
		out[i] = nil
		if h != 0 {
			if r, _ := c.sets.first(h); r != 0 {
				out[i] = c.setAt(r)
			}
		}
	}
	for i, s := range out {
		if s != nil && !s.Is(measurements[i], tags[i]) {
			out[i] = c.FindSet(hs[i], measurements[i], tags[i]) // another set of the same hash tag
		}
	}
}

// field returns the id of the series of set s with field name.
func (c *Catalog) field(s *Set, name string) (uint64, bool) {
	if s.byField != nil {
		id, ok := s.byField[name]
		return uint64(id), ok
	}
	id := s.last
	for range s.n {
		m := c.series.at(uint64(id))
		if m.Field == name {
			return uint64(id), true
		}
		id = m.prev
	}
	return 0, false
}

// Lookup returns the id of the series with canonical key key.
func (c *Catalog) Lookup(key string) (uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lookupLocked(key)
}

// LookupKeys returns the ids of the n series key(i) names, in order, or
// false when one is not in the catalog.
func (c *Catalog) LookupKeys(n int, key func(i int) []byte) ([]uint64, bool) {
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
func (c *Catalog) lookupLocked(key string) (uint64, bool) {
	var buf [8]point.Tag
	m, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		return 0, false
	}
	set := c.FindSet(HashSet(m, tags), m, tags)
	if set == nil {
		return 0, false
	}
	return c.field(set, field)
}

// splitKey splits a canonical series key into its parts, appending the
// tags to tags. Without escapes in the key the parts are substrings of it.
func splitKey(key string, tags []point.Tag) (measurement string, _ []point.Tag, field string, err error) {
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
		tags = append(tags, point.Tag{Key: kv[:eq], Value: kv[eq+1:]})
	}
	return measurement, tags, field, nil
}

var errBadSeriesKey = errors.New("malformed series key")

// newSet returns a new Set, from the slabs, whose first series is series
// first of key key, hashed h.
func (c *Catalog) newSet(h uint64, key string, first uint32) *Set {
	i := c.nsets
	if i%setSlabLen == 0 {
		c.setDir = append(c.setDir, new([setSlabLen]Set))
	}
	s := &c.setDir[i/setSlabLen][i%setSlabLen]
	*s = Set{key: key, last: first, n: 1}
	c.nsets++
	c.sets.insert(h, i+1)
	return s
}

// add registers a new series with the next id. The caller holds mu and has
// checked that the key is new and valid.
func (c *Catalog) add(key string, kind point.Kind) uint64 {
	var buf [8]point.Tag
	measurement, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		panic(fmt.Sprintf("strata: catalog add of invalid key %q: %v", key, err))
	}
	h := HashSet(measurement, tags)
	return c.addParts(key, kind, measurement, tags, field, h, c.FindSet(h, measurement, tags))
}

// addParts is add with the key already split and its tag set, hashed h,
// looked up (nil when new); tags may be scratch.
func (c *Catalog) addParts(key string, kind point.Kind, measurement string, tags []point.Tag, field string, h uint64, set *Set) uint64 {
	id := uint64(c.series.n)
	var prev uint32
	if set == nil {
		set = c.newSet(h, key, uint32(id))
	} else {
		prev = set.last
		set.last = uint32(id)
		set.n++
	}
	c.series.push(Series{Key: key, Kind: kind, prev: prev, Set: set, Field: field})
	switch {
	case set.byField != nil:
		set.byField[field] = uint32(id)
	case set.n > fieldScanMax:
		set.byField = make(map[string]uint32, 2*set.n)
		for id, k := set.last, set.n; k > 0; k-- {
			m := c.series.at(uint64(id))
			set.byField[m.Field] = id
			id = m.prev
		}
	}
	if !c.indexLater {
		c.idx.add(id, measurement, tags) // substrings of key (or parsed from it); tags may be scratch
	}
	return id
}

// AddKey registers a series known only by its key (WAL replay).
func (c *Catalog) AddKey(key []byte, kind point.Kind) (uint64, error) {
	return c.addKeyString(string(key), kind)
}

// addKeyString registers a series known only by its key (catalog file,
// WAL replay). The catalog keeps key.
func (c *Catalog) addKeyString(key string, kind point.Kind) (uint64, error) {
	var buf [8]point.Tag
	m, tags, field, err := splitKey(key, buf[:0])
	if err != nil {
		return 0, fmt.Errorf("series %q: %w", key, err)
	}
	if !kind.Valid() {
		return 0, fmt.Errorf("series %q has unknown kind %d", key, kind)
	}
	h := HashSet(m, tags)
	set := c.FindSet(h, m, tags)
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

// Callers read the catalog through the methods below, which take mu
// themselves: nothing outside this package touches mu, series, sets or
// idx. A Series never changes once added, so the pointers they return stay
// valid and may be read without the lock.

// Len returns the number of series.
func (c *Catalog) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.series.n
}

// Meta returns the series with id, or false when there is none.
func (c *Catalog) Meta(id uint64) (*Series, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if id >= uint64(c.series.n) {
		return nil, false
	}
	return c.series.at(id), true
}

// Metas returns the series of ids, which must all exist.
func (c *Catalog) Metas(ids []uint64) []*Series {
	out := make([]*Series, len(ids))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, id := range ids {
		out[i] = c.series.at(id)
	}
	return out
}

// Keys returns the canonical keys of the series of ids, which must all
// exist.
func (c *Catalog) Keys(ids []uint64) []string {
	out := make([]string, len(ids))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, id := range ids {
		out[i] = c.series.at(id).Key
	}
	return out
}

// FieldKind returns the id and kind of the series of set s with field
// name. Only the single writer (the engine holds its commit lock), which
// alone adds series, calls it: it reads without mu.
func (c *Catalog) FieldKind(s *Set, name string) (uint64, point.Kind, bool) {
	id, ok := c.field(s, name)
	if !ok {
		return 0, 0, false
	}
	return id, c.series.at(id).Kind, true
}

// FindField returns the id and kind of the series of field in the tag
// set (measurement, sorted tags) hashed h, if there is one (ok), whether
// the tag set is known, and the number of series the catalog held when
// it looked.
func (c *Catalog) FindField(h uint64, measurement string, tags []point.Tag, field string) (id uint64, kind point.Kind, n int, setKnown, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if set := c.FindSet(h, measurement, tags); set != nil {
		setKnown = true
		if id, ok = c.field(set, field); ok {
			kind = c.series.at(id).Kind
		}
	}
	return id, kind, c.series.n, setKnown, ok
}

// AddAll registers n new series, key(i) and kind(i) for the i-th, with
// the next ids. The caller is the single writer and has checked that the
// keys are new and valid.
func (c *Catalog) AddAll(n int, series func(i int) (key string, kind point.Kind)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		c.add(series(i))
	}
}

// Measurements returns the names of the measurements, sorted. The slice
// is shared: callers must not modify it.
func (c *Catalog) Measurements() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.idx.sorted
}

// MeasurementIDs returns the ascending ids of measurement's series. The
// slice is shared: callers must not modify it.
func (c *Catalog) MeasurementIDs(measurement string) []uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if mi := c.idx.measurements[measurement]; mi != nil {
		return mi.ids
	}
	return nil
}

// SelectedBy reports whether the series is selected by sel's series part
// (measurement, field, tags and matchers).
func (s *Series) SelectedBy(sel *point.Selector) bool {
	if !s.Set.MeasurementIs(sel.Measurement) || (sel.Field != "" && s.Field != sel.Field) {
		return false
	}
	if len(sel.Tags) == 0 && len(sel.Matchers) == 0 {
		return true
	}
	ms, ok := CompileStoredSelector(sel)
	var buf [8]point.Tag
	return ok && MatchTags(s.Set.AppendTags(buf[:0]), ms)
}

// appendCatalogEntries encodes series [from, to) as one record payload.
func (c *Catalog) appendCatalogEntries(dst []byte, from, to int) []byte {
	c.mu.RLock()
	l := c.series // a snapshot: its first n series are read without the lock
	c.mu.RUnlock()
	dst = slices.Grow(dst, l.entriesLen(from, to))
	dst = binary.AppendUvarint(dst, uint64(to-from))
	for id := from; id < to; id++ {
		dst = l.appendEntry(dst, id)
	}
	return dst
}

// entriesLen returns the bytes of the entries of series [from, to),
// their count included.
func (l *seriesList) entriesLen(from, to int) int {
	n := uvarintLen(uint64(to - from))
	for id := from; id < to; id++ {
		k := len(l.at(uint64(id)).Key)
		n += uvarintLen(uint64(id)) + 1 + uvarintLen(uint64(k)) + k
	}
	return n
}

// appendEntry appends the entry of series id.
func (l *seriesList) appendEntry(dst []byte, id int) []byte {
	s := l.at(uint64(id))
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = append(dst, byte(s.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(s.Key)))
	return append(dst, s.Key...)
}

// uvarintLen returns the bytes binary.AppendUvarint takes for x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// File is the open SERIES file. It is not safe for concurrent use: the
// caller serialises its calls.
type File struct {
	fs      vfs.FS
	path    string
	f       vfs.File
	version byte  // of the file, which its records follow
	n       int   // series persisted
	size    int64 // bytes in the file
}

// Size returns the bytes in the file.
func (cf *File) Size() int64 { return cf.size }

// Persisted returns the number of series in the file: ids below it are
// durable.
func (cf *File) Persisted() int { return cf.n }

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
func decodeCatalogRecord(p []byte, version byte, c *Catalog) error {
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
// million series does not grow its directory and maps step by step.
func (c *Catalog) reserve(n int) {
	c.series.reserve(n)
	c.sets.reserve(c.sets.len() + n)
}

func decodeCatalogPayload(p []byte, c *Catalog) error {
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
	c.series.reserve(int(count))
	for range count {
		id, n := binary.Uvarint(p)
		if n <= 0 || len(p) < n+1 {
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
		kind := point.Kind(p[0])
		p = p[1:]
		kl, n := binary.Uvarint(p)
		if n <= 0 || kl > uint64(len(p)-n) {
			return io.ErrUnexpectedEOF
		}
		at := base - len(p) + n
		key := str[at : at+int(kl)]
		p = p[n+int(kl):]
		if id != uint64(c.series.n) {
			return fmt.Errorf("series id %d out of sequence (want %d)", id, c.series.n)
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

// Persist appends the series of c with ids [cf.Persisted(), to) and
// fsyncs.
func (cf *File) Persist(c *Catalog, to int) error {
	if to <= cf.n {
		return nil
	}
	var buf []byte
	if cf.version == 1 {
		buf = c.appendCatalogEntries(make([]byte, 8), cf.n, to)
	} else {
		var err error
		if buf, err = c.appendCatalogRecord(make([]byte, 8), cf.n, to); err != nil {
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

// Close closes the file.
func (cf *File) Close() error { return cf.f.Close() }

// Loaded is what Parse found in a SERIES file, for the engine's recovery
// to open the file (Open) once everything is validated.
type Loaded struct {
	Path    string
	Exists  bool
	Version byte  // of the file, which appended records follow
	N       int   // series in the file
	Valid   int64 // bytes of intact records, the header included
	Torn    int64 // bytes of a torn tail after them
}

// Parse decodes a catalog file of version 1 or 2 into c. It returns
// the file's version, the length of the intact prefix and of a torn tail
// after it; damage before an intact record is corruption.
func Parse(path string, data []byte, c *Catalog) (version byte, valid, torn int64, err error) {
	if len(data) == 0 {
		return 0, 0, 0, nil // created, then a crash before its header
	}
	if len(data) < catalogHeaderSize || string(data[:4]) != Magic {
		if len(data) < catalogHeaderSize && string(data) == Magic[:min(len(data), 4)] {
			return 0, 0, int64(len(data)), nil // torn header
		}
		return 0, 0, 0, base.Corruptf(path, 0, "bad magic")
	}
	version = data[4]
	if version != 1 && version != catalogVersion {
		return 0, 0, 0, base.Corruptf(path, 4, "unsupported version %d", version)
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
				tail = base.Corruptf(path, off, "%v", perr)
			} else {
				torn = int64(len(rest))
			}
			break
		}
		entries, err := catalogRecordEntries(payload, version)
		if err != nil {
			tail = base.Corruptf(path, off, "%v", err)
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
	// a snapshot of the list (valid however c.series grows after) once
	// they are complete. With a million series the two take about as long
	// as each other.
	done := make(chan seriesList, 4)
	var wg sync.WaitGroup
	from := c.series.n
	wg.Go(func() {
		var tbuf [8]point.Tag
		for series := range done {
			for ; from < series.n; from++ {
				m := series.at(uint64(from))
				meas, tags, _, err := splitKey(m.Key, tbuf[:0])
				if err != nil { // keys are checked as they are added
					panic(fmt.Sprintf("strata: catalog holds invalid key %q: %v", m.Key, err))
				}
				c.idx.add(uint64(from), meas, tags)
			}
		}
	})
	c.indexLater = true
	var derr error
	for _, r := range records {
		if err := decodeCatalogPayload(r.entries, c); err != nil {
			derr = base.Corruptf(path, r.off, "%v", err)
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

// Open opens the catalog file for appending, creating it or cutting its
// torn tail as Parse found; a cut tail is logged to logger.
func (lc *Loaded) Open(fs vfs.FS, logger *slog.Logger) (*File, error) {
	if !lc.Exists || lc.Valid < catalogHeaderSize {
		f, err := fs.Create(lc.Path)
		if err != nil {
			return nil, fmt.Errorf("create series catalog: %w", err)
		}
		hdr := append([]byte(Magic), catalogVersion)
		if _, err := f.Write(hdr); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = vfs.SyncDirOf(fs, lc.Path)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("create series catalog: %w", err)
		}
		return &File{fs: fs, path: lc.Path, f: f, version: catalogVersion, size: catalogHeaderSize}, nil
	}
	f, err := fs.OpenReadWrite(lc.Path)
	if err != nil {
		return nil, fmt.Errorf("open series catalog: %w", err)
	}
	if lc.Torn > 0 {
		err := f.Truncate(lc.Valid)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate torn tail of series catalog: %w", err)
		}
		logger.Warn("truncated torn tail of series catalog", "bytes", lc.Torn)
	}
	return &File{fs: fs, path: lc.Path, f: f, version: lc.Version, n: lc.N, size: lc.Valid}, nil
}
