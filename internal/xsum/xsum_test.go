package xsum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// refSum is the exact sum of xs with math/big, rounded to nearest even by
// big.Float, with xsum's rules for NaN and infinities.
func refSum(xs []float64) float64 {
	var n big.Int
	var nan, pinf, ninf bool
	for _, x := range xs {
		switch {
		case math.IsNaN(x):
			nan = true
			continue
		case math.IsInf(x, 1):
			pinf = true
			continue
		case math.IsInf(x, -1):
			ninf = true
			continue
		}
		// x = frac * 2^exp exactly, frac in [0.5, 1): x * 2^1074 is an integer.
		f := new(big.Float).SetFloat64(x)
		f.SetMantExp(f, 1074)
		v, acc := f.Int(nil)
		if acc != big.Exact {
			panic("inexact scaling")
		}
		n.Add(&n, v)
	}
	switch {
	case nan || (pinf && ninf):
		return math.NaN()
	case pinf:
		return math.Inf(1)
	case ninf:
		return math.Inf(-1)
	}
	if n.Sign() == 0 {
		return 0
	}
	f := new(big.Float).SetInt(&n)
	f.SetMantExp(f, -1074)
	r, _ := f.Float64()
	return r
}

func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

func sum(xs []float64) float64 {
	var a, b Acc
	bs := make([]uint64, len(xs))
	for i, x := range xs {
		a.Add(x)
		bs[i] = math.Float64bits(x)
	}
	b.AddBits(bs)
	if got, want := b.AppendBinary(nil), a.AppendBinary(nil); !bytes.Equal(got, want) {
		panic(fmt.Sprintf("AddBits(%v) gives %x, Add %x", xs, got, want))
	}
	return a.Float64()
}

func TestKnownSums(t *testing.T) {
	maxf := math.MaxFloat64
	tiny := math.SmallestNonzeroFloat64
	ulp1 := math.Nextafter(1, 2) - 1 // 2^-52
	f := func(want float64, xs ...float64) {
		t.Helper()
		if got := sum(xs); !same(got, want) {
			t.Errorf("sum(%v) = %v (%#x), want %v (%#x)", xs, got, math.Float64bits(got), want, math.Float64bits(want))
		}
		if ref := refSum(xs); !same(ref, want) {
			t.Errorf("reference sum(%v) = %v, want %v", xs, ref, want)
		}
	}
	f(0)
	f(0, math.Copysign(0, -1))
	f(0, 1, -1)
	f(0.6, 0.1, 0.2, 0.3) // exact 0.60000000000000000555, where time order gives 0.6000000000000001
	f(1, 1e100, 1, -1e100)
	f(1, 1, ulp1/2)                            // tie: to even (1)
	f(1+2*ulp1, 1+ulp1, ulp1/2)                // tie: to even (up)
	f(1+ulp1, 1, ulp1/2, math.Ldexp(1, -1000)) // just above the tie
	f(1, 1, ulp1/2, -math.Ldexp(1, -1000))     // just below the tie
	f(maxf, maxf)
	f(maxf, maxf, maxf, -maxf)
	f(math.Inf(1), maxf, maxf)
	f(math.Inf(-1), -maxf, -maxf)
	f(maxf, maxf, math.Ldexp(1, 969))                                       // below half an ulp
	f(math.Inf(1), maxf, math.Ldexp(1, 970))                                // half an ulp, odd: up
	f(maxf, maxf, math.Ldexp(1, 970), -tiny)                                // just below half
	f(math.Nextafter(maxf, 0), math.Nextafter(maxf, 0), math.Ldexp(1, 970)) // half, even: down
	f(3*tiny, tiny, tiny, tiny)
	f(tiny, 3*tiny, -2*tiny)
	f(math.SmallestNonzeroFloat64*(1<<52), math.Ldexp(1, -1023), math.Ldexp(1, -1023)) // subnormals to the smallest normal
	f(-math.Ldexp(1, -1022), -math.Ldexp(1, -1023), -math.Ldexp(1, -1023))
	f(math.NaN(), 1, math.NaN())
	f(math.NaN(), math.Inf(1), math.Inf(-1))
	f(math.Inf(1), math.Inf(1), -maxf, 1)
	f(math.Inf(-1), math.Inf(-1), math.Inf(-1))
	f(math.Ldexp(1, 1023), maxf, -maxf, math.Ldexp(1, 1023))
}

