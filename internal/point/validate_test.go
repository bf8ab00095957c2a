package point

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
)

func manyTags(n int, shuffle bool) []Tag {
	tags := make([]Tag, n)
	for i := range tags {
		tags[i] = Tag{Key: fmt.Sprintf("k%06d", i), Value: "v"}
	}
	if shuffle {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(n, func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
	}
	return tags
}

func TestDuplicateTagKeyAnyOrder(t *testing.T) {
	for _, n := range []int{2, 16, 17, 100, 5000} {
		for _, shuffle := range []bool{false, true} {
			tags := manyTags(n, shuffle)
			if k, dup := duplicateTagKey(tags); dup {
				t.Fatalf("n=%d shuffle=%v: reported duplicate %q", n, shuffle, k)
			}
			tags[n-1].Key = tags[(n-1)/2].Key
			if k, dup := duplicateTagKey(tags); !dup || k != tags[(n-1)/2].Key {
				t.Fatalf("n=%d shuffle=%v: got %q %v, want duplicate %q", n, shuffle, k, dup, tags[(n-1)/2].Key)
			}
		}
	}
}

func TestValidateLimits(t *testing.T) {
	ok := func(p Point) {
		t.Helper()
		if err := Validate(&p); err != nil {
			t.Fatalf("Validate: %v", err)
		}
	}
	bad := func(p Point, want string) {
		t.Helper()
		err := Validate(&p)
		if !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate = %v, want ErrInvalid mentioning %q", err, want)
		}
	}
	f := []Field{{Key: "f", Value: Int(1)}}
	ok(Point{Measurement: "m", Tags: manyTags(MaxTags, true), Fields: f})
	bad(Point{Measurement: "m", Tags: manyTags(MaxTags+1, true), Fields: f}, "tags")

	// A key of exactly MaxKeyLen bytes: "m,k=" + value + " " (the field key
	// excluded here, the engine checks the whole key).
	ok(Point{Measurement: "m", Tags: []Tag{{Key: "k", Value: strings.Repeat("v", MaxKeyLen-5)}}, Fields: f})
	bad(Point{Measurement: "m", Tags: []Tag{{Key: "k", Value: strings.Repeat("v", MaxKeyLen-4)}}, Fields: f}, "series key")
	// Escaping counts: a value of commas doubles.
	bad(Point{Measurement: "m", Tags: []Tag{{Key: "k", Value: strings.Repeat(",", MaxKeyLen/2)}}, Fields: f}, "series key")

	big := strings.Repeat("s", MaxStringLen)
	ok(Point{Measurement: "m", Fields: []Field{{Key: "s", Value: String(big)}}})
	bad(Point{Measurement: "m", Fields: []Field{{Key: "s", Value: String(big + "s")}}}, "string")
	bad(Point{Measurement: "m", Fields: []Field{{Key: "a", Value: String(big)}, {Key: "b", Value: String(big)}}}, "point of")
	bad(Point{Measurement: "m", Fields: []Field{{Key: strings.Repeat("f", MaxKeyLen+1), Value: Int(1)}}}, "field key")

	fields := make([]Field, MaxFields+1)
	for i := range fields {
		fields[i] = Field{Key: fmt.Sprintf("f%06d", len(fields)-i), Value: Int(int64(i))}
	}
	ok(Point{Measurement: "m", Fields: fields[:MaxFields]})
	bad(Point{Measurement: "m", Fields: fields}, "fields")
	bad(Point{Measurement: "m"}, "no fields")
	// Past the pairwise check, a duplicate anywhere is found.
	for _, at := range []int{0, 17, MaxFields - 1} {
		dup := slices.Clone(fields[:MaxFields])
		dup[at].Key = dup[MaxFields/2].Key
		bad(Point{Measurement: "m", Fields: dup}, "duplicate field key")
	}
}

// BenchmarkValidateSeriesTags shows validation time per tag staying about
// flat as the tag count grows (hashing, not pairwise).
func BenchmarkValidateSeriesTags(b *testing.B) {
	for _, n := range []int{16, 64, 256, 1024} {
		p := Point{Measurement: "m", Tags: manyTags(n, true), Fields: []Field{{Key: "f", Value: Int(1)}}}
		b.Run(fmt.Sprint("tags=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ValidateSeries(&p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tag")
		})
	}
}

// BenchmarkDuplicateTagKey is the duplicate check alone, past MaxTags too.
func BenchmarkDuplicateTagKey(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14} {
		tags := manyTags(n, true)
		b.Run(fmt.Sprint("tags=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, dup := duplicateTagKey(tags); dup {
					b.Fatal("duplicate")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tag")
		})
	}
}
