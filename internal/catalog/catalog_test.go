package catalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// TestSplitKeyModel checks splitKey against the key builder: every key
// AppendSeriesKey makes, escapes included, splits back into its parts.
func TestSplitKeyModel(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	alphabet := []byte("ab=, \\x")
	word := func(min int) string {
		b := make([]byte, min+r.IntN(4))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		m := word(1)
		var tags []point.Tag
		for i := range r.IntN(4) {
			tags = append(tags, point.Tag{Key: fmt.Sprintf("%d%s", i, word(0)), Value: word(1)})
		}
		point.SortTags(tags)
		f := word(1)
		key := point.SeriesKey(m, tags, f)
		gm, gtags, gf, err := splitKey(key, nil)
		if err != nil || gm != m || gf != f || !slices.Equal(gtags, tags) {
			t.Fatalf("splitKey(%q) = %q %q %q, %v; want %q %q %q", key, gm, gtags, gf, err, m, tags, f)
		}
	}
}

// FuzzSplitKey feeds arbitrary keys to splitKey: whatever it accepts, the
// strict parser accepts with the same parts.
func FuzzSplitKey(f *testing.F) {
	for _, s := range []string{"m f", "sensor,device_id=dev-0001,site=site-01 temperature", "m,k=v,x f", "m f g", ",k=v f", "m\\ x,k\\==v f\\,g", "m,k= f", "m,=v f", "0, 0", "m, f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		m, tags, field, err := splitKey(key, nil)
		if err != nil {
			return
		}
		pm, ptags, pf, perr := point.ParseSeriesKey([]byte(key))
		if perr != nil || pm != m || pf != field || !slices.Equal(ptags, tags) {
			t.Fatalf("splitKey(%q) = %q %q %q; ParseSeriesKey = %q %q %q, %v", key, m, tags, field, pm, ptags, pf, perr)
		}
	})
}

// FuzzSetKey adds any valid key to a catalog and checks that its tag set
// gives back the key's parts, is found by them, and is not found by the
// parts with one byte more.
func FuzzSetKey(f *testing.F) {
	for _, s := range []string{"m f", "sensor,device_id=dev-0001,site=site-01 temperature", "m\\ x,k\\==v f\\,g", "m,a=b\\,c\\=d f", "m\\\\,k=\\  f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		m, tags, field, err := point.ParseSeriesKey([]byte(key))
		if err != nil || point.SeriesKey(m, tags, field) != key {
			return // not canonical: AddKey's callers build keys with SeriesKey
		}
		c := New()
		if _, err := c.AddKey([]byte(key), point.KindFloat); err != nil {
			return
		}
		set := c.FindSet(HashSet(m, tags), m, tags)
		if set == nil {
			t.Fatalf("%q: set not found by its parts", key)
		}
		if got := set.Measurement(); got != m || !set.MeasurementIs(m) {
			t.Fatalf("%q: Measurement() = %q, want %q", key, got, m)
		}
		if got := set.Tags(); !slices.Equal(got, tags) || set.NumTags() != len(tags) {
			t.Fatalf("%q: Tags() = %q (NumTags %d), want %q", key, got, set.NumTags(), tags)
		}
		if set.Is(m+"x", tags) || set.MeasurementIs(m+"x") {
			t.Fatalf("%q: Is a longer measurement", key)
		}
		for i := range tags {
			more := slices.Clone(tags)
			more[i].Value += ","
			if set.Is(m, more) {
				t.Fatalf("%q: Is %q", key, more)
			}
		}
	})
}

// TestCatalogLookup checks lookup and field against the series added.
func TestCatalogLookup(t *testing.T) {
	c := New()
	var keys []string
	for i := range 300 {
		for _, f := range []string{"a", "b b", "c=d"} {
			key := point.SeriesKey("m", []point.Tag{{Key: "host", Value: fmt.Sprintf("h %d", i%100)}, {Key: "z", Value: fmt.Sprint(i)}}, f)
			if _, err := c.addKeyString(key, point.KindFloat); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, key)
		}
	}
	if _, err := c.addKeyString(keys[7], point.KindInt); err == nil {
		t.Fatal("adding a key twice succeeded")
	}
	for id, key := range keys {
		got, ok := c.Lookup(key)
		if !ok || got != uint64(id) || c.series.at(uint64(id)).Key != key {
			t.Fatalf("lookup(%q) = %d, %v; want %d", key, got, ok, id)
		}
		s := c.series.at(uint64(id))
		if want := point.SeriesKey(s.Set.Measurement(), s.Set.Tags(), s.Field); want != key {
			t.Fatalf("series %d parts make %q, key %q", id, want, key)
		}
	}
	if _, ok := c.Lookup("m,host=h\\ 1,z=1 x"); ok {
		t.Fatal("lookup of an absent field succeeded")
	}
}