// gen returns n values from one of several adversarial distributions.
func gen(rng *rand.Rand, kind, n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		var x float64
		switch kind {
		case 0: // any finite bit pattern
			for {
				x = math.Float64frombits(rng.Uint64())
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					break
				}
			}
		case 1: // wide magnitudes, both signs
			x = math.Ldexp(rng.Float64(), rng.IntN(400)-200)
			if rng.IntN(2) == 0 {
				x = -x
			}
		case 2: // subnormals
			x = math.Float64frombits(rng.Uint64N(1 << 52))
			if rng.IntN(2) == 0 {
				x = -x
			}
		case 3: // near the overflow boundary
			x = math.Float64frombits(0x7fe0000000000000 | rng.Uint64N(1<<52))
			if rng.IntN(2) == 0 {
				x = -x
			}
		case 4: // short decimals, like sensor readings
			x = math.Round((rng.Float64()*200-50)*100) / 100
		case 5: // near-ties around one: 1 and half-ulp-sized terms
			x = math.Ldexp(float64(rng.IntN(7)-3), -53-rng.IntN(3))
			if i%4 == 0 {
				x = 1
			}
		}
		xs[i] = x
	}
	if kind == 1 || kind == 4 {
		// Heavy cancellation: append the negations of a random half.
		for i := range n / 2 {
			xs = append(xs, -xs[rng.IntN(i+1)])
		}
	}
	return xs
}

func TestRandomAgainstBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	for round := range 600 {
		kind := round % 6
		xs := gen(rng, kind, 1+rng.IntN(200))
		want := refSum(xs)
		if got := sum(xs); !same(got, want) {
			t.Fatalf("kind %d round %d: sum = %v, want %v (%v)", kind, round, got, want, xs)
		}
		// Any order, any grouping, through the encoding, normalised at
		// random points: the same bits.
		perm := slices.Clone(xs)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if got := sum(perm); !same(got, want) {
			t.Fatalf("kind %d round %d: permuted sum = %v, want %v", kind, round, got, want)
		}
		if got := splitSum(t, rng, perm); !same(got, want) {
			t.Fatalf("kind %d round %d: split sum = %v, want %v", kind, round, got, want)
		}
	}
}

