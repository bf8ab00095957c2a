package lineproto

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestParseSimpleFloat checks the fast path against strconv.ParseFloat.
func TestParseSimpleFloat(t *testing.T) {
	f := func(s string, simple bool) {
		t.Helper()
		got, ok := parseSimpleFloat([]byte(s))
		if ok != simple {
			t.Fatalf("parseSimpleFloat(%q) ok = %v, want %v", s, ok, simple)
		}
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseSimpleFloat(%q) = %v (%x), strconv gives %v (%x), %v", s, got, math.Float64bits(got), want, math.Float64bits(want), err)
		}
	}
	for _, s := range []string{"0", "-0", "1", "1.", ".5", "-.5", "20.13", "-0.001", "123456789012345",
		"0.00000000000001", "999999999999999", "1.23456789012345", "-98765.4321", "0.1", "0.3", "00012.5000"} {
		f(s, true)
	}
	for _, s := range []string{"", "-", ".", "-.", "1.2.3", "1e5", "1E5", "1234567890123456", "0.1234567890123456", "0.000000000000001",
		"+1", "1-", "0x1p3", "NaN", "1_0", "--1"} {
		f(s, false)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		digits := 1 + r.IntN(15)
		s := strconv.FormatUint(r.Uint64N(uint64(math.Pow10(digits))), 10)
		if p := r.IntN(len(s) + 1); p < len(s) {
			s = s[:p] + "." + s[p:]
		}
		if r.IntN(2) == 0 {
			s = "-" + s
		}
		f(s, true)
	}
}

func TestAtoi(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var random []string
	for range 100_000 {
		s := strconv.FormatUint(r.Uint64()>>r.IntN(64), 10)
		if r.IntN(2) == 0 {
			s = "-" + s
		}
		if r.IntN(4) == 0 { // a byte that is not a digit
			b := []byte(s)
			b[r.IntN(len(b))] = byte(r.IntN(256))
			s = string(b)
		}
		random = append(random, s)
	}
	for _, s := range append(random, []string{"0", "-0", "7", "007", "-1", "1700000000000000000", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "-9223372036854775809", "99999999999999999999",
		"", "-", "--1", "1-", "12a", "+5", "18446744073709551616", "1234567/", "1234567:", "0000000000000000001",
		"-9223372036854775807", "12345678", "123456789", "1234567a9", "12345678901234567a"}...) {
		got, err := atoi([]byte(s))
		want, werr := strconv.ParseInt(s, 10, 64)
		if got != want || (err == nil) != (werr == nil) {
			t.Errorf("atoi(%q) = %d, %v; strconv: %d, %v", s, got, err, want, werr)
		}
	}
}

// BenchmarkAtoi parses nanosecond timestamps, as the baseline has them.
func BenchmarkAtoi(b *testing.B) {
	ts := []byte("1700000000123456789")
	for b.Loop() {
		if _, err := atoi(ts); err != nil {
			b.Fatal(err)
		}
	}
}

// atou parses what strconv.ParseUint parses, with the same values and
// errors (its sentinels), allocating nothing.
func TestAtou(t *testing.T) {
	for _, s := range []string{"0", "7", "007", "18446744073709551615", "18446744073709551616",
		"99999999999999999999999", "", "-1", "+1", "1a", "a", "12345678901234567890"} {
		got, err := atou([]byte(s))
		want, werr := strconv.ParseUint(s, 10, 64)
		if werr != nil {
			werr = werr.(*strconv.NumError).Err
		}
		if got != want || err != werr {
			t.Errorf("atou(%q) = %d, %v; strconv: %d, %v", s, got, err, want, werr)
		}
	}
	if n := testing.AllocsPerRun(10, func() { atoi([]byte("99999999999999999999999")) }); n != 0 {
		t.Errorf("atoi out of range allocates %v", n)
	}
}

// overflows says out of range only where strconv.ParseFloat does.
func TestOverflows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []string{"1e309", "1e308", "9e308", "10e308", "0.1e310", "0.01e310", "-1e999", "1e-999",
		"0e999", "1.5", ".5e400", "5.e400", "1e", "1e+", "e5", "1e5x", "0x1p9999", "inf", "1_0e400", "000123e306", "0.000e400"}
	for range 2000 {
		var b []byte
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		for range r.IntN(4) {
			b = append(b, byte('0'+r.IntN(10)))
		}
		if r.IntN(2) == 0 {
			b = append(b, '.')
			for range r.IntN(4) {
				b = append(b, byte('0'+r.IntN(10)))
			}
		}
		b = append(b, 'e')
		b = strconv.AppendInt(b, int64(r.IntN(40)+290), 10)
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		_, err := strconv.ParseFloat(s, 64)
		if overflows([]byte(s)) && !errors.Is(err, strconv.ErrRange) {
			t.Errorf("overflows(%q) but strconv: %v", s, err)
		}
	}
	for _, s := range []string{"1e309", "0.1e310", "-1e999", ".5e400", "5.e400", "00012e308", "1e99999999999999999999"} {
		if !overflows([]byte(s)) {
			t.Errorf("overflows(%q) = false", s)
		}
	}
}
