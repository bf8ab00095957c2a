package lineproto

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// The splitter cuts the input into entries exactly where the lineprotocol
// decoder does. An entry is normally one physical line; only a quoted field
// string value can hold a newline, so an entry goes on while such a string is
// open. To know whether a '"' opens a string, the splitter follows the
// sections of an entry the way the decoder does (measurement, tags, fields,
// timestamp, with the same escapes, byte sets and UTF-8 checks). As soon as
// an entry is known to be malformed before a string opens, the entry ends at
// the next newline, as the decoder's recovery does, so a line broken before
// its first string never swallows the lines after it. (A string that is
// opened and never closed does, up to MaxLineBytes, as in InfluxDB.)
//
// Blank and comment lines are the decoder's: a blank line holds only spaces
// (tabs are not blanks) and may end in a carriage return; a comment line is
// spaces, '#' and printable bytes (a control byte rejects the line, as the
// decoder does). A carriage return is a line ending only right before the
// newline or at the end of the input; anywhere else outside a string value it
// makes the decoder reject the entry, and here too.
//
// Each entry is copied into writer.chunk on a line of its own, without its
// leading spaces, and with every newline inside a string written as the
// escape "\n" (a lone backslash before it doubled), which the decoder turns
// back into the same bytes. So the decoder sees exactly one line per entry
// and can never disagree with the splitter on where an entry ends. Entries
// the splitter rejects itself (too long, a bad comment, a stray carriage
// return) are not copied.
//
// Lines without a '"' or a stray carriage return cannot continue, so they
// take a fast path (addLine) that never looks at the bytes one by one. There,
// a series section the decoder has already parsed is replaced by a
// placeholder (see entry.series).

// scanState is the section of the entry the splitter is in.
type scanState uint8

const (
	sLead     scanState = iota // spaces before the entry; nothing else seen yet
	sComment                   // a comment line
	sMeas                      // measurement
	sTagKey                    // tag key, after ','
	sTagVal                    // tag value, after '='
	sFieldSep                  // spaces before the first field
	sFieldKey                  // field key
	sValStart                  // first byte of a field value, after '='
	sValue                     // unquoted field value
	sString                    // inside a quoted string value
	sAfterStr                  // after the closing quote of a string
	sTime                      // spaces before the timestamp
	sJunk                      // not a timestamp where one may start
	sRest                      // a timestamp, or malformed: no string can open any more
)

// splitEntry is the entry being split on the slow path.
type splitEntry struct {
	line  int       // physical line where it starts
	start int       // offset of its first byte in chunk
	lead  int       // leading spaces dropped
	raw   int       // input bytes so far, newlines inside it included
	multi bool      // a newline inside a string was crossed
	st    scanState // section reached
	esc   bool      // the last byte was a backslash that may escape the next
	tok   int       // bytes in the current token (measurement, key or value)
	from  int       // chunk offset where the current name, value or string starts
	bad   error     // why the entry is rejected without the decoder, if it is
	// residue is set by a stray carriage return where the timestamp
	// belongs. The decoder then starts a second entry at it, which it
	// rejects too: on a line of its own when the entry spans lines.
	residue     bool
	residueLine int
}

// isControl reports the bytes the decoder never accepts in names or
// comments.
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// endsWithCR reports whether the line body ends with the carriage return of
// a CRLF (or of a CR at the end of the input).
func endsWithCR(b []byte) bool { return len(b) > 0 && b[len(b)-1] == '\r' }

// fastLine reports whether a complete physical line can take the fast path:
// it holds no '"' and no carriage return but a final one.
func fastLine(body []byte) bool {
	if bytes.IndexByte(body, '"') >= 0 {
		return false
	}
	i := bytes.IndexByte(body, '\r')
	return i < 0 || i == len(body)-1
}

// commentError returns the error of a comment line whose bytes from the '#'
// on are c, col the column of the '#', or nil when the decoder skips it. The
// decoder accepts printable bytes and a final carriage return.
func commentError(c []byte, col int, lineEnd bool) error {
	for i, b := range c {
		if isControl(b) && !(b == '\r' && i == len(c)-1 && lineEnd) {
			return &invalidError{col: col + i, err: fmt.Errorf("invalid character %q in comment line", b)}
		}
	}
	return nil
}