// splitSum sums xs in random runs, each through an Acc that is normalised
// and encoded at random, then merges the runs in random order.
func splitSum(t *testing.T, rng *rand.Rand, xs []float64) float64 {
	t.Helper()
	var parts []Acc
	for len(xs) > 0 {
		k := 1 + rng.IntN(len(xs))
		var a Acc
		for _, x := range xs[:k] {
			a.Add(x)
			if rng.IntN(16) == 0 {
				a.normalize()
			}
		}
		xs = xs[k:]
		if rng.IntN(3) == 0 {
			// Through MergeBinary into a fresh or a started sum.
			var b Acc
			if rng.IntN(2) == 0 {
				b.Add(0x1p-1074)
				b.Add(-0x1p-1074)
			}
			enc := a.AppendBinary(nil)
			if n, err := b.MergeBinary(append(enc, 9)); err != nil || n != len(enc) {
				t.Fatalf("MergeBinary %x: n %d err %v", enc, n, err)
			}
			a = b
		} else if rng.IntN(2) == 0 {
			enc := a.AppendBinary([]byte{0xee})
			b, n, err := DecodeAcc(enc[1:])
			if err != nil || n != len(enc)-1 {
				t.Fatalf("decode %x: n %d err %v", enc[1:], n, err)
			}
			if again := b.AppendBinary(nil); !bytes.Equal(again, enc[1:]) {
				t.Fatalf("re-encoding %x gives %x", enc[1:], again)
			}
			a = b
		}
		parts = append(parts, a)
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	for len(parts) > 1 {
		i := rng.IntN(len(parts) - 1)
		parts[i].Merge(&parts[i+1])
		parts = slices.Delete(parts, i+1, i+2)
	}
	return parts[0].Float64()
}

func TestIsZero(t *testing.T) {
	var a Acc
	if !a.IsZero() {
		t.Fatal("zero value is not zero")
	}
	a.Add(1e300)
	a.Add(3)
	if a.IsZero() {
		t.Fatal("1e300+3 is zero")
	}
	a.Add(-3)
	a.Add(-1e300)
	if !a.IsZero() || a.Float64() != 0 {
		t.Fatalf("cancelled sum: IsZero %v, Float64 %v", a.IsZero(), a.Float64())
	}
	a.Add(math.Inf(1))
	if a.IsZero() {
		t.Fatal("+Inf is zero")
	}
}

func TestEncodingSize(t *testing.T) {
	// A block of 1,000 readings of two decimals: a compact partial.
	rng := rand.New(rand.NewPCG(1, 2))
	var a Acc
	for range 1000 {
		a.Add(math.Round((20+rng.Float64()*5)*100) / 100)
	}
	if n := len(a.AppendBinary(nil)); n > 16 {
		t.Fatalf("encoding takes %d bytes", n)
	}
	var z Acc
	if enc := z.AppendBinary(nil); !bytes.Equal(enc, []byte{encVersion, 0, 0, 0}) {
		t.Fatalf("empty sum encodes as %x", enc)
	}
}

func TestDecodeRejects(t *testing.T) {
	var a Acc
	a.Add(-2.5)
	good := a.AppendBinary(nil)
	f := func(name string, b []byte) {
		t.Helper()
		if _, _, err := DecodeAcc(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s (%x): err %v, want ErrFormat", name, b, err)
		}
	}
	for i := range good {
		f("truncated", good[:i])
	}
	f("version", append([]byte{2}, good[1:]...))
	f("flags", append([]byte{1, 0x10}, good[2:]...))
	f("negative zero", []byte{1, flagNeg, 0, 0})
	f("zero with offset", []byte{1, 0, 5, 0})
	f("leading zero byte", []byte{1, 0, 0, 2, 0, 1})
	f("trailing zero byte", []byte{1, 0, 0, 2, 1, 0})
	f("offset too large", append(binary.AppendUvarint([]byte{1, 0}, maxMagBytes), 1, 1))
	long := binary.AppendUvarint([]byte{1, 0, 0}, maxMagBytes+1)
	f("length too large", append(long, bytes.Repeat([]byte{1}, maxMagBytes+1)...))
	f("varint overflow", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	// The largest magnitude decodes, and trailing bytes are left alone.
	big := append([]byte{1, 0, 0}, binary.AppendUvarint(nil, maxMagBytes)...)
	big = append(big, bytes.Repeat([]byte{0xff}, maxMagBytes)...)
	b, n, err := DecodeAcc(append(big, 7, 7))
	if err != nil || n != len(big) || !math.IsInf(b.Float64(), 1) {
		t.Fatalf("largest magnitude: n %d of %d, err %v, value %v", n, len(big), err, b.Float64())
	}
}

func TestZeroValueMergeAndCopy(t *testing.T) {
	var a, b Acc
	b.Add(1.5)
	a.Merge(&b)
	c := a // a copy is independent
	c.Add(1)
	if a.Float64() != 1.5 || c.Float64() != 2.5 || b.Float64() != 1.5 {
		t.Fatalf("a %v c %v b %v", a.Float64(), c.Float64(), b.Float64())
	}
	var e Acc
	a.Merge(&e)
	if a.Float64() != 1.5 {
		t.Fatalf("merging an empty sum changed a to %v", a.Float64())
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	var a, b Acc
	b.Add(3)
	n := testing.AllocsPerRun(100, func() {
		a.Add(1.25)
		a.Merge(&b)
		_ = a.Float64()
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

func floatsOf(data []byte) []float64 {
	xs := make([]float64, 0, len(data)/8)
	for len(data) >= 8 {
		xs = append(xs, math.Float64frombits(binary.LittleEndian.Uint64(data)))
		data = data[8:]
	}
	return xs
}

func FuzzDecodeAcc(f *testing.F) {
	for _, xs := range [][]float64{{}, {1}, {-2.5, 1e-310}, {math.MaxFloat64, math.MaxFloat64}, {math.NaN()}, {math.Inf(-1), 3}} {
		var a Acc
		for _, x := range xs {
			a.Add(x)
		}
		f.Add(a.AppendBinary(nil))
	}
	f.Add([]byte{1, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, n, err := DecodeAcc(data)
		if m, lerr := EncodedLen(data); m != n || (lerr == nil) != (err == nil) {
			t.Fatalf("EncodedLen %d, %v; DecodeAcc %d, %v", m, lerr, n, err)
		}
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		if n < 4 || n > len(data) {
			t.Fatalf("consumed %d of %d", n, len(data))
		}
		if enc := a.AppendBinary(nil); !bytes.Equal(enc, data[:n]) {
			t.Fatalf("re-encoding %x gives %x", data[:n], enc)
		}
		// A decoded sum behaves as one built by Add: doubling it through
		// Merge equals adding it twice through the encoding.
		v := a.Float64()
		b := a
		b.Merge(&a)
		c, _, _ := DecodeAcc(data)
		if m, err := c.MergeBinary(data); m != n || err != nil {
			t.Fatalf("MergeBinary: %d, %v", m, err)
		}
		if !same(b.Float64(), c.Float64()) || !bytes.Equal(b.AppendBinary(nil), c.AppendBinary(nil)) {
			t.Fatalf("merge of %x: %v vs %v", data[:n], b.Float64(), c.Float64())
		}
		if !math.IsNaN(v) && !math.IsInf(v, 0) && a.IsZero() != (v == 0 && a.special == 0) {
			t.Fatalf("IsZero %v for %v", a.IsZero(), v)
		}
	})
}

func FuzzAddMerge(f *testing.F) {
	seed := func(xs ...float64) []byte {
		var b []byte
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		return b
	}
	f.Add(seed(0.1, 0.2, 0.3), uint8(1))
	f.Add(seed(1, math.Ldexp(1, -53), math.Ldexp(1, -53)), uint8(2))
	f.Add(seed(math.MaxFloat64, math.Ldexp(1, 970), -math.SmallestNonzeroFloat64), uint8(1))
	f.Add(seed(1e308, -1e308, 5e-324, math.Inf(1)), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		xs := floatsOf(data)
		want := refSum(xs)
		if got := sum(xs); !same(got, want) {
			t.Fatalf("sum(%v) = %v, want %v", xs, got, want)
		}
		rev := slices.Clone(xs)
		slices.Reverse(rev)
		if got := sum(rev); !same(got, want) {
			t.Fatalf("reversed sum(%v) = %v, want %v", xs, got, want)
		}
		k := 0
		if len(xs) > 0 {
			k = int(split) % (len(xs) + 1)
		}
		var a, b Acc
		for _, x := range xs[:k] {
			a.Add(x)
		}
		for _, x := range xs[k:] {
			b.Add(x)
		}
		c, _, err := DecodeAcc(b.AppendBinary(nil))
		if err != nil {
			t.Fatal(err)
		}
		a.Merge(&c)
		if got := a.Float64(); !same(got, want) {
			t.Fatalf("split at %d of %v: %v, want %v", k, xs, got, want)
		}
	})
}

func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = math.Round((rng.Float64()*200-50)*100) / 100
	}
	var a Acc
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Add(xs[i&4095])
	}
	_ = a.Float64()
}

func BenchmarkAddBits(b *testing.B) {
	for _, c := range []struct {
		name     string
		lo, span float64
	}{{"narrow", 15, 20}, {"wide", -50, 200}} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			xs := make([]uint64, 60) // a minute of readings
			for i := range xs {
				xs[i] = math.Float64bits(math.Round((c.lo+rng.Float64()*c.span)*100) / 100)
			}
			var a Acc
			b.ReportAllocs()
			for b.Loop() {
				a.AddBits(xs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/value")
		})
	}
}

func BenchmarkMergeDecoded(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var p Acc
	for range 1000 {
		p.Add(math.Round((rng.Float64()*200-50)*100) / 100)
	}
	enc := p.AppendBinary(nil)
	var a Acc
	b.ReportAllocs()
	for b.Loop() {
		c, _, _ := DecodeAcc(enc)
		a.Merge(&c)
	}
}

func BenchmarkMergeBinary(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var p Acc
	for range 1000 {
		p.Add(math.Round((rng.Float64()*200-50)*100) / 100)
	}
	enc := p.AppendBinary(nil)
	var a Acc
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.MergeBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloat64(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var a Acc
	for range 1000 {
		a.Add(math.Round((rng.Float64()*200-50)*100) / 100)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Float64()
	}
}

func TestLazyCarries(t *testing.T) {
	// Near the carry threshold, Add and Merge propagate carries first;
	// the sum is unchanged and the pending count restarts.
	var a, b Acc
	for _, x := range []float64{1e20, -3.25, 7e-300} {
		a.Add(x)
		b.Add(-x / 2)
	}
	want := refSum([]float64{1e20, -3.25, 7e-300, -1e20 / 2, 3.25 / 2, -7e-300 / 2, 1})
	a.pending = normEvery - 1
	b.pending = normEvery - 1
	a.Merge(&b)
	if a.pending >= normEvery {
		t.Fatalf("pending %d after merge", a.pending)
	}
	a.pending = normEvery - 1
	a.Add(1)
	if a.pending != 0 {
		t.Fatalf("pending %d after the threshold", a.pending)
	}
	if got := a.Float64(); !same(got, want) {
		t.Fatalf("sum %v, want %v", got, want)
	}
}

// TestAddBitsLong adds more values than one register chunk holds, narrow
// and near the exponent limit of the register path, against math/big.
func TestAddBitsLong(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, scale := range []float64{1, -1, 0x1p800, 0x1p820, 0x1p-1060} {
		xs := make([]float64, fastChunk+1234)
		for i := range xs {
			xs[i] = scale * (1 + rng.Float64()*500)
			if i%3 == 0 {
				xs[i] = -xs[i]
			}
		}
		if got, want := sum(xs), refSum(xs); !same(got, want) {
			t.Fatalf("scale %g: %v, want %v", scale, got, want)
		}
	}
}

// viaAcc is what AppendSum must append: AddBits on an empty Acc, then
// AppendBinary.
func viaAcc(bs []uint64) []byte {
	var a Acc
	a.AddBits(bs)
	return a.AppendBinary([]byte{0xee})
}

func bitsOf(xs []float64) []uint64 {
	bs := make([]uint64, len(xs))
	for i, x := range xs {
		bs[i] = math.Float64bits(x)
	}
	return bs
}

// AppendSum appends exactly what an Acc would, on its direct path (narrow
// exponents: short decimals, values of one binade, exact cancellation to
// zero, subnormals, every bit offset within a byte) and off it (wide
// spans, NaN and infinities), and the encoding decodes to the same sum.
func TestAppendSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(what string, xs []float64) {
		t.Helper()
		bs := bitsOf(xs)
		want := viaAcc(bs)
		got := AppendSum([]byte{0xee}, bs)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %v: AppendSum % x, Acc % x", what, xs, got, want)
		}
	}
	check("empty", nil)
	check("zero", []float64{0, math.Copysign(0, -1)})
	check("cancel", []float64{1.5, 2.25, -1.5, -2.25})
	check("negative", []float64{-0.1, -0.2, -0.3})
	check("one", []float64{1})
	check("subnormals", []float64{math.SmallestNonzeroFloat64, 3 * math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64})
	check("nan", []float64{1, math.NaN()})
	check("inf", []float64{1, math.Inf(-1)})
	check("wide", []float64{1, 1e-10})
	check("top of the fast range", []float64{math.Ldexp(1, fastMaxExp-1075), math.Ldexp(1.75, fastMaxExp-1075)})
	// Every bit offset within a byte, both signs.
	for e := -1074; e < -1074+64; e++ {
		check("offset", []float64{math.Ldexp(1, e), math.Ldexp(-3, e)})
	}
	for round := range 3000 {
		kind := round % 6
		n := 1 + rng.IntN(40)
		if round%100 == 0 {
			n = fastChunk + rng.IntN(3) - 1 // around the chunk bound
		}
		check("random", gen(rng, kind, n))
		// Values of one binade with random signs: the direct path.
		xs := make([]float64, n)
		e := rng.IntN(2000) - 1074
		for i := range xs {
			xs[i] = math.Ldexp(1+rng.Float64(), e+rng.IntN(fastSpan+1))
			if rng.IntN(3) == 0 {
				xs[i] = -xs[i]
			}
		}
		check("binade", xs)
	}
}

func FuzzAppendSum(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, math.Float64bits(21.5)))
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1)), math.Float64bits(-0.1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		bs := bitsOf(floatsOf(data))
		if got, want := AppendSum([]byte{0xee}, bs), viaAcc(bs); !bytes.Equal(got, want) {
			t.Fatalf("%x: AppendSum % x, Acc % x", bs, got, want)
		}
	})
}

func BenchmarkAppendSum(b *testing.B) {
	for _, n := range []int{1, 3, 120} {
		bs := bitsOf(gen(rand.New(rand.NewPCG(1, 1)), 4, n)[:n])
		b.Run(fmt.Sprintf("n=%d/acc", n), func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, 64)
			for b.Loop() {
				var a Acc
				a.AddBits(bs)
				dst = a.AppendBinary(dst[:0])
			}
		})
		b.Run(fmt.Sprintf("n=%d/direct", n), func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, 64)
			for b.Loop() {
				dst = AppendSum(dst[:0], bs)
			}
		})
	}
}
