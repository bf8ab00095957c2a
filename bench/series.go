package bench

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/stratadb/strata/engine"
)

// seriesIndex numbers the series an adapter stores itself (the in-memory
// floor, LevelDB, Pebble): ids are dense from 1, in the order series are
// first written, and each keeps its canonical key for the answers and the
// key-value stores' dictionaries.
//
// Finding a point's series builds no canonical key and allocates nothing:
// the point's tag set is found through one map lookup by an identity key
// (measurement, tag keys and values, each length-prefixed, unescaped) built
// in a reused buffer, and each field within the set by its position in the
// point, the order the fields came in before. Only a new series costs an
// allocation (its canonical key and an entry).
//
// One goroutine writes (set, field, add, truncate) while others read
// (find, selectSeries): mu guards sets, each set's fields and series
// against the readers; the writer reads them unlocked, being their only
// writer.
type seriesIndex struct {
	mu     sync.RWMutex
	sets   map[string]*tagSet
	series []seriesInfo // series[id-1]
	ident  []byte       // reused identity key
	tags   []engine.Tag // reused for sorting a point's tags
	cache  *[1 << setCacheBits]setCache
	// tagKeys holds per measurement the tag keys all its sets have, or nil
	// once two sets differ (or one repeats a key): only then does a
	// selector naming those keys select exactly one set.
	tagKeys map[string][]string
}

// setCache remembers the set of the last tag slice seen in its slot, by
// the address of the slice's first element: points that share their tag
// slices (as generated data and parsers that intern tag sets do) find
// their set without building the identity key. A hit is checked by
// comparing the tags, so a slice changed in place is looked up again.
type setCache struct {
	tags *engine.Tag
	set  *tagSet
}

const setCacheBits = 12

// tagSet is one measurement and tag set and the series of its fields.
type tagSet struct {
	ident       string
	measurement string
	tags        []engine.Tag // sorted by key; shared by the series' infos
	fields      []setField   // in the order first written
	byName      map[string]uint64
}

type setField struct {
	name string
	id   uint64
}

// manyFields is the field count from which a set looks fields up by map
// rather than by scanning.
const manyFields = 8

// sortedTags returns tags sorted by key, in a reused buffer when they are
// not sorted already.
func (x *seriesIndex) sortedTags(tags []engine.Tag) []engine.Tag {
	if slices.IsSortedFunc(tags, cmpTag) {
		return tags
	}
	x.tags = append(x.tags[:0], tags...)
	slices.SortFunc(x.tags, cmpTag)
	return x.tags
}

// appendIdent appends the identity key of a measurement and tag set (tags
// sorted): every string preceded by its length, so that distinct sets have
// distinct keys without escaping anything.
func appendIdent(dst []byte, measurement string, tags []engine.Tag) []byte {
	dst = appendLenString(dst, measurement)
	for _, t := range tags {
		dst = appendLenString(dst, t.Key)
		dst = appendLenString(dst, t.Value)
	}
	return dst
}

func appendLenString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// set returns the tag set of p, adding it when it is new. Writer only.
func (x *seriesIndex) set(p *engine.Point) *tagSet {
	if x.cache == nil {
		x.cache = new([1 << setCacheBits]setCache)
	}
	c := x.cached(p)
	if s := c.set; s != nil && c.tags == unsafe.SliceData(p.Tags) && s.equal(p) {
		return s
	}
	s := x.find(p)
	*c = setCache{tags: unsafe.SliceData(p.Tags), set: s}
	return s
}

// cached returns the cache slot of p's tag slice.
func (x *seriesIndex) cached(p *engine.Point) *setCache {
	h := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p.Tags)))) * 0x9e3779b97f4a7c15
	return &x.cache[h>>(64-setCacheBits)]
}

// equal reports whether p's measurement and tags are the set's, in the
// same order. Strings that share their bytes compare in constant time.
func (s *tagSet) equal(p *engine.Point) bool {
	if s.measurement != p.Measurement || len(s.tags) != len(p.Tags) {
		return false
	}
	for i := range s.tags {
		if s.tags[i] != p.Tags[i] {
			return false
		}
	}
	return true
}

// find returns the tag set of p through its identity key, adding it when
// it is new.
func (x *seriesIndex) find(p *engine.Point) *tagSet {
	tags := x.sortedTags(p.Tags)
	x.ident = appendIdent(x.ident[:0], p.Measurement, tags)
	if s, ok := x.sets[string(x.ident)]; ok {
		return s
	}
	return x.addSet(string(x.ident), p.Measurement, slices.Clone(tags))
}

func (x *seriesIndex) addSet(ident, measurement string, tags []engine.Tag) *tagSet {
	s := &tagSet{ident: ident, measurement: measurement, tags: tags}
	x.mu.Lock()
	if x.sets == nil {
		x.sets = map[string]*tagSet{}
		x.tagKeys = map[string][]string{}
	}
	x.sets[ident] = s
	if keys, seen := x.tagKeys[measurement]; !seen {
		keys = make([]string, len(tags))
		for i, t := range tags {
			if keys[i] = t.Key; i > 0 && keys[i-1] == t.Key {
				keys = nil
				break
			}
		}
		x.tagKeys[measurement] = keys
	} else if keys != nil && !sameKeys(keys, tags) {
		x.tagKeys[measurement] = nil
	}
	x.mu.Unlock()
	return s
}

