package forward

import (
	"bytes"
	"errors"
	"testing"
)

// The counted file round-trips, and damage to any byte is refused.
func TestCountedRoundTrip(t *testing.T) {
	spans := []span{{1, 5}, {9, 12}, {1 << 40, 1<<40 + 7}}
	b := marshalCounted(spans)
	got, err := unmarshalCounted(b)
	if err != nil || len(got) != len(spans) {
		t.Fatalf("%v %v", got, err)
	}
	for i := range spans {
		if got[i] != spans[i] {
			t.Fatalf("span %d: %v, want %v", i, got[i], spans[i])
		}
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 1
		if _, err := unmarshalCounted(bad); !errors.Is(err, errQueueCorrupt) {
			t.Errorf("flip byte %d: %v", i, err)
		}
	}
}

// addSpan merges what touches; uncounted subtracts what is covered.
func TestSpans(t *testing.T) {
	var s []span
	s = addSpan(s, 10, 20)
	s = addSpan(s, 30, 40)
	s = addSpan(s, 20, 25) // touches the first
	s = addSpan(s, 5, 6)
	if want := []span{{5, 6}, {10, 25}, {30, 40}}; len(s) != 3 || s[0] != want[0] || s[1] != want[1] || s[2] != want[2] {
		t.Fatalf("spans %v, want %v", s, want)
	}
	if n := uncounted(s, 0, 50); n != 50-1-15-10 {
		t.Fatalf("uncounted %d", n)
	}
	if n := uncounted(s, 12, 24); n != 0 {
		t.Fatalf("uncounted inside a span: %d", n)
	}
	s = addSpan(s, 0, 100)
	if len(s) != 1 || s[0] != (span{0, 100}) {
		t.Fatalf("spans %v", s)
	}
	if p := pruneSpans([]span{{1, 2}, {3, 9}, {10, 12}}, 9); len(p) != 1 || p[0] != (span{10, 12}) {
		t.Fatalf("pruned %v", p)
	}
	var many []span
	for i := range uint64(countedMax + 5) {
		many = addSpan(many, 3*i, 3*i+1)
	}
	if len(many) != countedMax || many[0].lo != 0 {
		t.Fatalf("%d spans from %d, want %d from 0", len(many), many[0].lo, countedMax)
	}
}

func FuzzCounted(f *testing.F) {
	f.Add(marshalCounted(nil))
	f.Add(marshalCounted([]span{{1, 5}, {9, 12}}))
	f.Add([]byte("SFWL\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, err := unmarshalCounted(b)
		if err != nil {
			return
		}
		if !bytes.Equal(marshalCounted(spans), b) {
			t.Fatalf("counted %x does not round-trip", b)
		}
	})
}
