package engine

import (
	"fmt"
	"log/slog"
	"testing"
)

// Wide points: the cost of one point should grow about linearly with its
// tags and its fields, up to the limits (MaxTags, MaxFields).

// wideTags returns n tags of point i: keys shared by every point, values
// unique to it, in an order that is not sorted.
func wideTags(i, n int) []Tag {
	tags := make([]Tag, n)
	for j := range n {
		k := (j * 7919) % n // a permutation: keys arrive unsorted
		tags[j] = Tag{Key: fmt.Sprintf("tag%05d", k), Value: fmt.Sprintf("v%d-%d", i, k)}
	}
	return tags
}

// wideFields returns n float fields.
func wideFields(n int) []Field {
	fields := make([]Field, n)
	for j := range n {
		fields[j] = Field{Key: fmt.Sprintf("field%05d", (j*7919)%n), Value: Float(float64(j))}
	}
	return fields
}

func wideDB(b *testing.B) *DB {
	db, err := Open(b.TempDir(), &Options{Sync: SyncNever, DisableBackgroundCompaction: true,
		MemTableBytes: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkWideTags writes points that each create a new series of n tags
// (one field): the cost of validating, keying and indexing a wide tag set.
func BenchmarkWideTags(b *testing.B) {
	for _, n := range []int{64, 256, MaxTags} {
		b.Run(fmt.Sprintf("tags=%d", n), func(b *testing.B) {
			db := wideDB(b)
			const pre = 256 // prepared points, reused with new values
			pts := make([]Point, pre)
			for i := range pts {
				pts[i] = Point{Measurement: "wide", Tags: wideTags(i, n), Fields: []Field{{Key: "v", Value: Float(1)}}}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := &pts[i%pre]
				if i >= pre {
					// A new tag set: change one value.
					p.Tags[0].Value = fmt.Sprintf("n%d", i)
				}
				if err := db.Write(pts[i%pre : i%pre+1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tag")
		})
	}
}

// BenchmarkWideFields writes points of one known tag set with n fields
// each (the series exist after the first): the cost of resolving fields.
func BenchmarkWideFields(b *testing.B) {
	for _, n := range []int{500, 8000, MaxFields} {
		b.Run(fmt.Sprintf("fields=%d", n), func(b *testing.B) {
			db := wideDB(b)
			p := []Point{{Measurement: "wide", Tags: []Tag{{Key: "host", Value: "a"}, {Key: "site", Value: "s"}}, Fields: wideFields(n)}}
			if err := db.Write(p); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				p[0].Time++
				if err := db.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/field")
		})
	}
}
