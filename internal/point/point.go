// Package point defines strata's data model: points, tags, fields, typed
// values, samples and the canonical series key. Package engine re-exports
// these types with aliases; leaf packages (wal, memtable, segment,
// compaction, lineproto) import this package instead of engine.
package point

import (
	"cmp"
	"math"
	"strconv"
)

// Kind is the type of a field's values. A series' kind is fixed by its first
// write. The numeric values are part of the durable formats (WAL records,
// segment indexes) and must not be changed.
type Kind uint8

const (
	KindInvalid Kind = 0 // the zero Value; never stored
	KindFloat   Kind = 1
	KindInt     Kind = 2
	KindUint    Kind = 3
	KindBool    Kind = 4
	KindString  Kind = 5
)

// Valid reports whether k is one of the five storable kinds.
func (k Kind) Valid() bool { return k >= KindFloat && k <= KindString }

// Numeric reports whether sum, mean, min and max apply to k.
func (k Kind) Numeric() bool { return k == KindFloat || k == KindInt || k == KindUint }

func (k Kind) String() string {
	switch k {
	case KindFloat:
		return "float"
	case KindInt:
		return "int"
	case KindUint:
		return "uint"
	case KindBool:
		return "bool"
	case KindString:
		return "string"
	}
	return "invalid"
}

// Value is a field value of one of the five kinds. The zero Value has
// KindInvalid. Numbers and booleans live in n (floats as IEEE-754 bits);
// strings in s.
type Value struct {
	s    string
	n    uint64
	kind Kind
}

func Float(v float64) Value { return Value{n: math.Float64bits(v), kind: KindFloat} }
func Int(v int64) Value     { return Value{n: uint64(v), kind: KindInt} }
func Uint(v uint64) Value   { return Value{n: v, kind: KindUint} }
func String(v string) Value { return Value{s: v, kind: KindString} }
func Bool(v bool) Value {
	if v {
		return Value{n: 1, kind: KindBool}
	}
	return Value{kind: KindBool}
}

// FromBits builds a non-string value of kind k from its 64-bit payload (the
// encoding returned by Bits). Codecs use it to avoid a switch per sample.
func FromBits(k Kind, bits uint64) Value { return Value{n: bits, kind: k} }

// SetBits makes *v the non-string value of kind k with payload bits, as
// *v = FromBits(k, bits) does, without writing v's string pointer unless
// it holds one. Filling a fresh slice of samples this way costs no GC
// write barrier per sample: while a collection runs, storing even a nil
// pointer goes through one, and decoding a block is mostly such stores.
func (v *Value) SetBits(k Kind, bits uint64) {
	if v.s != "" {
		v.s = ""
	}
	v.n, v.kind = bits, k
}

// Bits returns the 64-bit payload of a non-string value: IEEE-754 bits for a
// float, two's complement for an int, the value for a uint, 0 or 1 for a bool.
func (v Value) Bits() uint64 { return v.n }

// Kind returns the kind of v.
func (v Value) Kind() Kind { return v.kind }

// Float returns v as a float64, or 0 when v is another kind.
func (v Value) Float() float64 {
	if v.kind != KindFloat {
		return 0
	}
	return math.Float64frombits(v.n)
}

// Int returns v as an int64, or 0 when v is another kind.
func (v Value) Int() int64 {
	if v.kind != KindInt {
		return 0
	}
	return int64(v.n)
}

// Uint returns v as a uint64, or 0 when v is another kind.
func (v Value) Uint() uint64 {
	if v.kind != KindUint {
		return 0
	}
	return v.n
}

// Bool returns v as a bool, or false when v is another kind.
func (v Value) Bool() bool { return v.kind == KindBool && v.n != 0 }

// Str returns v as a string, or "" when v is another kind.
func (v Value) Str() string {
	if v.kind != KindString {
		return ""
	}
	return v.s
}

// String formats v for people: floats in the shortest form that round-trips,
// integers in decimal, booleans as true/false, strings as they are.
func (v Value) String() string {
	switch v.kind {
	case KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case KindInt:
		return strconv.FormatInt(int64(v.n), 10)
	case KindUint:
		return strconv.FormatUint(v.n, 10)
	case KindBool:
		return strconv.FormatBool(v.n != 0)
	case KindString:
		return v.s
	}
	return "<invalid>"
}

// Equal reports whether v and w have the same kind and value. Floats compare
// numerically, except that NaN equals NaN.
func (v Value) Equal(w Value) bool {
	if v.kind != w.kind {
		return false
	}
	switch v.kind {
	case KindFloat:
		a, b := v.Float(), w.Float()
		return a == b || (a != a && b != b)
	case KindString:
		return v.s == w.s
	}
	return v.n == w.n
}

// Tag is a key=value pair that identifies a series.
type Tag struct{ Key, Value string }

// Field is one named value of a point.
type Field struct {
	Key   string
	Value Value
}

