package wal

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

func equalBatch(t *testing.T, got, want *Batch) {
	t.Helper()
	if got.Seq != want.Seq {
		t.Fatalf("seq %d, want %d", got.Seq, want.Seq)
	}
	if len(got.Series) != len(want.Series) {
		t.Fatalf("%d series, want %d", len(got.Series), len(want.Series))
	}
	for i, s := range got.Series {
		w := want.Series[i]
		if s.ID != w.ID || s.Kind != w.Kind || !bytes.Equal(s.Key, w.Key) {
			t.Fatalf("series %d: %+v, want %+v", i, s, w)
		}
	}
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("%d entries, want %d", len(got.Entries), len(want.Entries))
	}
	for i, e := range got.Entries {
		w := want.Entries[i]
		if e.ID != w.ID || e.Time != w.Time || !e.Value.Equal(w.Value) {
			t.Fatalf("entry %d: %+v, want %+v", i, e, w)
		}
	}
}

// edgeBatch holds every kind with edge values.
func edgeBatch() *Batch {
	vals := []point.Value{
		point.Float(0), point.Float(math.Copysign(0, -1)), point.Float(math.MaxFloat64),
		point.Float(-math.SmallestNonzeroFloat64), point.Float(math.Inf(1)), point.Float(math.NaN()),
		point.Float(21.37),
		point.Int(0), point.Int(-1), point.Int(math.MinInt64), point.Int(math.MaxInt64),
		point.Uint(0), point.Uint(1), point.Uint(math.MaxUint64),
		point.Bool(true), point.Bool(false),
		point.String(""), point.String("x"), point.String(strings.Repeat("long string ", 2000)),
		point.String("nul\x00and\xffbytes"),
	}
	times := []int64{0, -1, math.MinInt64, math.MaxInt64, 1_700_000_000_000_000_000, math.MinInt64, -5, 7}
	b := &Batch{Seq: math.MaxUint64}
	b.Series = []SeriesDef{
		{ID: 0, Kind: point.KindFloat, Key: []byte("sensor,device_id=dev-0000,site=site-00 temperature")},
		{ID: math.MaxUint64, Kind: point.KindString, Key: []byte{}},
		{ID: 1 << 40, Kind: point.KindBool, Key: []byte(strings.Repeat("k", 300))},
	}
	for i, v := range vals {
		b.Entries = append(b.Entries, point.Entry{
			ID:    uint64(i) * 0x0123456789,
			Time:  times[i%len(times)],
			Value: v,
		})
	}
	b.Entries = append(b.Entries, point.Entry{ID: math.MaxUint64, Time: math.MaxInt64, Value: point.Uint(3)})
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	for name, b := range map[string]*Batch{
		"empty":     {},
		"edges":     edgeBatch(),
		"iot":       iotBatch(10_000),
		"only defs": {Seq: 1, Series: []SeriesDef{{ID: 9, Kind: point.KindUint, Key: []byte("m f")}}},
	} {
		t.Run(name, func(t *testing.T) {
			enc := b.Marshal(nil)
			var got Batch
			if err := got.Unmarshal(enc); err != nil {
				t.Fatal(err)
			}
			equalBatch(t, &got, b)
			// Appending to dst keeps what was there.
			prefixed := b.Marshal([]byte("prefix"))
			if string(prefixed[:6]) != "prefix" || !bytes.Equal(prefixed[6:], enc) {
				t.Fatal("Marshal did not append to dst")
			}
			// Unmarshal into a used Batch replaces its contents.
			used := edgeBatch()
			if err := used.Unmarshal(enc); err != nil {
				t.Fatal(err)
			}
			equalBatch(t, used, b)
		})
	}
}

