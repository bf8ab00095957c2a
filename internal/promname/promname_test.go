package promname

import (
	"regexp"
	"testing"
	"unicode/utf8"
)

// Cases the query API and the forwarder both depend on: one '_' per
// character (a multi-byte character is one '_', an invalid byte one each),
// no leading digit, ':' only in metric names, "" as "_".
func TestSanitize(t *testing.T) {
	for _, c := range []struct {
		in     string
		colons bool
		want   string
	}{
		{"temp", false, "temp"},
		{"tempé", false, "temp_"},
		{"é", false, "_"},
		{"é1", false, "_1"},
		{"日本", false, "__"},
		{"\U0001F600x", false, "_x"},
		{"a\xffb", false, "a_b"},
		{"\xff\xfe", false, "__"},
		{"\xc3", false, "_"}, // a truncated 2-byte sequence
		{"1a", false, "_a"},
		{"9", false, "_"},
		{"a1", false, "a1"},
		{"_1", false, "_1"},
		{"", false, "_"},
		{"", true, "_"},
		{"__name__", false, "__name__"},
		{"__x", false, "__x"},
		{"a:b", false, "a_b"},
		{"a:b", true, "a:b"},
		{":a", true, ":a"},
		{"a.b-c d", false, "a_b_c_d"},
		{"a\x00b", false, "a_b"},
		{"m-x_é", true, "m_x__"},
	} {
		if got := Sanitize(c.in, c.colons); got != c.want {
			t.Errorf("Sanitize(%q, %v) = %q, want %q", c.in, c.colons, got, c.want)
		}
		if !c.colons {
			if got := Label(c.in); got != c.want {
				t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
			}
		}
	}
}

func TestMetric(t *testing.T) {
	for _, c := range []struct{ m, f, want string }{
		{"cpu", "value", "cpu"},
		{"cpu", "usage", "cpu_usage"},
		{"cpu.load", "value", "cpu.load"}, // not sanitized
		{"m", "f-x", "m_f-x"},
		{"", "value", ""},
	} {
		if got := Metric(c.m, c.f); got != c.want {
			t.Errorf("Metric(%q, %q) = %q, want %q", c.m, c.f, got, c.want)
		}
	}
}

// Over every string of up to two bytes and many of four: the result is a
// valid name, one byte per character of the input, and a fixed point.
func TestSanitizeProperties(t *testing.T) {
	label := regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	metric := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	check := func(s string) {
		for _, colons := range []bool{false, true} {
			got := Sanitize(s, colons)
			re := label
			if colons {
				re = metric
			}
			if !re.MatchString(got) {
				t.Fatalf("Sanitize(%q, %v) = %q: not a valid name", s, colons, got)
			}
			if n := max(1, utf8.RuneCountInString(s)); len(got) != n {
				t.Fatalf("Sanitize(%q, %v) = %q: %d bytes, want %d", s, colons, got, len(got), n)
			}
			if re.MatchString(s) && got != s {
				t.Fatalf("Sanitize(%q, %v) = %q: a valid name changed", s, colons, got)
			}
			if again := Sanitize(got, colons); again != got {
				t.Fatalf("Sanitize(%q, %v) = %q, not a fixed point", got, colons, again)
			}
		}
	}
	check("")
	for i := range 256 {
		check(string([]byte{byte(i)}))
		for j := range 256 {
			check(string([]byte{byte(i), byte(j)}))
		}
	}
	set := []byte{0, '0', '9', ':', '_', 'a', 'Z', '-', '.', 0x7f, 0x80, 0xbf, 0xc3, 0xa9, 0xe6, 0x97, 0xa5, 0xf0, 0x9f, 0xff}
	for _, a := range set {
		for _, b := range set {
			for _, c := range set {
				for _, d := range set {
					check(string([]byte{a, b, c, d}))
				}
			}
		}
	}
}