// Point is one measurement at one time: a tag set and one or more fields.
type Point struct {
	Measurement string
	Tags        []Tag   // any order; duplicate keys are an error
	Fields      []Field // at least one
	Time        int64   // Unix ns
}

// Sample is one timestamped value of a series.
type Sample struct {
	Time  int64
	Value Value
}

// Selector picks series and a half-open time range.
type Selector struct {
	Measurement string    // required for Query and Delete; "" = every measurement for the metadata calls
	Field       string    // "" = every field
	Tags        []Tag     // exact-match filters, ANDed; empty = every series of the measurement
	Matchers    []Matcher // more filters, ANDed with Tags
	Start, End  int64     // half-open [Start, End) in Unix ns; Start == End == 0 means all time
}

// MatchOp is the operator of a Matcher.
type MatchOp uint8

// Match operators, as PromQL's label matchers.
const (
	MatchEqual     MatchOp = iota // =
	MatchNotEqual                 // !=
	MatchRegexp                   // =~
	MatchNotRegexp                // !~
)

var matchOpNames = [...]string{"=", "!=", "=~", "!~"}

func (op MatchOp) String() string {
	if int(op) < len(matchOpNames) {
		return matchOpNames[op]
	}
	return "MatchOp(" + strconv.Itoa(int(op)) + ")"
}

// Matcher filters series by one tag, as a PromQL label matcher: a series
// that lacks the tag key has the value "" for it, and a regexp (RE2 syntax)
// must match the whole value.
type Matcher struct {
	Key   string
	Op    MatchOp // MatchEqual (the zero value), MatchNotEqual, MatchRegexp, MatchNotRegexp
	Value string
}

// Entry is one sample of the series with the given id: the unit the WAL logs
// and the memtable stores. Series ids are assigned by the engine, densely from 0.
type Entry struct {
	ID    uint64
	Time  int64
	Value Value
}

// Compare orders two numbers of one kind (float, int or uint) by value.
func Compare(a, b Value) int {
	switch a.Kind() {
	case KindFloat:
		return cmp.Compare(a.Float(), b.Float())
	case KindInt:
		return cmp.Compare(a.Int(), b.Int())
	}
	return cmp.Compare(a.Uint(), b.Uint())
}

// Columns holds the samples of one series column by column: Times and,
// by the series' kind, Bits (numbers and booleans, as Value.Bits) or
// Strings. Readers append to the columns of the kind they decode.
type Columns struct {
	Times   []int64
	Bits    []uint64
	Strings []string
}

// Len returns the number of samples in c.
func (c *Columns) Len() int { return len(c.Times) }

// Reset empties c, keeping its capacity; strings are cleared so that they
// do not stay reachable.
func (c *Columns) Reset() {
	clear(c.Strings)
	c.Times, c.Bits, c.Strings = c.Times[:0], c.Bits[:0], c.Strings[:0]
}

// Truncate keeps the first n samples.
func (c *Columns) Truncate(n int) {
	c.Times = c.Times[:n]
	if len(c.Bits) > n {
		c.Bits = c.Bits[:n]
	}
	if len(c.Strings) > n {
		clear(c.Strings[n:])
		c.Strings = c.Strings[:n]
	}
}

// Cut removes the samples [i, j).
func (c *Columns) Cut(i, j int) {
	if i == j {
		return
	}
	c.Times = append(c.Times[:i], c.Times[j:]...)
	if len(c.Bits) > i {
		c.Bits = append(c.Bits[:i], c.Bits[j:]...)
	}
	if len(c.Strings) > i {
		n := len(c.Strings) - (j - i)
		c.Strings = append(c.Strings[:i], c.Strings[j:]...)
		clear(c.Strings[n : len(c.Strings)+j-i])
	}
}

// AppendSamples appends samples, all of kind k, to c's columns.
func (c *Columns) AppendSamples(k Kind, samples []Sample) {
	for i := range samples {
		c.Times = append(c.Times, samples[i].Time)
	}
	if k == KindString {
		for i := range samples {
			c.Strings = append(c.Strings, samples[i].Value.s)
		}
		return
	}
	for i := range samples {
		c.Bits = append(c.Bits, samples[i].Value.n)
	}
}

// Samples returns c's samples, all of kind k, in a slice of their exact
// size.
func (c *Columns) Samples(k Kind) []Sample {
	out := make([]Sample, len(c.Times))
	c.SamplesInto(out, k)
	return out
}

// SamplesInto sets out, of c's length and zeroed, to c's samples, all of
// kind k.
func (c *Columns) SamplesInto(out []Sample, k Kind) {
	out = out[:len(c.Times)]
	if k == KindString {
		for i, s := range c.Strings[:len(out)] {
			out[i] = Sample{Time: c.Times[i], Value: Value{s: s, kind: k}}
		}
		return
	}
	bits := c.Bits[:len(out)]
	for i, t := range c.Times {
		// Zeroed memory: no string pointer to clear, and no write barrier.
		out[i].Time, out[i].Value.n, out[i].Value.kind = t, bits[i], k
	}
}
