package catalog

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// checkFieldIndex checks that every tag set of c finds each of its fields
// in O(1): a set with more series than fieldScanMax has a byField map
// holding all of them, and field resolves every series of every set.
func checkFieldIndex(t *testing.T, c *Catalog) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id := range c.series.n {
		m := c.series.at(uint64(id))
		set := m.Set
		if n := int(set.n); n > fieldScanMax && len(set.byField) != n {
			t.Fatalf("tag set of %q has %d series, byField holds %d: field lookups scan", m.Key, n, len(set.byField))
		}
		if got, ok := c.field(set, m.Field); !ok || got != uint64(id) {
			t.Fatalf("field(%q) = %d, %v; want %d", m.Key, got, ok, id)
		}
	}
}

// TestFieldIndex adds a wide tag set at once, a set growing one field at a
// time past fieldScanMax and a narrow set, and checks that each resolves
// its fields in O(1); then that the catalog loaded from its file builds
// the same field maps.
func TestFieldIndex(t *testing.T) {
	host := []point.Tag{{Key: "host", Value: "a"}}
	var keys []string
	for i := range 3000 {
		keys = append(keys, point.SeriesKey("wide", host, fmt.Sprintf("field%05d", i)))
	}
	for i := range 3 * fieldScanMax {
		keys = append(keys, point.SeriesKey("grow", host, fmt.Sprintf("f%d", i)))
	}
	for i := range fieldScanMax {
		keys = append(keys, point.SeriesKey("narrow", host, fmt.Sprintf("f%d", i)))
	}
	path := filepath.Join(t.TempDir(), "SERIES")
	c := New()
	cf, _, err := loadCatalog(vfs.Default, path, c)
	if err != nil {
		t.Fatal(err)
	}
	c.AddAll(3000, func(i int) (string, point.Kind) { return keys[i], point.KindFloat })
	for _, k := range keys[3000:] {
		c.AddAll(1, func(int) (string, point.Kind) { return k, point.KindInt })
	}
	checkFieldIndex(t, c)
	if err := cf.Persist(c, c.Len()); err != nil {
		t.Fatal(err)
	}
	cf.Close()

	loaded := New()
	cf, _, err = loadCatalog(vfs.Default, path, loaded)
	if err != nil {
		t.Fatal(err)
	}
	cf.Close()
	if loaded.Len() != len(keys) {
		t.Fatalf("loaded %d series, want %d", loaded.Len(), len(keys))
	}
	checkFieldIndex(t, loaded)
}
