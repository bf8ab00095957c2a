package engine_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

func TestContractLastWriteWins(t *testing.T) {
	steps := []cStep{
		cWrite(cp("m", "f", engine.Int(1), 5), cp("m", "f", engine.Int(2), 5), cp("m", "f", engine.Int(3), 9)),
		cWrite(cp("m", "f", engine.Int(4), 9), cp("m", "f", engine.Int(5), math.MaxInt64)),
		cWrite(cp("m", "f", engine.Int(6), math.MaxInt64), cp("m", "f", engine.Int(7), math.MinInt64)),
		cWrite(cp("m", "f", engine.Int(8), math.MinInt64)),
	}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}},
			"m f: -9223372036854775808=int(8) 5=int(2) 9=int(4) 9223372036854775807=int(6)\n")
		if got := cFmt(cLast(t, db, engine.Selector{Measurement: "m", End: 10, Start: -5})); got != "m f: 9=int(4)\n" {
			t.Errorf("Last = %q", got)
		}
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggSum}, "m f: 0=int(20)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}, Agg: engine.AggCount}, "m f: 0=int(4)\n")
	})
}

// Delete removes what was written before it; later writes into the deleted
// range are kept. The range is half-open; all time covers MaxInt64.
func TestContractDelete(t *testing.T) {
	w := func(v int64, ts ...int64) cStep {
		var pts []engine.Point
		for _, x := range ts {
			pts = append(pts,
				cp("m", "f", engine.Int(v), x, "host=a"),
				cp("m", "f", engine.Int(v), x, "host=b", "dc=1"),
				cp("m", "g", engine.Int(v), x, "host=dev-10"),
				cp("n", "f", engine.Int(v), x, "host=a"))
		}
		return cWrite(pts...)
	}
	steps := []cStep{
		w(1, 5, 9, math.MaxInt64, math.MinInt64),
		cDelete(engine.Selector{Measurement: "m", Start: 5, End: 9, Tags: []engine.Tag{{Key: "host", Value: "a"}}}),
		cDelete(engine.Selector{Measurement: "m", Start: math.MinInt64, End: math.MaxInt64, Matchers: []engine.Matcher{{Key: "dc", Op: engine.MatchEqual}, {Key: "host", Op: engine.MatchRegexp, Value: "dev-1.*"}}}),
		cDelete(engine.Selector{Measurement: "m", Field: "f", Matchers: []engine.Matcher{{Key: "dc", Op: engine.MatchNotEqual, Value: ""}}}),
		cDelete(engine.Selector{Measurement: "m", Matchers: []engine.Matcher{{Key: "host", Op: engine.MatchRegexp, Value: "dev-1"}}}), // anchored: matches nothing
		w(2, 5),
		cDelete(engine.Selector{Measurement: "gone"}),
	}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}},
			"m,dc=1,host=b f: 5=int(2)\n"+
				"m,host=a f: -9223372036854775808=int(1) 5=int(2) 9=int(1) 9223372036854775807=int(1)\n"+
				"m,host=dev-10 g: 5=int(2) 9223372036854775807=int(1)\n")
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "n"}, Agg: engine.AggCount}, "n,host=a f: 0=int(4)\n")
	})
}

// A field's kind is fixed for the life of the database, even after its
// samples are deleted or expire and compaction drops them.
func TestContractKindOutlivesSamples(t *testing.T) {
	opts := cOpts(1000)
	opts.Retention = 500 // samples before 500 are expired
	steps := []cStep{
		cWrite(cp("del", "f", engine.Float(1), 600, "k=v"), cp("exp", "f", engine.Uint(1), 100, "k=v"), cp("mix", "f", engine.Bool(true), 700)),
		cDelete(engine.Selector{Measurement: "del"}),
		cDelete(engine.Selector{Measurement: "mix", Field: "f"}),
	}
	inWritableStates(t, opts, steps, func(t *testing.T, db *engine.DB) {
		cCompact(t, db) // drops what it can
		ctx := context.Background()
		if ms, err := db.Measurements(ctx); err != nil || len(ms) != 0 {
			t.Errorf("Measurements = %q, %v; want none visible", ms, err)
		}
		for _, p := range []engine.Point{
			cp("del", "f", engine.Int(1), 800, "k=v"),
			cp("exp", "f", engine.Float(1), 800, "k=v"),
			cp("mix", "f", engine.String("x"), 800),
		} {
			cWantErr(t, fmt.Sprintf("write %s after its samples are gone", p.Measurement), db.Write([]engine.Point{p}), engine.ErrFieldTypeConflict)
		}
		// The same kinds are still accepted.
		if err := db.Write([]engine.Point{cp("del", "f", engine.Float(2), 800, "k=v"), cp("exp", "f", engine.Uint(2), 800, "k=v"), cp("mix", "f", engine.Bool(false), 800)}); err != nil {
			t.Fatalf("write of the fixed kinds: %v", err)
		}
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "exp"}}, "exp,k=v f: 800=uint(2)\n")
	})
}

