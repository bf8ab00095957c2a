package lineproto_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/stratadb/strata/lineproto"
)

// libraryAllocs returns the allocations per entry of the line-protocol
// decoder alone reading every section of every entry of in: the garbage
// its own error values make, which lineproto cannot avoid.
func libraryAllocs(in []byte, entries int) float64 {
	return testing.AllocsPerRun(3, func() {
		d := lineprotocol.NewDecoderWithBytes(in)
		for d.Next() {
			if _, err := d.Measurement(); err != nil {
				continue
			}
			for {
				k, _, err := d.NextTag()
				if err != nil || k == nil {
					break
				}
			}
			for {
				k, _, _, err := d.NextFieldBytes()
				if err != nil || k == nil {
					break
				}
			}
			d.TimeBytes()
		}
	}) / float64(entries)
}

// A rejected line whose reason Result does not keep (past MaxRejected)
// costs no allocation of lineproto's own: its reason is not worded, its
// numbers are parsed without strconv's error values. What is left is the
// decoder's own error for a syntax error, measured here as the baseline,
// so memory stays bounded by construction however many lines are
// rejected, whatever the collector's pace. The kept reasons are still the
// full ones.
func TestWriteRejectedAllocs(t *testing.T) {
	const n = 20_000
	cases := []struct {
		name string
		line func(i int) string
		// reason is part of the kept reason of the first line.
		reason string
	}{
		{"float out of range", func(i int) string { return fmt.Sprintf("m,host=h%d v=1e999 %d", i%1000, i) }, "out of range"},
		{"float exponent out of range", func(i int) string { return fmt.Sprintf("m,host=h%d v=-0.5e%d %d", i%1000, 400+i%10, i) }, "out of range"},
		{"integer out of range", func(i int) string { return fmt.Sprintf("m,host=h%d v=99999999999999999999%di %d", i%1000, i, i) }, "out of range"},
		{"unsigned out of range", func(i int) string { return fmt.Sprintf("m,host=h%d v=99999999999999999999%du %d", i%1000, i, i) }, "out of range"},
		{"negative unsigned", func(i int) string { return fmt.Sprintf("m v=-%du %d", i, i) }, "invalid"},
		{"timestamp out of range", func(i int) string { return fmt.Sprintf("m,host=h%d v=1 9999999999999999999%d", i%1000, i%10) }, "timestamp"},
		{"duplicate tag", func(i int) string { return fmt.Sprintf("m,a=%d,a=2 v=1 %d", i%100, i) }, "duplicate tag key"},
		{"bad value", func(i int) string { return fmt.Sprintf("m,host=h%d v=bad%d %d", i%1000, i, i) }, "column"},
		{"bad timestamp", func(i int) string { return fmt.Sprintf("m,host=h%d v=1 12x%d", i%1000, i) }, "timestamp"},
		{"tag without value", func(i int) string { return fmt.Sprintf("m,host v=1 %d", i) }, "column"},
		{"no field", func(i int) string { return fmt.Sprintf("m,host=h%d %d", i%1000, i) }, "column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in []byte
			for i := range n {
				in = append(in, c.line(i)...)
				in = append(in, '\n')
			}
			base := libraryAllocs(in, n)
			var res lineproto.Result
			got := testing.AllocsPerRun(3, func() {
				var err error
				res, err = lineproto.Write(context.Background(), newMemDB(), bytes.NewReader(in), lineproto.Options{MaxRejected: 10})
				if err != nil {
					t.Fatal(err)
				}
			}) / n
			if res.RejectedCount != n || res.Points != 0 || len(res.Rejected) != 10 {
				t.Fatalf("rejected %d of %d, %d points, %d kept", res.RejectedCount, n, res.Points, len(res.Rejected))
			}
			for i, le := range res.Rejected {
				if le.Line != i+1 || !strings.Contains(le.Error(), c.reason) {
					t.Fatalf("kept rejection %d: %v, want line %d with %q", i, le, i+1, c.reason)
				}
			}
			// Allowance: the buffers of one Write, amortised over n lines.
			if got > base+0.05 {
				t.Errorf("%.2f allocations per rejected line; the decoder alone makes %.2f", got, base)
			}
			t.Logf("%.2f allocations per rejected line (decoder alone: %.2f)", got, base)
		})
	}
}
