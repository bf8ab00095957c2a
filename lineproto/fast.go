package lineproto

import (
	"bytes"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"github.com/stratadb/strata/internal/point"
)

// The fast path parses the rest of a line whose series section the decoder
// has parsed before (a series): the fields and the timestamp. addLine
// hands it such a line at once when no entry waits in chunk (the usual
// case once a client's series are known), and decodeChunk those it finds
// in chunk after the one-byte placeholder measurement. It takes only the
// plain form that collectors write, which it can recognise in one pass
// without the decoder's per-section bookkeeping:
//
//	␣+key=value(,key=value)*(␣+timestamp?)?␣*\r?
//
// with keys of printable ASCII other than the separators, escapes and
// quotes, and values that start as the decoder's numbers and booleans do.
// It accepts exactly what the decoder would turn into the same point: the
// value bytes go to parseValue as the decoder's would, and anything else
// (an escape, a string, a stray byte, a value or timestamp that does not
// parse) makes it decline, so the decoder parses the line and words its
// error. FuzzFastPath holds it to that.

// fastKey reports the bytes a field key may hold on the fast path: the
// decoder's field key bytes less the backslash, which may start an escape,
// and the quote, which it would take as part of the key. Bytes from 0x80 up
// go to the decoder, which checks their UTF-8.
var fastKey = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = c != ',' && c != '=' && c != '\\' && c != '"'
	}
	return t
}()

// fastLineOff is a test hook: set, the fast path declines every line.
var fastLineOff bool

// addFast parses line, the rest of line number lineNo after its series
// section s (from the space that ends the section, without the newline),
// and appends its point to the batch. It reports false, with the batch as
// it was, for anything it does not take; the decoder then parses the line.
func (w *writer) addFast(line []byte, s *series, lineNo int) bool {
	if fastLineOff || len(line) < 2 || line[0] != ' ' {
		return false
	}
	if n := len(line); line[n-1] == '\r' {
		line = line[:n-1] // a CRLF ending
	}
	i := 1
	for i < len(line) && line[i] == ' ' {
		i++
	}
	t0, f0 := len(w.tags), len(w.fields)
	slot := 1 + 2*len(s.tags)
	for {
		// A field key, '=' and a value.
		k := i
		for i < len(line) && fastKey[line[i]] {
			i++
		}
		if i == k || i == len(line) || line[i] != '=' {
			return w.declineFast(t0, f0)
		}
		key := line[k:i]
		i++
		v := i
		for i < len(line) && line[i] != ',' && line[i] != ' ' {
			i++
		}
		if i == v {
			return w.declineFast(t0, f0)
		}
		kind, b := fastKind(line[v:i])
		if kind == lineprotocol.Unknown {
			return w.declineFast(t0, f0)
		}
		val, err := parseValue(kind, b)
		if err != nil {
			return w.declineFast(t0, f0)
		}
		w.setField(f0, w.name(slot, key), val)
		slot++
		if i == len(line) || line[i] == ' ' {
			break
		}
		i++ // the comma
	}
	for i < len(line) && line[i] == ' ' {
		i++
	}
	// The timestamp runs to the next space: parseTime takes only digits
	// after a sign, and the decoder has no '+' in a timestamp.
	if i < len(line) && line[i] == '+' {
		return w.declineFast(t0, f0)
	}
	from := i
	if j := bytes.IndexByte(line[i:], ' '); j >= 0 {
		i += j
	} else {
		i = len(line)
	}
	tb := line[from:i]
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i != len(line) {
		return w.declineFast(t0, f0)
	}
	var ts int64
	if len(tb) == 0 {
		ts = w.now()
	} else {
		t, err := w.parseTime(tb)
		if err != nil {
			return w.declineFast(t0, f0)
		}
		ts = t
	}
	var tags []point.Tag
	if len(s.tags) > 0 {
		w.tags = append(w.tags, s.tags...)
		n := len(w.tags)
		tags = w.tags[t0:n:n]
	}
	n := len(w.fields)
	// Built in place: a Point returned by value cost a copy through the
	// stack that the profile of the HTTP path showed as a third of this
	// function.
	w.points = append(w.points, point.Point{Measurement: s.measurement, Tags: tags, Fields: w.fields[f0:n:n], Time: ts})
	w.lines = append(w.lines, lineNo)
	if w.app != nil {
		w.sers = append(w.sers, s)
	}
	return true
}

// declineFast undoes what addFast appended and reports false.
func (w *writer) declineFast(tags, fields int) bool {
	w.tags, w.fields = w.tags[:tags], w.fields[:fields]
	return false
}

// fastKind returns the kind of the value b as the decoder tells it from
// its first and last bytes, and the bytes it hands to parseValue, or
// Unknown for what the fast path leaves to the decoder (strings, and any
// byte the decoder would not take into an unquoted value: a control byte
// or a carriage return).
func fastKind(b []byte) (lineprotocol.ValueKind, []byte) {
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return lineprotocol.Unknown, nil
		}
	}
	switch b[0] {
	case 't', 'T', 'f', 'F':
		return lineprotocol.Bool, b
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '.':
		switch b[len(b)-1] {
		case 'i':
			return lineprotocol.Int, b[:len(b)-1]
		case 'u':
			return lineprotocol.Uint, b[:len(b)-1]
		}
		return lineprotocol.Float, b
	}
	return lineprotocol.Unknown, nil
}

// fastLineAdded completes a line that addLine took on the fast path, as
// endEntry and decodeChunk would have.
func (w *writer) fastLineAdded() error {
	w.res.Lines++
	if len(w.points) >= w.opts.BatchSize {
		return w.flush()
	}
	w.pending()
	return nil
}
