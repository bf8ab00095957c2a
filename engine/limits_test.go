package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stratadb/strata/segment"
)

// TestLimitsRoundTrip writes a value at every documented limit, reads it
// back after flush, compaction and reopen, and checks that one past each
// limit is ErrInvalid naming the point, with nothing of that call stored.
func TestLimitsRoundTrip(t *testing.T) {
	if MaxStringLen > segment.MaxStringLen {
		t.Fatalf("MaxStringLen %d exceeds what segments store (%d)", MaxStringLen, segment.MaxStringLen)
	}
	dir := t.TempDir()
	opts := quietOptions()
	opts.Sync = SyncNever
	db := openDB(t, dir, opts)

	bigString := strings.Repeat("s", MaxStringLen)
	maxTags := make([]Tag, MaxTags)
	for i := range maxTags {
		maxTags[i] = Tag{Key: fmt.Sprintf("t%04d", MaxTags-i), Value: "v"} // reverse order
	}
	// "k,k=" + value + " f" is MaxKeyLen bytes.
	longValue := strings.Repeat("v", MaxKeyLen-len("k,k= f"))

	maxFields := make([]Field, MaxFields)
	for i := range maxFields {
		maxFields[i] = Field{Key: fmt.Sprintf("f%05d", MaxFields-i), Value: Int(int64(i))}
	}
	good := []Point{
		{Measurement: "fields", Fields: maxFields, Time: 4},
		pt("str", nil, "f", String(bigString), 1),
		pt("tags", maxTags, "f", Int(2), 2),
		pt("k", []Tag{{Key: "k", Value: longValue}}, "f", Int(3), 3),
	}
	for i, p := range good {
		if err := db.Write([]Point{p}); err != nil {
			t.Fatalf("write limit point %d: %v", i, err)
		}
	}

	tooManyTags := append(append([]Tag(nil), maxTags...), Tag{Key: "t0000", Value: "v"})
	bad := []struct {
		name string
		p    Point
	}{
		{"string", pt("str", nil, "f", String(bigString+"s"), 10)},
		{"tags", pt("tags", tooManyTags, "f", Int(1), 10)},
		{"fields", Point{Measurement: "fields", Fields: append(maxFields[:MaxFields:MaxFields], Field{Key: "f00000", Value: Int(1)}), Time: 10}},
		{"key", pt("k", []Tag{{Key: "k", Value: longValue + "v"}}, "f", Int(1), 10)},
		{"key by field", pt("k", []Tag{{Key: "k", Value: longValue}}, "ff", Int(1), 10)},
		{"point", Point{Measurement: "str", Fields: []Field{{Key: "a", Value: String(bigString)}, {Key: "b", Value: String(bigString)}}, Time: 10}},
	}
	for _, c := range bad {
		err := db.Write([]Point{pt("ok", nil, "f", Int(1), 10), c.p})
		var pe *PointError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) || pe.Index != 1 {
			t.Fatalf("%s: Write = %v, want ErrInvalid naming point 1", c.name, err)
		}
	}
	// One Write of several points each within limits but together past
	// MaxWriteBytes.
	var many []Point
	for i := range MaxWriteBytes / MaxStringLen { // their overhead passes the limit
		many = append(many, pt("str", nil, "f", String(bigString), int64(100+i)))
	}
	err := db.Write(many)
	var pe *PointError
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) || pe.Index != len(many)-1 {
		t.Fatalf("Write of %d big points = %v, want ErrInvalid naming point %d", len(many), err, len(many)-1)
	}
	if res := mustQuery(t, db, rawAll("ok")); len(res) != 0 {
		t.Fatalf("a rejected call stored %s", formatSeries(res))
	}

	check := func(when string) {
		t.Helper()
		res := mustQuery(t, db, rawAll("str"))
		if s := samplesOf(t, res); len(s) != 1 || s[0].Value.Str() != bigString {
			t.Fatalf("%s: max string not read back (%d samples)", when, len(s))
		}
		res = mustQuery(t, db, rawAll("tags"))
		if len(res) != 1 || len(res[0].Tags) != MaxTags || samplesOf(t, res)[0].Value.Int() != 2 {
			t.Fatalf("%s: max tags not read back", when)
		}
		res = mustQuery(t, db, rawAll("fields"))
		n := 0
		for _, s := range res {
			if len(s.Samples) == 1 && s.Samples[0].Value.Int() == int64(MaxFields-1-n) {
				n++ // sorted by key: f00001 holds MaxFields-1, and so on
			}
		}
		if len(res) != MaxFields || n != MaxFields {
			t.Fatalf("%s: max fields not read back: %d series, %d as written", when, len(res), n)
		}
		res = mustQuery(t, db, rawAll("k"))
		if len(res) != 1 || res[0].Tags[0].Value != longValue || samplesOf(t, res)[0].Value.Int() != 3 {
			t.Fatalf("%s: max key not read back", when)
		}
	}
	check("memtable")
	mustFlush(t, db)
	check("flushed")
	mustWrite(t, db, pt("other", nil, "f", String("x"), 2)) // give compaction two inputs
	mustFlush(t, db)
	mustCompact(t, db)
	db = reopen(t, db, dir, opts)
	check("compacted and reopened")
}

// TestKeyBytesSealMemtable checks that the series keys a memtable
// references count toward its size: their flush writes them all to one
// segment index, so long keys must seal memtables like many samples do.
func TestKeyBytesSealMemtable(t *testing.T) {
	opts := quietOptions()
	opts.Sync = SyncNever
	opts.MemTableBytes = 1 << 20
	db := openDB(t, t.TempDir(), opts)
	long := strings.Repeat("k", MaxKeyLen-100)
	for i := range 64 {
		mustWrite(t, db, pt("m", []Tag{{Key: "id", Value: fmt.Sprintf("%s%03d", long, i)}}, "f", Int(int64(i)), 1))
	}
	// Sealed memtables: flushed, or waiting for it (a flush is counted
	// before it leaves the queue, so none is missed).
	if st := db.Stats(); st.Flushes+int64(st.ImmutableMemTables) < 2 {
		t.Fatalf("%d memtables sealed for 4 MiB of keys and a 1 MiB memtable", st.Flushes+int64(st.ImmutableMemTables))
	}
	mustFlush(t, db)
	if res := mustQuery(t, db, rawAll("m")); len(res) != 64 {
		t.Fatalf("%d series read back, want 64", len(res))
	}
}
