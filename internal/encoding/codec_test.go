package encoding

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestPackedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000} {
		for w := 0; w <= 64; w++ {
			vals := make([]uint64, n)
			for i := range vals {
				if w > 0 {
					vals[i] = rng.Uint64() >> (64 - w)
				}
			}
			enc := AppendPacked([]byte{1, 2}, vals)
			enc = append(enc, 7)
			got, rest, err := DecodePacked([]uint64{42}, enc[2:], n)
			if err != nil {
				t.Fatalf("n=%d w=%d: %v", n, w, err)
			}
			if got[0] != 42 || !slices.Equal(got[1:], vals) {
				t.Fatalf("n=%d w=%d: values differ", n, w)
			}
			if len(rest) != 1 || rest[0] != 7 {
				t.Fatalf("n=%d w=%d: rest %x", n, w, rest)
			}
			// Ending exactly where the values do: the last groups must
			// not load past the end.
			exact := slices.Clip(slices.Clone(enc[2 : len(enc)-1]))
			got, rest, err = DecodePacked(nil, exact, n)
			if err != nil || len(rest) != 0 || !slices.Equal(got, vals) {
				t.Fatalf("n=%d w=%d, exact input: err %v, rest %d", n, w, err, len(rest))
			}
		}
	}
}

func TestPackedSize(t *testing.T) {
	zeros := make([]uint64, 1000)
	if got := len(AppendPacked(nil, zeros)); got != 8 {
		t.Fatalf("1000 zeros take %d bytes, want 8 (one per chunk)", got)
	}
	six := make([]uint64, 128)
	for i := range six {
		six[i] = uint64(i % 50)
	}
	if got := len(AppendPacked(nil, six)); got != 1+96 {
		t.Fatalf("128 6-bit values take %d bytes, want 97", got)
	}
}

func TestPackedMalformed(t *testing.T) {
	cases := []struct {
		name string
		src  []byte
		n    int
	}{
		{"empty", nil, 1},
		{"width over 64", []byte{65, 0, 0}, 1},
		{"short chunk", []byte{8}, 1},
		{"second chunk missing", append([]byte{1}, make([]byte, 16)...), 129},
		{"huge n", []byte{0}, math.MaxInt},
		{"negative n", []byte{0}, -1},
	}
	for _, c := range cases {
		if _, _, err := DecodePacked(nil, c.src, c.n); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", c.name, err)
		}
	}
}

func timestampCases() map[string][]int64 {
	rng := rand.New(rand.NewPCG(5, 6))
	regular := make([]int64, 1000)
	jitter := make([]int64, 1000)
	random := make([]int64, 300)
	for i := range regular {
		regular[i] = 1_700_000_000_000_000_000 + int64(i)*1e9
		jitter[i] = regular[i] + rng.Int64N(10_000_000)
	}
	for i := range random {
		random[i] = int64(rng.Uint64())
	}
	slices.Sort(random)
	return map[string][]int64{
		"empty":    {},
		"one":      {42},
		"two":      {-5, 5},
		"negative": {-3000, -2000, -1000, -1},
		"extremes": {math.MinInt64, -1, 0, 1, math.MaxInt64},
		"span":     {math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64},
		"regular":  regular,
		"jitter":   jitter,
		"random":   random,
		"unsorted": {10, 5, 20, -7, 0, math.MaxInt64, math.MinInt64},
	}
}

func TestTimestampsRoundTrip(t *testing.T) {
	for name, ts := range timestampCases() {
		enc := AppendTimestamps([]byte{0xEE}, ts)
		enc = append(enc, 0xDD)
		got, rest, err := DecodeTimestamps(nil, enc[1:], len(ts))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, ts) {
			t.Fatalf("%s: got %v want %v", name, got, ts)
		}
		if len(rest) != 1 || rest[0] != 0xDD {
			t.Fatalf("%s: rest %x", name, rest)
		}
	}
}