// catalogKeys returns n distinct series keys of the baseline's shape.
func catalogKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = point.SeriesKey("sensor", []point.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%06d", i)}, {Key: "site", Value: fmt.Sprintf("site-%02d", i%10)}}, "temperature")
	}
	return keys
}

// TestCatalogFileVersions writes catalog files of both versions, appends
// to them across reloads and checks that every series comes back, that a
// version 1 file keeps version 1 records and that version 2 compresses
// large records.
func TestCatalogFileVersions(t *testing.T) {
	keys := catalogKeys(3000)
	for _, version := range []byte{1, 2} {
		t.Run(fmt.Sprint("v", version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "SERIES")
			if version == 1 {
				if err := os.WriteFile(path, append([]byte(Magic), 1), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Three appends: a large record, a small one, a large one.
			bounds := []int{0, 2000, 2003, len(keys)}
			for i := 1; i < len(bounds); i++ {
				c := New()
				cf, _, err := loadCatalog(vfs.Default, path, c)
				if err != nil {
					t.Fatal(err)
				}
				if cf.version != version || c.Len() != bounds[i-1] {
					t.Fatalf("append %d: version %d with %d series, want %d with %d", i, cf.version, c.Len(), version, bounds[i-1])
				}
				for _, k := range keys[bounds[i-1]:bounds[i]] {
					c.mu.Lock()
					c.add(k, point.KindFloat)
					c.mu.Unlock()
				}
				if err := cf.Persist(c, bounds[i]); err != nil {
					t.Fatal(err)
				}
				cf.Close()
			}
			c := New()
			cf, torn, err := loadCatalog(vfs.Default, path, c)
			if err != nil || torn != 0 {
				t.Fatalf("reload: torn %d, %v", torn, err)
			}
			cf.Close()
			for id, k := range keys {
				if got, ok := c.Lookup(k); !ok || got != uint64(id) {
					t.Fatalf("series %q: id %d, %v; want %d", k, got, ok, id)
				}
			}
			// The index, built beside the decoding on load, is the one
			// adding the series one by one builds.
			ref := New()
			for _, k := range keys {
				ref.add(k, point.KindFloat)
			}
			if got, want := indexDump(c), indexDump(ref); got != want {
				t.Fatalf("index after reload differs:\n%.2000s\nwant\n%.2000s", got, want)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			var keyBytes int64
			for _, k := range keys {
				keyBytes += int64(len(k))
			}
			if version == 2 && fi.Size() > keyBytes/3 {
				t.Errorf("version 2 catalog of %d key bytes takes %d bytes", keyBytes, fi.Size())
			}
			if version == 1 && fi.Size() < keyBytes {
				t.Errorf("version 1 catalog of %d key bytes takes %d bytes", keyBytes, fi.Size())
			}
		})
	}
}

// TestCatalogBadCompressedRecord checks that a compressed record whose
// lengths lie is corruption, never a large allocation or a panic.
func TestCatalogBadCompressedRecord(t *testing.T) {
	c := New()
	for _, k := range catalogKeys(100) {
		c.add(k, point.KindFloat)
	}
	payload, err := c.appendCatalogRecord(nil, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if payload[0] != catalogZstd {
		t.Fatalf("100 keys stored with codec %d", payload[0])
	}
	for name, p := range map[string][]byte{
		"huge raw length":  append([]byte{catalogZstd, 0xff, 0xff, 0xff, 0xff, 0x0f}, payload[2:]...),
		"zero raw length":  append([]byte{catalogZstd, 0}, payload[2:]...),
		"truncated frame":  payload[:len(payload)-5],
		"unknown codec":    append([]byte{7}, payload[1:]...),
		"empty":            nil,
		"short raw length": append([]byte{catalogZstd, 5}, payload[3:]...),
	} {
		if err := decodeCatalogRecord(p, 2, New()); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	c2 := New()
	if err := decodeCatalogRecord(payload, 2, c2); err != nil || c2.Len() != 100 {
		t.Fatalf("good record: %d series, %v", c2.Len(), err)
	}
}

// FuzzCatalogRecord feeds arbitrary record payloads, past the checksum
// that guards them in the file, to the decoder of both versions: it must
// fail cleanly or add well-formed series.
func FuzzCatalogRecord(f *testing.F) {
	c := New()
	for _, k := range catalogKeys(40) {
		c.add(k, point.KindFloat)
	}
	entries := c.appendCatalogEntries(nil, 0, 40)
	zipped, err := c.appendCatalogRecord(nil, 0, 40)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(zipped)
	// A record compressed in chunks: frames one after the other.
	defer func(n int) { catalogChunk = n }(catalogChunk)
	catalogChunk = 300
	framed, err := c.appendCatalogRecord(nil, 0, 40)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(framed)
	f.Add(append([]byte{catalogRaw}, entries...))
	f.Add(entries)
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, version := range []byte{1, 2} {
			c := New()
			if err := decodeCatalogRecord(p, version, c); err != nil {
				continue
			}
			for id := range c.series.n {
				s := c.series.at(uint64(id))
				if got, ok := c.Lookup(s.Key); !ok || got != uint64(id) || !s.Kind.Valid() {
					t.Fatalf("series %d %q: lookup %d, %v", id, s.Key, got, ok)
				}
			}
		}
	})
}

// loadCatalog reads the catalog file at path into c and opens it for
// appending the way the engine's Open does (Parse, then Loaded.Open),
// returning the open file and the bytes of torn tail cut off.
func loadCatalog(fs vfs.FS, path string, c *Catalog) (*File, int64, error) {
	lc := &Loaded{Path: path}
	data, err := vfs.ReadFile(fs, path)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
	case err != nil:
		return nil, 0, err
	default:
		lc.Exists = true
		if lc.Version, lc.Valid, lc.Torn, err = Parse(path, data, c); err != nil {
			return nil, 0, err
		}
	}
	lc.N = c.series.n
	cf, err := lc.Open(fs, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, 0, err
	}
	return cf, lc.Torn, nil
}

// indexDump renders c's index by measurement and tag deterministically.
func indexDump(c *Catalog) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c.idx.measurements)) {
		mi := c.idx.measurements[name]
		fmt.Fprintf(&b, "%s %v\n", name, mi.ids)
		for _, k := range slices.Sorted(maps.Keys(mi.keys)) {
			ki := mi.keys[k]
			fmt.Fprintf(&b, "  %s n=%d\n", k, ki.n)
			for _, p := range ki.values() {
				fmt.Fprintf(&b, "    %s %v\n", p.value, p.ids())
			}
		}
	}
	return b.String()
}