// addLine handles a complete physical line for which fastLine holds. body
// excludes the newline.
func (w *writer) addLine(body []byte) error {
	w.phys++
	t := body
	for len(t) > 0 && t[0] == ' ' {
		t = t[1:]
	}
	lead := len(body) - len(t)
	if len(t) == 0 || len(t) == 1 && t[0] == '\r' {
		return nil // blank
	}
	if t[0] == '#' {
		if err := commentError(t, lead+1, true); err != nil {
			return w.badEntry(w.phys, err)
		}
		return nil
	}
	if len(body) > w.opts.MaxLineBytes {
		return w.tooLong(w.phys)
	}
	e := entry{line: w.phys, shift: lead, off: len(w.chunk)}
	if n := seriesEnd(t); n > 0 && n <= maxSeriesLen {
		if s := w.series[string(t[:n])]; s != nil {
			if len(w.entries) == 0 {
				// Nothing waits in chunk: the line need not go there.
				if w.addFast(t[n:], s, w.phys) {
					return w.fastLineAdded()
				}
			}
			// The decoder has seen this series section: let it parse a
			// one-byte measurement instead.
			e.series, e.shift = s, lead+n-1
			w.chunk = append(w.chunk, 'x')
			w.chunk = append(w.chunk, t[n:]...)
			return w.endEntry(e)
		}
		e.prefix = n
	}
	w.chunk = append(w.chunk, t...)
	return w.endEntry(e)
}

// seriesEnd returns the length of the series section of a line: the index
// of its first space not preceded by a backslash. In the measurement and in
// tags, a backslash before a space always escapes it (a backslash never
// escapes a backslash there), so this is where the decoder starts the
// fields, if the line is well formed up to there.
func seriesEnd(b []byte) int {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], ' ')
		if i < 0 {
			return -1
		}
		i += off
		if i == 0 || b[i-1] != '\\' {
			return i
		}
		off = i + 1
	}
}

// addPiece handles a piece of a physical line on the slow path: body holds
// its bytes without the newline, nl says whether the newline was read and
// final that no bytes follow. A piece that is neither the end of its line
// nor of the input never ends with a carriage return (run holds it back), so
// a carriage return is a line ending exactly when it is the last byte of a
// piece that ends its line.
func (w *writer) addPiece(body []byte, nl, final bool) error {
	e := &w.cur
	if !w.open {
		w.open = true
		*e = splitEntry{line: w.phys + 1, start: len(w.chunk)}
	}
	lineEnd := nl || final
	col := e.raw + 1 // column of body[0], for a one-line entry
	e.raw += len(body)
	if e.st == sLead {
		i := 0
		for i < len(body) && body[i] == ' ' {
			i++
		}
		e.lead += i
		col += i
		body = body[i:]
		switch {
		case len(body) == 0:
		case body[0] == '#':
			e.st = sComment
		case len(body) == 1 && body[0] == '\r' && lineEnd:
			body = nil // a blank line ending in CR
		default:
			e.st, e.from = sMeas, len(w.chunk)
		}
	}
	if e.st == sComment {
		if e.bad == nil {
			e.bad = commentError(body, col, lineEnd)
		}
		body = nil
	}
	if e.st != sLead && e.st != sComment && e.raw > w.opts.MaxLineBytes {
		w.open = false
		w.chunk = w.chunk[:e.start]
		if nl {
			w.phys++
		} else if !final {
			w.skipping = true
		}
		return w.tooLong(e.line)
	}
	off := len(w.chunk)
	w.chunk = append(w.chunk, body...)
	e.scan(w.chunk, off, lineEnd)
	if e.residue && e.residueLine == 0 {
		e.residueLine = w.phys + 1
	}
	if !lineEnd {
		return nil // the rest of the physical line follows
	}
	if nl {
		w.phys++
		if e.st == sString {
			// The newline belongs to the string value.
			if e.esc {
				w.chunk = append(w.chunk, '\\') // the backslash before it is a literal one
				e.esc = false
			}
			w.chunk = append(w.chunk, '\\', 'n')
			e.raw++
			e.multi = true
			return nil
		}
	}
	w.open = false
	switch {
	case e.st == sLead || e.st == sComment && e.bad == nil:
		return nil // blank or comment line
	case e.bad != nil:
		w.chunk = w.chunk[:e.start]
		if err := w.badEntry(e.line, e.bad); err != nil {
			return err
		}
		if e.residue && e.residueLine > e.line {
			return w.badEntry(e.residueLine, &invalidError{err: errors.New("carriage return not followed by a newline")})
		}
		return nil
	}
	return w.endEntry(entry{line: e.line, shift: e.lead, multi: e.multi})
}

