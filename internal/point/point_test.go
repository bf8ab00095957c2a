package point

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/stratadb/strata/internal/base"
)

func TestSeriesKey(t *testing.T) {
	f := func(m string, tags []Tag, field, want string) {
		t.Helper()
		got := SeriesKey(m, tags, field)
		if got != want {
			t.Errorf("SeriesKey(%q, %v, %q) = %q, want %q", m, tags, field, got, want)
		}
		pm, ptags, pf, err := ParseSeriesKey([]byte(got))
		if err != nil {
			t.Fatalf("ParseSeriesKey(%q): %v", got, err)
		}
		if pm != m || pf != field || !slices.Equal(ptags, tags) {
			t.Errorf("ParseSeriesKey(%q) = %q %v %q, want %q %v %q", got, pm, ptags, pf, m, tags, field)
		}
	}
	f("cpu", nil, "usage", "cpu usage")
	f("cpu", []Tag{{"host", "a"}, {"region", "eu"}}, "idle", "cpu,host=a,region=eu idle")
	f("my cpu,x", []Tag{{"k=1", "v 2,3"}}, "f=x y", `my\ cpu\,x,k\=1=v\ 2\,3 f\=x\ y`)
	f(`back\slash`, []Tag{{`a\`, `\b`}}, `c\`, `back\\slash,a\\=\\b c\\`)
	f("météo", []Tag{{"ville", "Zürich"}}, "température", "météo,ville=Zürich température")
	f("m=eq", nil, "f", `m=eq f`)
}

func TestParseSeriesKeyRejectsGarbage(t *testing.T) {
	for _, k := range []string{"", "cpu", `cpu\`, "cpu,host usage", "cpu,host=a", `cpu usage\`} {
		if _, _, _, err := ParseSeriesKey([]byte(k)); err == nil {
			t.Errorf("ParseSeriesKey(%q) succeeded", k)
		}
	}
}

func FuzzSeriesKey(f *testing.F) {
	f.Add("cpu", "host", "a", "usage")
	f.Add(`a\ ,=`, `=\`, ` ,`, `\\`)
	f.Fuzz(func(t *testing.T, m, k, v, field string) {
		tags := []Tag{{k, v}}
		key := AppendSeriesKey(nil, m, tags, field)
		pm, ptags, pf, err := ParseSeriesKey(key)
		if err != nil {
			t.Fatalf("parse %q: %v", key, err)
		}
		if pm != m || pf != field || !slices.Equal(ptags, tags) {
			t.Fatalf("round trip of %q: got %q %v %q", key, pm, ptags, pf)
		}
		ParseSeriesKey([]byte(m + k + v + field)) // must not panic
	})
}

func TestValueAccessors(t *testing.T) {
	f := func(v Value, kind Kind, s string) {
		t.Helper()
		if v.Kind() != kind {
			t.Errorf("%v: kind %v, want %v", v, v.Kind(), kind)
		}
		if v.String() != s {
			t.Errorf("String() = %q, want %q", v.String(), s)
		}
		if !v.Equal(v) {
			t.Errorf("%v not equal to itself", v)
		}
		if FromBits(kind, v.Bits()).Equal(v) != (kind != KindString) {
			t.Errorf("FromBits round trip of %v", v)
		}
	}
	f(Float(1.5), KindFloat, "1.5")
	f(Float(math.NaN()), KindFloat, "NaN")
	f(Int(math.MinInt64), KindInt, "-9223372036854775808")
	f(Uint(math.MaxUint64), KindUint, "18446744073709551615")
	f(Bool(true), KindBool, "true")
	f(Bool(false), KindBool, "false")
	f(String("héllo"), KindString, "héllo")

	if Float(2).Int() != 0 || Int(2).Float() != 0 || String("x").Bool() || Int(1).Str() != "" || Bool(true).Uint() != 0 {
		t.Error("accessor of another kind must return the zero value")
	}
	if Int(1).Equal(Uint(1)) || Float(1).Equal(Int(1)) || String("a").Equal(String("b")) {
		t.Error("Equal across kinds or values")
	}
	if !Float(0).Equal(Float(math.Copysign(0, -1))) {
		t.Error("0 and -0 compare equal as numbers")
	}
	if (Value{}).Kind() != KindInvalid || (Value{}).String() != "<invalid>" {
		t.Error("zero Value must be invalid")
	}
}

func TestValidate(t *testing.T) {
	ok := Point{Measurement: "m", Tags: []Tag{{"b", "1"}, {"a", "2"}}, Fields: []Field{{"f", Float(1)}}}
	if err := Validate(&ok); err != nil {
		t.Fatalf("valid point: %v", err)
	}
	bad := func(name string, mut func(p *Point)) {
		t.Helper()
		p := ok
		p.Tags = slices.Clone(ok.Tags)
		p.Fields = slices.Clone(ok.Fields)
		mut(&p)
		if err := Validate(&p); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	bad("empty measurement", func(p *Point) { p.Measurement = "" })
	bad("newline measurement", func(p *Point) { p.Measurement = "a\nb" })
	bad("no fields", func(p *Point) { p.Fields = nil })
	bad("nan", func(p *Point) { p.Fields[0].Value = Float(math.NaN()) })
	bad("inf", func(p *Point) { p.Fields[0].Value = Float(math.Inf(-1)) })
	bad("zero value", func(p *Point) { p.Fields[0].Value = Value{} })
	bad("empty tag key", func(p *Point) { p.Tags[0].Key = "" })
	bad("empty tag value", func(p *Point) { p.Tags[0].Value = "" })
	bad("dup tag", func(p *Point) { p.Tags[1].Key = "b" })
	bad("newline tag key", func(p *Point) { p.Tags[0].Key = "x\n" })
	bad("newline tag value", func(p *Point) { p.Tags[0].Value = "x\n" })
	bad("empty field key", func(p *Point) { p.Fields[0].Key = "" })
	bad("newline field key", func(p *Point) { p.Fields[0].Key = "\nf" })
	bad("dup field", func(p *Point) { p.Fields = append(p.Fields, Field{"f", Int(1)}) })
}

func TestSelectorTimeRange(t *testing.T) {
	for _, c := range []struct {
		s          Selector
		mint, maxt int64
	}{
		{Selector{}, math.MinInt64, math.MaxInt64},
		{Selector{Start: 5, End: 10}, 5, 9},
		{Selector{Start: math.MinInt64, End: math.MaxInt64}, math.MinInt64, math.MaxInt64 - 1},
		{Selector{Start: 0, End: 1}, 0, 0},
	} {
		if lo, hi := c.s.TimeRange(); lo != c.mint || hi != c.maxt {
			t.Errorf("%+v: [%d, %d], want [%d, %d]", c.s, lo, hi, c.mint, c.maxt)
		}
	}
	all := Selector{}
	if !all.Covers(math.MaxInt64) || !all.Covers(math.MinInt64) {
		t.Error("all time does not cover the int64 extremes")
	}
}