// Last: newest visible sample, after overwrite, delete and retention.
func TestContractLast(t *testing.T) {
	opts := cOpts(1000)
	opts.Retention = 900 // cutoff 100
	steps := []cStep{
		cWrite(cp("m", "f", engine.Float(1), 150, "d=1"), cp("m", "f", engine.Float(2), 300, "d=1"),
			cp("m", "f", engine.Float(3), 50, "d=2"), cp("m", "f", engine.Float(4), 120, "d=2"),
			cp("m", "f", engine.Float(5), 20, "d=3"),
			cp("m", "s", engine.String("a"), 400, "d=1")),
		cWrite(cp("m", "f", engine.Float(6), 300, "d=1")),
		cWrite(cp("m", "f", engine.Float(7), 500, "d=2")),
		cDelete(engine.Selector{Measurement: "m", Start: 450, End: 550}),
	}
	inStates(t, opts, steps, func(t *testing.T, db *engine.DB) {
		got := cFmt(cLast(t, db, engine.Selector{}))
		want := "m,d=1 f: 300=float(6)\nm,d=1 s: 400=string(a)\nm,d=2 f: 120=float(4)\n"
		if got != want {
			t.Errorf("Last all:\ngot:\n%swant:\n%s", got, want)
		}
		got = cFmt(cLast(t, db, engine.Selector{Measurement: "m", Field: "f", Start: 0, End: 300}))
		if want := "m,d=1 f: 150=float(1)\nm,d=2 f: 120=float(4)\n"; got != want {
			t.Errorf("Last [0,300):\ngot:\n%swant:\n%s", got, want)
		}
		got = cFmt(cLast(t, db, engine.Selector{Matchers: []engine.Matcher{{Key: "d", Op: engine.MatchRegexp, Value: "[23]"}}}))
		if want := "m,d=2 f: 120=float(4)\n"; got != want {
			t.Errorf("Last d=~[23]:\ngot:\n%swant:\n%s", got, want)
		}
		ctx := context.Background()
		vals, err := db.TagValues(ctx, "d", engine.Selector{})
		if err != nil || strings.Join(vals, ",") != "1,2" {
			t.Errorf("TagValues d = %q, %v; want 1,2 (d=3 is expired)", vals, err)
		}
		vals, err = db.TagValues(ctx, "d", engine.Selector{Start: 130, End: 1000})
		if err != nil || strings.Join(vals, ",") != "1" {
			t.Errorf("TagValues d in [130,1000) = %q, %v; want 1", vals, err)
		}
	})
}