// seriesFile returns the bytes of a SERIES file of version holding keys,
// appended in records of the sizes given (the rest in a last one).
func seriesFile(tb testing.TB, version byte, keys []string, records ...int) []byte {
	tb.Helper()
	fs := vfs.NewMem()
	if version == 1 {
		f, err := fs.Create("SERIES")
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := f.Write(append([]byte(Magic), 1)); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	c := New()
	cf, _, err := loadCatalog(fs, "SERIES", c)
	if err != nil {
		tb.Fatal(err)
	}
	defer cf.Close()
	records = append(records, len(keys))
	for _, n := range records {
		for _, k := range keys[c.Len():min(c.Len()+n, len(keys))] {
			c.add(k, point.KindFloat)
		}
		if err := cf.Persist(c, c.Len()); err != nil {
			tb.Fatal(err)
		}
	}
	data, err := vfs.ReadFile(fs, "SERIES")
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// FuzzParse feeds arbitrary bytes to the SERIES file parser: it must
// return corruption, or account for every byte as intact records or a torn
// tail and hold well-formed series that its index finds.
func FuzzParse(f *testing.F) {
	keys := catalogKeys(60)
	v2 := seriesFile(f, 2, keys, 3, 50)
	v1 := seriesFile(f, 1, keys[:10], 4)
	f.Add(v2)
	f.Add(v1)
	f.Add(v2[:len(v2)-3])                       // torn tail
	f.Add(append(slices.Clone(v2), 1, 2, 3))    // garbage after the records
	f.Add(append(slices.Clone(v1[:20]), v1...)) // damage before an intact record
	f.Add([]byte(Magic[:2]))                    // torn header
	f.Add([]byte("SSER\x09"))                   // unknown version
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := New()
		version, valid, torn, err := Parse("SERIES", data, c)
		if err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if valid+torn != int64(len(data)) {
			t.Fatalf("%d intact and %d torn bytes of %d", valid, torn, len(data))
		}
		if valid > 0 && version != 1 && version != 2 {
			t.Fatalf("version %d", version)
		}
		for id := range uint64(c.Len()) {
			s, _ := c.Meta(id)
			if got, ok := c.Lookup(s.Key); !ok || got != id {
				t.Fatalf("series %d %q: lookup %d, %v", id, s.Key, got, ok)
			}
			if !slices.Contains(c.Match(&point.Selector{Measurement: s.Set.Measurement(), Tags: s.Set.Tags(), Field: s.Field}), id) {
				t.Fatalf("series %d %q: not matched by its own tags", id, s.Key)
			}
		}
	})
}