// escapable reports whether a backslash before c is an escape in state st,
// with the decoder's escape sets.
func escapable(st scanState, c byte) bool {
	switch st {
	case sMeas:
		return c == ' ' || c == ','
	case sTagKey, sTagVal, sFieldKey:
		return c == ' ' || c == ',' || c == '='
	case sString:
		return c == '\\' || c == '"' || c == 'n' || c == 'r' || c == 't'
	}
	return false
}

// scan advances the state over b[off:], the bytes of the entry just added;
// lineEnd says that they end their physical line.
func (e *splitEntry) scan(b []byte, off int, lineEnd bool) {
	st, esc, tok := e.st, e.esc, e.tok
	// valid reports whether the name or string that ends at i is valid
	// UTF-8: the decoder checks each of them (not other values) and stops
	// at the first bad one.
	valid := func(i int) bool { return utf8.Valid(b[e.from:i]) }
	for i := off; i < len(b); i++ {
		if st == sRest || st == sJunk {
			// Only a stray carriage return matters from here on.
			j := bytes.IndexByte(b[i:], '\r')
			if j < 0 || e.bad != nil {
				break
			}
			i += j
		}
		c := b[i]
		if c == '\r' && st != sString && (i < len(b)-1 || !lineEnd) {
			// A carriage return that does not end the line: whatever the
			// section, the decoder rejects the entry.
			if e.bad == nil {
				err := &invalidError{err: errors.New("carriage return not followed by a newline")}
				if !e.multi {
					err.col = e.lead + i - e.start + 1
				}
				e.bad = err
				e.residue = st == sValue || st == sAfterStr || st == sTime || st == sJunk
			}
			st, esc = sRest, false
			continue
		}
		if esc {
			esc = false
			if escapable(st, c) {
				tok++
				continue
			}
		}
		if st == sFieldSep {
			if c == ' ' {
				continue
			}
			st, tok, e.from = sFieldKey, 0, i
		}
		switch st {
		case sMeas, sTagVal:
			// Both end at a ',' (a tag key follows) or a ' ' (the fields
			// follow); a tag value may not hold a '=', a measurement may.
			switch {
			case c == '\\':
				esc = true
				tok++
			case (c == ',' || c == ' ') && tok > 0 && !valid(i):
				st = sRest
			case c == ',' && tok > 0:
				st, tok, e.from = sTagKey, 0, i+1
			case c == ' ' && tok > 0:
				st = sFieldSep
			case c == ',' || c == ' ' || c == '=' && st == sTagVal || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sTagKey:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == '=' && tok > 0 && valid(i):
				st, tok, e.from = sTagVal, 0, i+1
			case c == '=' || c == ',' || c == ' ' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sFieldKey:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == '=' && tok > 0 && valid(i):
				st = sValStart
			case c == '=' || c == ',' || c == ' ' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sValStart:
			switch {
			case c == '"':
				st, e.from = sString, i+1
			case c == 't' || c == 'T' || c == 'f' || c == 'F' || c == '-' || c == '.' || c >= '0' && c <= '9':
				st, e.from = sValue, i
			default:
				st = sRest
			}
		case sValue:
			switch c {
			case ',':
				// The decoder parses each value as it reads it and a bad
				// one ends its reading of the entry.
				st, tok = sRest, 0
				if valueOK(b[e.from:i]) {
					st, e.from = sFieldKey, i+1
				}
			case ' ':
				st = sTime
			case '\r':
				st = sRest
			}
		case sTime:
			switch {
			case c == ' ':
			case c == '-' || c >= '0' && c <= '9':
				st = sRest
			default:
				st = sJunk
			}
		case sString:
			switch c {
			case '\\':
				esc = true
			case '"':
				// A string with bad UTF-8 ends the decoder's reading of
				// the entry: the rest of the line is skipped.
				st = sRest
				if valid(i) {
					st = sAfterStr
				}
			}
		case sAfterStr:
			switch c {
			case ',':
				st, tok, e.from = sFieldKey, 0, i+1
			case ' ':
				st = sTime
			default:
				st = sRest
			}
		}
	}
	e.st, e.esc, e.tok = st, esc, tok
}

// valueOK reports whether the decoder parses the unquoted field value v
// without error.
func valueOK(v []byte) bool {
	kind := lineprotocol.Float
	switch {
	case v[0] == 't' || v[0] == 'T' || v[0] == 'f' || v[0] == 'F':
		kind = lineprotocol.Bool
	case v[len(v)-1] == 'i':
		kind, v = lineprotocol.Int, v[:len(v)-1]
	case v[len(v)-1] == 'u':
		kind, v = lineprotocol.Uint, v[:len(v)-1]
	}
	_, err := parseValue(kind, v)
	return err == nil
}
