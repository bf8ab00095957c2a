package lineproto

import (
	"bytes"
	"unicode/utf8"
)

// The splitter cuts the input into entries. An entry is normally one
// physical line; only a quoted field string value can hold a newline, so an
// entry goes on while such a string is open. To know whether a '"' opens a
// string, the splitter follows the sections of an entry the way the
// lineprotocol decoder does (measurement, tags, fields, timestamp, with the
// same escapes). As soon as an entry is known to be malformed before a string
// opens, the entry ends at the next newline, so a line broken before its
// first string never swallows the lines after it. (A string that is opened
// and never closed does, up to MaxLineBytes, as in InfluxDB.)
//
// Each entry is copied into writer.chunk on a line of its own, without
// leading and trailing blanks, and with every newline inside a string written
// as the escape "\n" (a lone backslash before it doubled), which the decoder
// turns back into the same bytes. So the decoder sees exactly one line per
// entry and can never disagree with the splitter on where an entry ends.
//
// Lines without a '"' cannot continue, so they take a fast path (addLine)
// that never looks at the bytes one by one. There, a series section the
// decoder has already parsed is replaced by a placeholder (see entry.series).

// scanState is the section of the entry the splitter is in.
type scanState uint8

const (
	sLead     scanState = iota // blanks before the entry; nothing else seen yet
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
	sRest                      // timestamp, or malformed: no string can open any more
)

// splitEntry is the entry being split on the slow path.
type splitEntry struct {
	line     int       // physical line where it starts
	start    int       // offset of its first byte in chunk
	lead     int       // leading blank bytes dropped
	raw      int       // input bytes so far, newlines inside it included
	multi    bool      // a newline inside a string was crossed
	st       scanState // section reached
	esc      bool      // the last byte was a backslash that may escape the next
	tok      int       // bytes in the current token (measurement, key or value)
	utf8From int       // chunk offset from which the entry is not yet known to be valid UTF-8
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// isControl reports the bytes the decoder never accepts in names.
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

func trimBlanks(b []byte) (t []byte, lead int) {
	i, j := 0, len(b)
	for i < j && isBlank(b[i]) {
		i++
	}
	for j > i && isBlank(b[j-1]) {
		j--
	}
	return b[i:j], i
}

// addLine handles a complete physical line that contains no '"' and starts
// no continuing entry. body excludes the newline.
func (w *writer) addLine(body []byte) error {
	w.phys++
	t, lead := trimBlanks(body)
	if len(t) == 0 || t[0] == '#' {
		return nil
	}
	if len(body) > w.opts.MaxLineBytes {
		return w.tooLong(w.phys)
	}
	e := entry{line: w.phys, shift: lead, off: len(w.chunk)}
	if n := seriesEnd(t); n > 0 && n <= maxSeriesLen {
		if s := w.series[string(t[:n])]; s != nil {
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
// final that no bytes follow.
func (w *writer) addPiece(body []byte, nl, final bool) error {
	e := &w.cur
	if !w.open {
		w.open = true
		*e = splitEntry{line: w.phys + 1, start: len(w.chunk), utf8From: len(w.chunk)}
	}
	e.raw += len(body)
	if e.st == sLead {
		i := 0
		for i < len(body) && isBlank(body[i]) {
			i++
		}
		e.lead += i
		body = body[i:]
		if len(body) > 0 {
			e.st = sMeas
			if body[0] == '#' {
				e.st = sComment
			}
		}
	}
	if e.st == sComment {
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
	e.scan(w.chunk, off)
	if !nl && !final {
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
	if e.st == sLead || e.st == sComment {
		return nil // blank or comment line
	}
	j := len(w.chunk)
	for j > e.start && isBlank(w.chunk[j-1]) {
		j--
	}
	w.chunk = w.chunk[:j]
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

// scan advances the state over b[off:], the bytes of the entry just added.
func (e *splitEntry) scan(b []byte, off int) {
	st, esc, tok := e.st, e.esc, e.tok
	for i := off; i < len(b) && st != sRest; i++ {
		c := b[i]
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
			st, tok = sFieldKey, 0
		}
		switch st {
		case sMeas:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == ',' && tok > 0:
				st, tok = sTagKey, 0
			case c == ' ' && tok > 0:
				st = sFieldSep
			case c == ',' || c == ' ' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sTagKey:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == '=' && tok > 0:
				st, tok = sTagVal, 0
			case c == '=' || c == ',' || c == ' ' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sTagVal:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == ',' && tok > 0:
				st, tok = sTagKey, 0
			case c == ' ' && tok > 0:
				st = sFieldSep
			case c == ',' || c == ' ' || c == '=' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sFieldKey:
			switch {
			case c == '\\':
				esc = true
				tok++
			case c == '=' && tok > 0:
				st = sValStart
			case c == '=' || c == ',' || c == ' ' || isControl(c):
				st = sRest
			default:
				tok++
			}
		case sValStart:
			switch {
			case c == '"':
				// The decoder rejects invalid UTF-8 in every name and string
				// before this one; then this quote opens nothing.
				if !utf8.Valid(b[e.utf8From:i]) {
					st = sRest
					break
				}
				e.utf8From = i + 1
				st = sString
			case c == 't' || c == 'T' || c == 'f' || c == 'F' || c == '-' || c == '.' || c >= '0' && c <= '9':
				st = sValue
			default:
				st = sRest
			}
		case sValue:
			switch c {
			case ',':
				st, tok = sFieldKey, 0
			case ' ', '\r':
				st = sRest
			}
		case sString:
			switch c {
			case '\\':
				esc = true
			case '"':
				st = sAfterStr
			}
		case sAfterStr:
			if c == ',' {
				st, tok = sFieldKey, 0
			} else {
				st = sRest
			}
		}
	}
	e.st, e.esc, e.tok = st, esc, tok
}