// TestFindSets checks the batched lookup against FindSet: sets found by
// their hash, nil for a point skipped (hash 0) and for a hash that leads
// to other sets (as a collision would), whatever the order.
func TestFindSets(t *testing.T) {
	c := New()
	tagsA := []point.Tag{{Key: "d", Value: "a"}}
	tagsB := []point.Tag{{Key: "d", Value: "b"}}
	c.mu.Lock()
	c.add(point.SeriesKey("m", tagsA, "v"), point.KindFloat)
	c.add(point.SeriesKey("m", tagsB, "v"), point.KindFloat)
	c.mu.Unlock()
	hA, hB := HashSet("m", tagsA), HashSet("m", tagsB)
	a, b := c.FindSet(hA, "m", tagsA), c.FindSet(hB, "m", tagsB)
	if a == nil || b == nil || a == b {
		t.Fatalf("FindSet: %v %v", a, b)
	}
	hs := []uint64{hB, hA, hA, 0, hA}
	ms := []string{"m", "m", "m", "m", "n"}
	tags := [][]point.Tag{tagsB, tagsA, tagsB, tagsA, tagsA}
	out := make([]*Set, len(hs))
	for i := range out {
		out[i] = a // overwritten
	}
	c.FindSets(hs, ms, tags, out)
	want := []*Set{b, a, nil, nil, nil}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("point %d: set %p, want %p", i, out[i], want[i])
		}
	}
}

// TestUvarintLen checks uvarintLen against binary.AppendUvarint at every
// length boundary.
func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<21 - 1, 1 << 21, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
}

// TestSetFromKey checks that a Set, which holds its measurement and tags
// only in its first series' key, gives them back exactly, escapes and all,
// and that Is and MeasurementIs tell it from every near miss: a tag set
// that escaping would make look alike ("a=b,c=d" as one value or two
// tags), a shorter or longer tag set, one byte changed.
func TestSetFromKey(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	alphabet := "ab,= \\x"
	str := func(min int) string {
		b := make([]byte, min+r.IntN(5))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	c := New()
	type set struct {
		m    string
		tags []point.Tag
	}
	var sets []set
	for range 2000 {
		s := set{m: str(1)}
		for range r.IntN(4) {
			s.tags = append(s.tags, point.Tag{Key: str(1), Value: str(1)})
		}
		slices.SortFunc(s.tags, func(a, b point.Tag) int { return strings.Compare(a.Key, b.Key) })
		s.tags = slices.CompactFunc(s.tags, func(a, b point.Tag) bool { return a.Key == b.Key })
		key := point.SeriesKey(s.m, s.tags, "f")
		if _, ok := c.Lookup(key); ok {
			continue
		}
		if _, err := c.AddKey([]byte(key), point.KindFloat); err != nil {
			t.Fatalf("AddKey(%q): %v", key, err)
		}
		sets = append(sets, s)
	}
	sets = append(sets, set{m: "m", tags: []point.Tag{{Key: "a", Value: "b,c=d"}}}, set{m: "m", tags: []point.Tag{{Key: "a", Value: "b"}, {Key: "c", Value: "d"}}})
	for _, s := range sets[len(sets)-2:] {
		if _, err := c.AddKey([]byte(point.SeriesKey(s.m, s.tags, "f")), point.KindFloat); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sets {
		got := c.FindSet(HashSet(s.m, s.tags), s.m, s.tags)
		if got == nil {
			t.Fatalf("set %q %v not found", s.m, s.tags)
		}
		if m := got.Measurement(); m != s.m {
			t.Fatalf("Measurement() = %q, want %q", m, s.m)
		}
		if tags := got.Tags(); !slices.Equal(tags, s.tags) || got.NumTags() != len(s.tags) {
			t.Fatalf("Tags() = %q (NumTags %d), want %q", tags, got.NumTags(), s.tags)
		}
		if !got.MeasurementIs(s.m) || got.MeasurementIs(s.m+"x") || got.MeasurementIs(s.m[:len(s.m)-1]) {
			t.Fatalf("MeasurementIs wrong for %q", s.m)
		}
		// Near misses.
		misses := [][]point.Tag{append(slices.Clone(s.tags), point.Tag{Key: "\xff", Value: "v"})}
		if len(s.tags) > 0 {
			misses = append(misses, s.tags[:len(s.tags)-1])
			for i := range s.tags {
				k := slices.Clone(s.tags)
				k[i].Value += "x"
				misses = append(misses, k)
				k = slices.Clone(s.tags)
				k[i].Key += "\\"
				misses = append(misses, k)
			}
		}
		for _, tags := range misses {
			if got.Is(s.m, tags) {
				t.Fatalf("set %q %q Is %q %q", s.m, s.tags, s.m, tags)
			}
		}
		if got.Is(s.m+",", s.tags) || !got.Is(s.m, s.tags) {
			t.Fatalf("Is wrong for %q %q", s.m, s.tags)
		}
	}
}
