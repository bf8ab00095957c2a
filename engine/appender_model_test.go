package engine

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// errClass names the kind of a write error: what the two paths must agree
// on.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrFieldTypeConflict):
		return "conflict"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return "other: " + err.Error()
}

// checkAppenderMatchesWrite runs a random workload twice: each batch as
// one Write into one database, and as the samples of its points appended
// (with refs cached from earlier appends, or ref 0) and committed into
// another. Where Write refuses a batch the appender must refuse one of its
// samples, with the same class of error, and the batch is rolled back.
// Rollbacks, flushes, compactions and reopens come in between. Both
// databases and the in-memory model must hold the same data throughout.
func checkAppenderMatchesWrite(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 23))
	g := newGen(r)
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	wdir, adir := t.TempDir(), t.TempDir()
	wdb, adb := openDB(t, wdir, opts), openDB(t, adir, opts)
	m := NewRefModel()
	app := adb.Appender()
	refs := map[string]SeriesRef{}
	for step := range steps {
		pts := g.batch()
		if r.IntN(25) == 0 {
			p := &pts[r.IntN(len(pts))]
			switch r.IntN(3) {
			case 0:
				p.Measurement = ""
			case 1:
				p.Fields[0].Value = Float(math.NaN())
			case 2:
				p.Tags = append(p.Tags, Tag{Key: "dup", Value: "1"}, Tag{Key: "dup", Value: "2"})
			}
		}
		werr := wdb.Write(pts)
		var aerr error
		before := maps.Clone(refs)
	points:
		for _, p := range pts {
			for _, f := range p.Fields {
				key := fmt.Sprint(p.Measurement, sortedTags(p.Tags), f.Key)
				ref := refs[key]
				if r.IntN(4) == 0 {
					ref = 0
				}
				got, err := app.Append(ref, p.Measurement, slices.Clone(p.Tags), f.Key, p.Time, f.Value)
				if err != nil {
					aerr = err
					break points
				}
				refs[key] = got
			}
		}
		where := fmt.Sprintf("seed %d step %d", seed, step)
		if errClass(werr) != errClass(aerr) {
			t.Fatalf("%s: Write %v, Append %v", where, werr, aerr)
		}
		rollback := aerr != nil || r.IntN(15) == 0
		if rollback {
			if err := app.Rollback(); err != nil {
				t.Fatal(err)
			}
			// Refs of series the batch would have created are refused
			// from now on (checked below for one of them).
			for key, ref := range refs {
				if before[key] != 0 || uint64(ref)&refPending == 0 {
					continue
				}
				for _, v := range []Value{Float(1), Int(1), Uint(1), Bool(true), String("x")} {
					if _, err := app.Append(ref, "", nil, "", 0, v); err == nil {
						t.Fatalf("%s: ref of %s accepted after rollback", where, key)
					}
				}
			}
			refs = before
			if aerr == nil {
				// Rolled back on purpose: take the batch out of wdb's
				// picture by not having written it... which cannot be
				// undone, so write it to adb again through Write.
				if err := adb.Write(pts); err != nil {
					t.Fatalf("%s: rewrite of a rolled-back batch: %v", where, err)
				}
			}
		} else if err := app.Commit(); err != nil {
			t.Fatalf("%s: commit: %v", where, err)
		}
		if werr == nil {
			m.write(pts)
		}
		switch r.IntN(40) {
		case 0:
			mustFlush(t, wdb)
			mustFlush(t, adb)
		case 1:
			mustCompact(t, wdb)
			mustCompact(t, adb)
		case 2:
			wdb = reopen(t, wdb, wdir, opts)
			adb = reopen(t, adb, adir, opts)
			app = adb.Appender()
			// The old handle's refs must be refused, not misdirected.
			for key, ref := range refs {
				if ref == 0 {
					continue
				}
				if _, err := app.Append(ref, "", nil, "", 0, Float(0)); err == nil || !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrFieldTypeConflict) {
					t.Fatalf("%s: ref of %s from the previous handle: %v", where, key, err)
				}
			}
			app.Rollback()
			refs = map[string]SeriesRef{}
		}
		if step%10 == 9 || step == steps-1 {
			for _, meas := range genMeasurements {
				q := rawAll(meas)
				checkQuery(t, wdb, m, q, math.MinInt64, where+" (Write)")
				checkQuery(t, adb, m, q, math.MinInt64, where+" (Appender)")
			}
		}
	}
}

func TestAppenderMatchesWrite(t *testing.T) {
	for seed := range uint64(8) {
		checkAppenderMatchesWrite(t, seed, 120)
	}
}

// FuzzAppenderMatchesWrite runs the comparison from fuzzed seeds.
func FuzzAppenderMatchesWrite(f *testing.F) {
	f.Add(uint64(100))
	f.Add(uint64(101))
	f.Fuzz(func(t *testing.T, seed uint64) {
		checkAppenderMatchesWrite(t, seed, 40)
	})
}