func TestIncreasingTimestamps(t *testing.T) {
	regular := make([]int64, 300)
	for i := range regular {
		regular[i] = int64(i) * 10
	}
	at := func(i int, v int64) []int64 {
		ts := slices.Clone(regular)
		ts[i] = v
		return ts
	}
	for _, tc := range []struct {
		name string
		ts   []int64
		ok   bool
	}{
		{"one", []int64{5}, true},
		{"two", []int64{5, 6}, true},
		{"regular", regular, true},
		{"extremes", []int64{math.MinInt64, 0, math.MaxInt64}, true},
		{"equal pair", []int64{5, 5}, false},
		{"second before first", []int64{6, 5, 7}, false},
		{"equal in the first chunk", at(3, 20), false},
		{"back in a later chunk", at(250, 0), false},
		{"last equal", at(299, 2980), false},
		{"wraps past the largest", []int64{math.MaxInt64 - 1, math.MaxInt64, math.MinInt64}, false},
		{"regular, negative", steps(-5000, 10, 300), true},
		{"regular up to the largest", steps(math.MaxInt64-299, 1, 300), true},
		{"regular, wraps in a chunk", steps(math.MaxInt64-200, 1, 300), false},
		{"regular, wraps at a chunk's end", steps(math.MaxInt64-129, 1, 131), false},
		{"regular, huge step", steps(math.MinInt64, math.MaxInt64/200, 300), true},
		{"regular, huge step wraps", steps(0, math.MaxInt64/200, 300), false},
		{"regular, backwards", steps(5000, -10, 300), false},
		{"regular, standing", steps(5000, 0, 300), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendTimestamps(nil, tc.ts)
			if got, rest, err := DecodeTimestamps(nil, enc, len(tc.ts)); err != nil || len(rest) != 0 || !slices.Equal(got, tc.ts) {
				t.Fatalf("DecodeTimestamps: err %v, rest %d", err, len(rest))
			}
			dst := []int64{42}
			got, rest, err := DecodeIncreasingTimestamps(dst, enc, len(tc.ts))
			if !tc.ok {
				if !errors.Is(err, ErrMalformed) || len(got) != 1 || got[0] != 42 {
					t.Fatalf("err %v, dst %v: want ErrMalformed and dst as it was", err, got[:min(len(got), 3)])
				}
				return
			}
			if err != nil || len(rest) != 0 || !slices.Equal(got[1:], tc.ts) {
				t.Fatalf("err %v, rest %d, got %v", err, len(rest), got[:min(len(got), 3)])
			}
		})
	}
}

// steps returns n timestamps from start, step apart, in wrapping
// arithmetic.
func steps(start, step int64, n int) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = start
		start += step
	}
	return ts
}

func TestTimestampsRegularSize(t *testing.T) {
	ts := timestampCases()["regular"]
	// 9 bytes for t0, 5 for the 1 s delta, one byte per chunk of dods.
	if got := len(AppendTimestamps(nil, ts)); got > 9+5+8 {
		t.Fatalf("1000 regular timestamps take %d bytes", got)
	}
}

func TestTimestampsMalformed(t *testing.T) {
	good := AppendTimestamps(nil, timestampCases()["jitter"])
	for i := range good {
		if _, _, err := DecodeTimestamps(nil, good[:i], 1000); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	if _, _, err := DecodeTimestamps(nil, []byte{0, 0, 0}, math.MaxInt); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge n: %v", err)
	}
}

func floatCases() map[string][]float64 {
	rng := rand.New(rand.NewPCG(7, 8))
	walk := make([]float64, 1000)
	random := make([]float64, 500)
	v := 20.0
	for i := range walk {
		v += rng.Float64()*0.5 - 0.25
		walk[i] = v
		random[i%500] = math.Float64frombits(rng.Uint64())
	}
	return map[string][]float64{
		"empty":    {},
		"one":      {1.5},
		"special":  {math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64, -math.MaxFloat64},
		"nanbits":  {math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000abc), math.NaN()},
		"constant": slices.Repeat([]float64{3.25}, 300),
		"walk":     walk,
		"random":   random,
	}
}

func floatBits(fs []float64) []uint64 {
	out := make([]uint64, len(fs))
	for i, f := range fs {
		out[i] = math.Float64bits(f)
	}
	return out
}

func TestFloatsRoundTrip(t *testing.T) {
	for name, fs := range floatCases() {
		vals := floatBits(fs)
		enc := AppendFloats([]byte{0xEE}, vals)
		enc = append(enc, 0xDD)
		got, rest, err := DecodeFloats(nil, enc[1:], len(vals))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, vals) {
			t.Fatalf("%s: bit patterns differ", name)
		}
		if len(rest) != 1 || rest[0] != 0xDD {
			t.Fatalf("%s: rest %x", name, rest)
		}
	}
}

