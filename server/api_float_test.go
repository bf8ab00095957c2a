package server

import (
	"math"
	"testing"
)

// Sample values are written as Prometheus' query API writes them:
// shortest decimal, exponent form below 1e-6 and from 1e21 up, and NaN,
// +Inf, -Inf by name.
func TestAppendFloatAsPrometheus(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "-0"},
		{1.5, "1.5"},
		{-123456789, "-123456789"},
		{1e-6, "0.000001"},
		{9.99e-7, "9.99e-07"},
		{1e-300, "1e-300"},
		{-5e-324, "-5e-324"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
	} {
		if got := string(appendFloat(nil, c.v)); got != c.want {
			t.Errorf("appendFloat(%v) = %s, want %s", c.v, got, c.want)
		}
	}
}
