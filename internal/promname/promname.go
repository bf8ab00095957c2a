// Package promname holds the rules that give a strata series and its
// values in Prometheus terms, shared by the query API (package server) and
// the remote-write forwarder (package forward) so that both show a series
// alike.
//
// A series of measurement m and field f is the metric m_f, or m when f is
// "value" (so that remote write round-trips); a tag key is a label name with
// every character a label name may not hold replaced by '_': one '_' per
// character, and one per byte of invalid UTF-8.
package promname

import (
	"strings"
	"unicode/utf8"

	"github.com/stratadb/strata/internal/point"
)

// Metric returns the metric name of measurement m, field f, as the query API
// shows it: m_f, or m when f is "value". It is not sanitized.
func Metric(m, f string) string {
	if f == "value" {
		return m
	}
	return m + "_" + f
}

// Label returns the label name of tag key k: k with every character that is
// not valid in a (legacy) Prometheus label name replaced by '_'; "_" for "".
func Label(k string) string { return Sanitize(k, false) }

// Sanitize replaces each character of s that a Prometheus label name may not
// hold ([a-zA-Z_][a-zA-Z0-9_]*) with '_': one '_' per character, and per
// byte of invalid UTF-8. With colons, ':' is kept too (the legacy metric
// name alphabet). An empty s gives "_". s is returned as it is when valid.
func Sanitize(s string, colons bool) string {
	valid := s != ""
	for i := 0; valid && i < len(s); i++ {
		valid = nameByte(s[i], i == 0, colons)
	}
	if valid {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if r < utf8.RuneSelf && nameByte(byte(r), i == 0, colons) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func nameByte(c byte, first, colons bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		!first && '0' <= c && c <= '9' || colons && c == ':'
}

// Value returns v as a Prometheus sample value: a float64, a bool as 0 or
// 1. ok is false for a string, which Prometheus cannot hold.
func Value(v point.Value) (f float64, ok bool) {
	switch v.Kind() {
	case point.KindFloat:
		return v.Float(), true
	case point.KindInt:
		return float64(v.Int()), true
	case point.KindUint:
		return float64(v.Uint()), true
	case point.KindBool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