// sameKeys reports whether tags have exactly the keys keys, in order.
func sameKeys(keys []string, tags []engine.Tag) bool {
	if len(keys) != len(tags) {
		return false
	}
	for i, k := range keys {
		if tags[i].Key != k {
			return false
		}
	}
	return true
}

// field returns the id of field f of p, whose tag set is s (from set),
// adding the series when it is new (added). Writer only.
func (x *seriesIndex) field(s *tagSet, p *engine.Point, f int) (id uint64, added bool) {
	name := p.Fields[f].Key
	if f < len(s.fields) && s.fields[f].name == name {
		return s.fields[f].id, false
	}
	if id, ok := s.lookup(name); ok {
		return id, false
	}
	return x.add(s, name), true
}

// lookup finds a field of the set. Readers hold mu.
func (s *tagSet) lookup(name string) (uint64, bool) {
	if s.byName != nil {
		id, ok := s.byName[name]
		return id, ok
	}
	for _, sf := range s.fields {
		if sf.name == name {
			return sf.id, true
		}
	}
	return 0, false
}

// add adds the series of field name to s and returns its id. Writer only.
func (x *seriesIndex) add(s *tagSet, name string) uint64 {
	id := uint64(len(x.series)) + 1
	info := seriesInfo{id: id, key: engine.SeriesKey(s.measurement, s.tags, name),
		measurement: s.measurement, tags: s.tags, field: name}
	x.mu.Lock()
	x.series = append(x.series, info)
	s.fields = append(s.fields, setField{name, id})
	switch {
	case s.byName != nil:
		s.byName[name] = id
	case len(s.fields) > manyFields:
		s.byName = make(map[string]uint64, len(s.fields))
		for _, sf := range s.fields {
			s.byName[sf.name] = sf.id
		}
	}
	x.mu.Unlock()
	return id
}

// addKey adds the series of a canonical key (as a dictionary on disk holds
// it) under the next id, which must be id. Writer only.
func (x *seriesIndex) addKey(id uint64, key string) error {
	if id != uint64(len(x.series))+1 {
		return fmt.Errorf("series id %d out of order", id)
	}
	m, tags, field, err := engine.ParseSeriesKey(key)
	if err != nil {
		return fmt.Errorf("series %d: %w", id, err)
	}
	x.ident = appendIdent(x.ident[:0], m, tags)
	s, ok := x.sets[string(x.ident)]
	if !ok {
		s = x.addSet(string(x.ident), m, tags)
	}
	if _, dup := s.lookup(field); dup {
		return fmt.Errorf("series %d: %q repeats an earlier series", id, key)
	}
	x.add(s, field)
	return nil
}

// count returns the number of series. Writer only.
func (x *seriesIndex) count() int { return len(x.series) }

// truncate forgets the series added after the first n (those of a batch
// that failed). Their sets stay, possibly empty. Writer only.
func (x *seriesIndex) truncate(n int) {
	if n >= len(x.series) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, info := range x.series[n:] {
		x.ident = appendIdent(x.ident[:0], info.measurement, info.tags)
		s := x.sets[string(x.ident)]
		// A set's fields are in id order: the forgotten ones are its last.
		for len(s.fields) > 0 && s.fields[len(s.fields)-1].id > uint64(n) {
			if s.byName != nil {
				delete(s.byName, s.fields[len(s.fields)-1].name)
			}
			s.fields = s.fields[:len(s.fields)-1]
		}
	}
	clear(x.series[n:]) // let the keys be collected
	x.series = x.series[:n]
}

// selectSeries appends to dst the series sel selects, sorted by canonical
// key. A selector that names a field and every tag key of its
// measurement, when all the measurement's series have the same keys (the
// bench's point query), is one lookup; any other is matched against every
// series.
func (x *seriesIndex) selectSeries(sel *engine.Selector, dst []seriesInfo) []seriesInfo {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if sel.Field != "" && len(sel.Tags) > 0 {
		tags := sel.Tags
		if !slices.IsSortedFunc(tags, cmpTag) {
			tags = slices.SortedFunc(slices.Values(tags), cmpTag)
		}
		if keys := x.tagKeys[sel.Measurement]; keys != nil && sameKeys(keys, tags) {
			if s, ok := x.sets[string(appendIdent(nil, sel.Measurement, tags))]; ok {
				if id, ok := s.lookup(sel.Field); ok {
					dst = append(dst, x.series[id-1])
				}
			}
			return dst
		}
	}
	n := len(dst)
	for i := range x.series {
		if x.series[i].matches(sel) {
			dst = append(dst, x.series[i])
		}
	}
	slices.SortFunc(dst[n:], func(a, b seriesInfo) int { return strings.Compare(a.key, b.key) })
	return dst
}