// Every value that Write accepts can be flushed, compacted, reopened and
// read back.
func TestContractLargeValuesRoundTrip(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	var tags []string
	for i := range 200 {
		tags = append(tags, fmt.Sprintf("tag%03d=%s", i, strings.Repeat("v", 100)))
	}
	longKey := strings.Repeat("k", 4096)
	pts := []engine.Point{
		cp("m", "s", engine.String(big), 1),
		cp("m", "f", engine.Float(1), 2, tags...),
		cp(strings.Repeat("m", 4096), longKey, engine.Int(1), 3, longKey+"="+longKey),
		cp("m", "u", engine.Uint(math.MaxUint64), 4),
		cp("m", "i", engine.Int(math.MinInt64), 5),
		cp("m", "f2", engine.Float(-math.MaxFloat64), 6),
		cp("m", "f2", engine.Float(math.SmallestNonzeroFloat64), 7),
		cp("m", "f2", engine.Float(math.Copysign(0, -1)), 8),
	}
	inStates(t, nil, []cStep{cWrite(pts...)}, func(t *testing.T, db *engine.DB) {
		res := cQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}})
		if len(res) != 5 {
			t.Fatalf("got %d series, want 5", len(res))
		}
		for _, s := range res {
			switch s.Field {
			case "s":
				if s.Samples[0].Value.Str() != big {
					t.Errorf("1 MiB string did not round-trip")
				}
			case "f":
				if len(s.Tags) != 200 {
					t.Errorf("got %d tags, want 200", len(s.Tags))
				}
			case "u":
				if s.Samples[0].Value.Uint() != math.MaxUint64 {
					t.Errorf("uint = %v", s.Samples[0].Value)
				}
			case "i":
				if s.Samples[0].Value.Int() != math.MinInt64 {
					t.Errorf("int = %v", s.Samples[0].Value)
				}
			case "f2":
				if len(s.Samples) != 3 || s.Samples[0].Value.Float() != -math.MaxFloat64 ||
					s.Samples[1].Value.Float() != math.SmallestNonzeroFloat64 || !math.Signbit(s.Samples[2].Value.Float()) {
					t.Errorf("floats = %s", cFmt([]engine.Series{s}))
				}
			}
		}
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: strings.Repeat("m", 4096)}, Agg: engine.AggCount}, cKey(strings.Repeat("m", 4096), []engine.Tag{{Key: longKey, Value: longKey}}, longKey)+": 0=int(1)\n")
	})
}

// Tags come in any order: one tag set is one series whatever the order,
// and results carry the tags sorted by key.
func TestContractTagOrder(t *testing.T) {
	steps := []cStep{
		cWrite(cp("m", "f", engine.Int(1), 1, "b=1", "a=2", "c=3")),
		cWrite(cp("m", "f", engine.Int(2), 2, "c=3", "a=2", "b=1"), cp("m", "f", engine.Int(3), 3, "a=2", "b=1", "c=3")),
	}
	inStates(t, nil, steps, func(t *testing.T, db *engine.DB) {
		res := cQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m", Tags: []engine.Tag{{Key: "c", Value: "3"}, {Key: "a", Value: "2"}}}})
		if got, want := cFmt(res), "m,a=2,b=1,c=3 f: 1=int(1) 2=int(2) 3=int(3)\n"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if len(res) == 1 {
			var keys []string
			for _, tg := range res[0].Tags {
				keys = append(keys, tg.Key)
			}
			if strings.Join(keys, ",") != "a,b,c" {
				t.Errorf("tags in order %v, want sorted by key", keys)
			}
		}
	})
}

// Every value Write accepts can be flushed, compacted, reopened and read
// back; what it cannot store it rejects at Write with ErrInvalid, and the
// database goes on working.
func TestContractWriteLimits(t *testing.T) {
	var many []string
	for i := range 20000 {
		many = append(many, fmt.Sprintf("t%05d=v", i))
	}
	big := []engine.Point{
		cp("m", "s", engine.String(strings.Repeat("x", 32<<20+1)), 1),
		cp("m", "f", engine.Int(1), 2, many...),
		cp("m", strings.Repeat("k", 1<<20), engine.Int(1), 3),
	}
	for i, p := range big {
		dir := t.TempDir()
		db, err := engine.Open(dir, cOpts(0))
		if err != nil {
			t.Fatal(err)
		}
		werr := db.Write([]engine.Point{p})
		if werr != nil {
			cWantErr(t, fmt.Sprintf("point %d rejected", i), werr, engine.ErrInvalid)
		}
		if err := db.Write([]engine.Point{cp("ok", "f", engine.Int(1), 1)}); err != nil {
			t.Fatalf("point %d: a small write after it: %v", i, err)
		}
		cFlush(t, db)
		cCompact(t, db)
		if err := db.Close(); err != nil {
			t.Fatalf("point %d: close: %v", i, err)
		}
		db, err = engine.Open(dir, cOpts(0))
		if err != nil {
			t.Fatalf("point %d: reopen: %v", i, err)
		}
		res := cQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}})
		if want := map[bool]int{true: 0, false: 1}[werr != nil]; len(res) != want {
			t.Errorf("point %d (write err %v): %d series after reopen, want %d", i, werr, len(res), want)
		}
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "ok"}}, "ok f: 1=int(1)\n")
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