func TestFloatsMinBits(t *testing.T) {
	for name, fs := range floatCases() {
		vals := floatBits(fs)
		got := 8 * len(AppendFloats(nil, vals))
		lb := FloatsMinBits(vals, math.MaxInt)
		if lb > got {
			t.Errorf("%s: lower bound %d bits above the encoding's %d", name, lb, got)
		}
		if len(vals) > 100 && lb < got/2 {
			t.Errorf("%s: lower bound %d bits is loose against %d", name, lb, got)
		}
		if part := FloatsMinBits(vals, 100); part > lb || (lb > 100+16*130 && part >= lb) {
			t.Errorf("%s: limited bound %d, full %d", name, part, lb)
		}
	}
}

func TestFloatsMalformed(t *testing.T) {
	// '10' (reuse a window) before any window was set.
	w := NewBitWriter(nil)
	w.WriteBits(0, 64)
	w.WriteBits(0b10, 2)
	if _, _, err := DecodeFloats(nil, w.Finish(), 2); !errors.Is(err, ErrMalformed) {
		t.Fatalf("window reuse: %v", err)
	}
	// lead 31 + sig 64 > 64.
	w.WriteBits(0, 64)
	w.WriteBits(0b11<<11|31<<6|63, 13)
	w.WriteBits(0, 64)
	if _, _, err := DecodeFloats(nil, w.Finish(), 2); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad window: %v", err)
	}
	good := AppendFloats(nil, floatBits(floatCases()["walk"]))
	for i := 0; i < len(good); i += 7 {
		if _, _, err := DecodeFloats(nil, good[:i], 1000); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	if _, _, err := DecodeFloats(nil, make([]byte, 9), math.MaxInt); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge n: %v", err)
	}
}

func TestDecimalScale(t *testing.T) {
	tenth := 0.1 // a variable, so the sum is rounded at run time
	cases := []struct {
		vals  []float64
		scale int
		ok    bool
	}{
		{[]float64{1, 2, -3, 1e15}, 0, true},
		{[]float64{20.01, 19.99, 20}, 2, true},
		{[]float64{0.5, 0.25, 0.125}, 3, true},
		{[]float64{1.234567}, 6, true},
		{[]float64{1.2345678}, 0, false},
		{[]float64{tenth + 0.2}, 0, false}, // 0.30000000000000004
		{[]float64{math.NaN()}, 0, false},
		{[]float64{math.Inf(1)}, 0, false},
		{[]float64{math.Copysign(0, -1)}, 0, false},
		{[]float64{1 << 53}, 0, false},
		{[]float64{1<<53 - 1}, 0, true},
		{[]float64{-12.5, 1e-6}, 6, true},
	}
	for _, c := range cases {
		d, ok := DecimalScale(floatBits(c.vals))
		if ok != c.ok || (ok && d != c.scale) {
			t.Errorf("DecimalScale(%v) = %d, %v; want %d, %v", c.vals, d, ok, c.scale, c.ok)
		}
	}
}

func TestDecimalRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	iot := make([]float64, 1000)
	v := 23.0
	for i := range iot {
		v += rng.Float64()*0.5 - 0.25
		iot[i] = math.Round(v*100) / 100
	}
	for name, fs := range map[string][]float64{
		"empty": {}, "one": {-0.5}, "iot": iot, "ints": {1, -1, 1e15, -1e15, 0},
		"micro": {0.000001, 123456.654321, -0.000002},
	} {
		vals := floatBits(fs)
		enc, ok := AppendDecimal([]byte{0xEE}, vals)
		if !ok {
			t.Fatalf("%s: not decimal", name)
		}
		enc = append(enc, 0xDD)
		got, rest, err := DecodeDecimal(nil, enc[1:], len(vals))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, vals) {
			t.Fatalf("%s: bit patterns differ", name)
		}
		if len(rest) != 1 || rest[0] != 0xDD {
			t.Fatalf("%s: rest %x", name, rest)
		}
	}
	// The IoT walk in hundredths moves by at most 25 a step: 6 bits each.
	enc, _ := AppendDecimal(nil, floatBits(iot))
	if len(enc) > 2+3+8+750 {
		t.Fatalf("1000 IoT values take %d bytes", len(enc))
	}
	if gor := AppendFloats(nil, floatBits(iot)); len(gor) <= len(enc) {
		t.Fatalf("Gorilla (%d bytes) beats decimal (%d) on short decimals", len(gor), len(enc))
	}
	if _, ok := AppendDecimal(nil, floatBits([]float64{1, math.Pi})); ok {
		t.Fatal("pi is decimal")
	}
	if _, _, err := DecodeDecimal(nil, []byte{7, 0}, 1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("scale 7: %v", err)
	}
}

func TestIntsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	random := make([]uint64, 700)
	counter := make([]uint64, 700)
	for i := range random {
		random[i] = rng.Uint64()
		counter[i] = uint64(i * 3)
	}
	for name, vals := range map[string][]uint64{
		"empty": {}, "one": {1 << 63},
		"extremes": {uint64(1 << 63), 1<<63 - 1, 0, math.MaxUint64, 1, uint64(1 << 63)},
		"random":   random, "counter": counter,
	} {
		enc := AppendInts([]byte{0xEE}, vals)
		enc = append(enc, 0xDD)
		got, rest, err := DecodeInts([]uint64{5}, enc[1:], len(vals))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got[0] != 5 || !slices.Equal(got[1:], vals) {
			t.Fatalf("%s: values differ", name)
		}
		if len(rest) != 1 || rest[0] != 0xDD {
			t.Fatalf("%s: rest %x", name, rest)
		}
	}
	// Every delta is 3 (zigzag 6, three bits): 1 byte for v0, five full
	// chunks of 1+48 bytes and one of 59 values in 1+23 bytes.
	if got := len(AppendInts(nil, counter)); got != 1+5*49+24 {
		t.Fatalf("counter takes %d bytes", got)
	}
}

func TestBoolsRoundTrip(t *testing.T) {
	for n := range 40 {
		vals := make([]uint64, n)
		for i := range vals {
			vals[i] = uint64(i*7%3) & 1
		}
		enc := AppendBools([]byte{0xEE}, vals)
		if len(enc) != 1+(n+7)/8 {
			t.Fatalf("n=%d: %d bytes", n, len(enc))
		}
		enc = append(enc, 0xDD)
		got, rest, err := DecodeBools(nil, enc[1:], n)
		if err != nil || !slices.Equal(got, vals) || len(rest) != 1 {
			t.Fatalf("n=%d: %v %v %x", n, got, err, rest)
		}
	}
	if _, _, err := DecodeBools(nil, []byte{0x01}, 3); !errors.Is(err, ErrMalformed) {
		t.Fatalf("padding bits: %v", err)
	}
	if _, _, err := DecodeBools(nil, []byte{0}, 9); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short: %v", err)
	}
}

func TestStringsRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	vals := []string{"", "a", "", long, "héllo", "\x00\xff"}
	enc := AppendStrings([]byte{0xEE}, vals)
	enc = append(enc, 0xDD)
	got, rest, err := DecodeStrings(nil, enc[1:], len(vals))
	if err != nil || !slices.Equal(got, vals) || len(rest) != 1 {
		t.Fatalf("got %d strings, %v, rest %x", len(got), err, rest)
	}
	for i := range enc {
		if _, _, err := DecodeStrings(nil, enc[1:i+1], len(vals)); err == nil && i+1 < len(enc)-1 {
			t.Fatalf("truncated to %d: no error", i)
		}
	}
	if _, _, err := DecodeStrings(nil, []byte{5, 'a'}, 1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("overlong: %v", err)
	}
	if _, _, err := DecodeStrings(nil, []byte{0}, 2); !errors.Is(err, ErrMalformed) {
		t.Fatalf("count: %v", err)
	}
}

// TestDecodeAllocatesNothing guards the decoders' scratch buffers, which
// stay on the stack only while every call down to the unpacking loops is
// direct.
func TestDecodeAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ts := make([]int64, 1000)
	vals := make([]uint64, 1000)
	for i := range ts {
		ts[i] = int64(i)*1000 + rng.Int64N(1<<uint(i%40))
		vals[i] = rng.Uint64() >> (i % 64)
	}
	slices.Sort(ts)
	tsEnc := AppendTimestamps(nil, ts)
	packed := AppendPacked(nil, vals)
	intEnc := AppendInts(nil, vals)
	dt := make([]int64, 0, len(ts))
	dv := make([]uint64, 0, len(vals))
	if n := testing.AllocsPerRun(20, func() {
		dt, _, _ = DecodeTimestamps(dt[:0], tsEnc, len(ts))
		dt, _, _ = DecodeIncreasingTimestamps(dt[:0], tsEnc, len(ts))
		dv, _, _ = DecodePacked(dv[:0], packed, len(vals))
		dv, _, _ = DecodeInts(dv[:0], intEnc, len(vals))
	}); n != 0 {
		t.Fatalf("%v allocations a decode", n)
	}
}