func TestBatchUnmarshalCopiesStrings(t *testing.T) {
	b := &Batch{Entries: []point.Entry{{ID: 1, Value: point.String("hello")}},
		Series: []SeriesDef{{ID: 1, Kind: point.KindString, Key: []byte("m f")}}}
	enc := b.Marshal(nil)
	var got Batch
	if err := got.Unmarshal(enc); err != nil {
		t.Fatal(err)
	}
	clear(enc)
	if s := got.Entries[0].Value.Str(); s != "hello" {
		t.Errorf("string value changed with the source buffer: %q", s)
	}
	// Keys alias the source, as documented.
	if !bytes.Equal(got.Series[0].Key, []byte{0, 0, 0}) {
		t.Errorf("key %q does not alias the source", got.Series[0].Key)
	}
}

func TestBatchMarshalNoAlloc(t *testing.T) {
	b := iotBatch(1000)
	dst := make([]byte, 0, 64<<10)
	if n := testing.AllocsPerRun(20, func() { dst = b.Marshal(dst[:0]) }); n != 0 {
		t.Errorf("Marshal into a large enough dst allocated %v times", n)
	}
	var got Batch
	enc := b.Marshal(nil)
	if err := got.Unmarshal(enc); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = got.Unmarshal(enc) }); n != 0 {
		t.Errorf("Unmarshal of floats into a reused Batch allocated %v times", n)
	}
}

func TestBatchCompact(t *testing.T) {
	b := iotBatch(10_000)
	enc := b.Marshal(nil)
	// id (2 bytes), kind, time delta (1 byte in a batch at one timestamp), 8-byte float.
	if per := float64(len(enc)) / 10_000; per > 13 {
		t.Errorf("%.1f bytes per float entry, want at most 13", per)
	}
}

func TestBatchUnmarshalRejects(t *testing.T) {
	good := edgeBatch().Marshal(nil)
	// Every strict prefix is truncated input (sampled inside the long string).
	for n := range len(good) {
		if n > 1024 && n < len(good)-1024 && n%101 != 0 {
			continue
		}
		var b Batch
		if err := b.Unmarshal(good[:n]); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("prefix of %d/%d bytes: %v, want ErrCorrupt", n, len(good), err)
		}
	}
	one := func(e point.Entry) []byte { return (&Batch{Entries: []point.Entry{e}}).Marshal(nil) }
	cases := map[string][]byte{
		"trailing bytes":      append(bytes.Clone(good), 0),
		"huge series count":   {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge entry count":    {0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"count beyond bytes":  {0, 0, 3, 1, 1, 0, 0, 1, 1},
		"bad varint seq":      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"bad series kind":     {0, 1, 7, 0, 0, 0},
		"series kind invalid": {0, 1, 7, 6, 0, 0},
		"long key":            {0, 1, 7, 1, 50, 'a', 0},
	}
	enc := one(point.Entry{ID: 1, Value: point.Bool(true)})
	enc[len(enc)-1] = 2
	cases["bool 2"] = enc
	enc = one(point.Entry{ID: 1, Value: point.Int(5)})
	enc[len(enc)-3] = 9 // the kind byte: id, kind, dtime, value
	cases["entry kind 9"] = enc
	enc = one(point.Entry{ID: 1, Value: point.String("abc")})
	enc[len(enc)-4] = 40 // string length
	cases["long string"] = enc
	for name, src := range cases {
		var b Batch
		if err := b.Unmarshal(src); !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestDeleteRoundTrip(t *testing.T) {
	for _, d := range []Delete{
		{},
		{Seq: 42, Selector: point.Selector{Measurement: "cpu", Start: 0, End: 100}},
		{Seq: math.MaxUint64, Selector: point.Selector{
			Measurement: "sensor", Field: "temperature",
			Tags:  []point.Tag{{Key: "device_id", Value: "dev-0001"}, {Key: "site", Value: "site, with = odd"}},
			Start: math.MinInt64, End: math.MaxInt64,
		}},
	} {
		enc := d.Marshal(nil)
		got := Delete{Selector: point.Selector{Tags: make([]point.Tag, 5)}}
		if err := got.Unmarshal(enc); err != nil {
			t.Fatal(err)
		}
		s, w := got.Selector, d.Selector
		if got.Seq != d.Seq || s.Measurement != w.Measurement || s.Field != w.Field ||
			s.Start != w.Start || s.End != w.End || len(s.Tags) != len(w.Tags) {
			t.Fatalf("got %+v, want %+v", got, d)
		}
		for i := range s.Tags {
			if s.Tags[i] != w.Tags[i] {
				t.Fatalf("tag %d: %+v, want %+v", i, s.Tags[i], w.Tags[i])
			}
		}
		for n := range len(enc) {
			if n == len(enc)-1 {
				// Without its zero matcher count the record is one written
				// before matchers existed: valid, with no matchers.
				continue
			}
			var bad Delete
			if err := bad.Unmarshal(enc[:n]); !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("prefix of %d/%d bytes: %v, want ErrCorrupt", n, len(enc), err)
			}
		}
		var bad Delete
		if err := bad.Unmarshal(append(enc, 0)); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("trailing byte: %v, want ErrCorrupt", err)
		}
	}
	// A record that ends before the matcher part (as written before
	// matchers existed) has none, one with them round-trips, and any cut
	// inside them is corrupt.
	withM := Delete{Seq: 7, Selector: point.Selector{Measurement: "m", Matchers: []point.Matcher{
		{Key: "host", Op: point.MatchRegexp, Value: "web-.*"}, {Key: "dc", Op: point.MatchNotEqual}}}}
	enc := withM.Marshal(nil)
	var got Delete
	if err := got.Unmarshal(enc); err != nil || len(got.Selector.Matchers) != 2 ||
		got.Selector.Matchers[0] != withM.Selector.Matchers[0] || got.Selector.Matchers[1] != withM.Selector.Matchers[1] {
		t.Fatalf("matchers round trip: %+v, %v", got.Selector, err)
	}
	old := (&Delete{Seq: 7, Selector: point.Selector{Measurement: "m"}}).Marshal(nil)
	old = old[:len(old)-1] // drop the zero matcher count: the legacy form
	for n := len(old) + 1; n < len(enc); n++ {
		var bad Delete
		if err := bad.Unmarshal(enc[:n]); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("matchers cut at %d/%d bytes: %v, want ErrCorrupt", n, len(enc), err)
		}
	}
	if err := got.Unmarshal(old); err != nil || got.Selector.Matchers != nil {
		t.Fatalf("record without matchers: %+v, %v", got.Selector, err)
	}
	var d Delete
	if err := d.Unmarshal([]byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0}); !errors.Is(err, base.ErrCorrupt) {
		t.Errorf("huge tag count: %v, want ErrCorrupt", err)
	}
}

func TestMarshalPanicsOnInvalidKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Marshal of an invalid kind did not panic")
		}
	}()
	(&Batch{Entries: []point.Entry{{ID: 1}}}).Marshal(nil)
}

// TestBatchThroughLog logs batches and deletes and decodes them in replay.
func TestBatchThroughLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 4096})
	batches := []*Batch{edgeBatch(), iotBatch(100), {Seq: 7}}
	del := Delete{Seq: 8, Selector: point.Selector{Measurement: "m", Start: 1, End: 2}}
	for _, b := range batches {
		if _, err := l.Append(RecordBatch, b.Marshal(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(RecordDelete, del.Marshal(nil)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	var got []*Batch
	var dels []Delete
	_, err := Replay(nil, dir, 1, func(_ uint64, typ byte, p []byte) error {
		switch typ {
		case RecordBatch:
			b := new(Batch)
			if err := b.Unmarshal(p); err != nil {
				return err
			}
			for i := range b.Series {
				b.Series[i].Key = bytes.Clone(b.Series[i].Key)
			}
			got = append(got, b)
		case RecordDelete:
			var d Delete
			if err := d.Unmarshal(p); err != nil {
				return err
			}
			dels = append(dels, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(batches) || len(dels) != 1 || dels[0].Seq != 8 || dels[0].Selector.Measurement != "m" {
		t.Fatalf("replayed %d batches and %v", len(got), dels)
	}
	for i := range got {
		equalBatch(t, got[i], batches[i])
	}
}
