package lineproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"github.com/stratadb/strata/internal/point"
)

var errInternal = errors.New("lineproto: internal error: entry lost by the decoder")

// decodeChunk turns the entries of chunk into points, flushing every full
// batch, and empties chunk but for the entry being split, if any.
func (w *writer) decodeChunk() error {
	if len(w.entries) == 0 {
		return nil
	}
	done := len(w.chunk)
	if w.open {
		done = w.cur.start
	}
	// Lines whose series section is known take the fast path until one
	// declines; from that line on, the chunk's entries go to a decoder,
	// which reads them one to one, as the splitter wrote them.
	var d *lineprotocol.Decoder
	at := 0 // where the next entry's line starts in chunk
	for _, e := range w.entries {
		if e.err != nil {
			w.reject(e.line, e.err)
			continue
		}
		start := at
		at = e.end + 1
		ok := false
		if d == nil && e.series != nil {
			// Past the placeholder measurement.
			ok = w.addFast(w.chunk[start+1:e.end], e.series, e.line)
		}
		if !ok {
			if d == nil {
				d = lineprotocol.NewDecoderWithBytes(w.chunk[start:done])
			}
			// Every entry is one line that the decoder neither skips nor
			// splits, so the decoder's entries are ours one to one.
			if !d.Next() {
				w.reject(e.line, errInternal)
				continue
			}
			if err := w.decodeEntry(d, e); err != nil {
				w.reject(e.line, err)
				// The decoder may have stopped inside the entry, which
				// the splitter ended at its newline: skipping the rest,
				// it would take a quote there for the start of a string
				// running into the lines after it. Then the next entry
				// gets a decoder of its own, where the splitter put it.
				if bytes.IndexByte(w.chunk[start:e.end], '"') >= 0 {
					d = nil
				}
				continue
			}
		}
		if len(w.points) >= w.opts.BatchSize {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	if len(w.points) > 0 {
		w.pending()
	}
	// Keep the bytes of the entry being split, at the start of chunk.
	n := copy(w.chunk, w.chunk[done:])
	w.chunk, w.entries = w.chunk[:n], w.entries[:0]
	if w.open {
		w.cur.from -= done
		w.cur.start -= done
	}
	// Small chunks first, so that the series of the first lines are known
	// soon; then large ones, which cost less per line.
	w.chunkEntries = min(2*w.chunkEntries, maxChunkEntries)
	return nil
}

// decodeEntry appends the point of the entry the decoder is at to the batch.
// On error the batch is left as it was.
func (w *writer) decodeEntry(d *lineprotocol.Decoder, e entry) error {
	w.detail = w.keeps(e.line)
	tags, fields := len(w.tags), len(w.fields)
	p, err := w.parse(d, e)
	if err == nil && e.series == nil {
		err = w.validate(&p) // a cached series section was valid
	}
	if err != nil {
		w.tags, w.fields = w.tags[:tags], w.fields[:fields]
		return err
	}
	w.addPoint(p, e)
	return nil
}

// addPoint appends p, the point of entry e, to the batch, and remembers the
// series section of e for the lines to come if it is new.
func (w *writer) addPoint(p point.Point, e entry) {
	w.points = append(w.points, p)
	w.lines = append(w.lines, e.line)
	s := e.series
	if e.prefix > 0 {
		// Remember the series section for the lines to come.
		cost := e.prefix + len(p.Measurement) + entryCost*(1+len(p.Tags))
		if len(w.series) >= maxSeries || w.seriesBytes+cost > maxSeriesBytes {
			clear(w.series)
			w.seriesBytes = 0
		}
		w.seriesBytes += cost
		s = &series{measurement: p.Measurement, tags: slices.Clone(p.Tags)}
		w.series[string(w.chunk[e.off:e.off+e.prefix])] = s
	}
	if w.app != nil {
		w.sers = append(w.sers, s)
	}
}

func (w *writer) parse(d *lineprotocol.Decoder, e entry) (point.Point, error) {
	var p point.Point
	slot := 1
	t0 := len(w.tags)
	if s := e.series; s != nil {
		// The decoder skips the placeholder measurement.
		p.Measurement = s.measurement
		w.tags = append(w.tags, s.tags...)
		slot += 2 * len(s.tags)
	} else {
		m, err := d.Measurement()
		if err != nil {
			return p, w.decodeError(err, e)
		}
		p.Measurement = w.name(0, m)
	}
	for e.series == nil { // the tags, unless cached
		k, v, err := d.NextTag()
		if err != nil {
			return p, w.decodeError(err, e)
		}
		if k == nil {
			break
		}
		w.tags = append(w.tags, point.Tag{Key: w.name(slot, k), Value: w.name(slot+1, v)})
		slot += 2
	}
	if n := len(w.tags); n > t0 {
		p.Tags = w.tags[t0:n:n]
	}
	f0 := len(w.fields)
	for {
		k, kind, b, err := d.NextFieldBytes()
		if err != nil {
			return p, w.decodeError(err, e)
		}
		if k == nil {
			break
		}
		v, err := parseValue(kind, b)
		if err != nil {
			if !w.detail {
				return p, errNotKept
			}
			return p, invalidf("field %q: %v", k, valueError(kind, b, err))
		}
		w.setField(f0, w.name(slot, k), v)
		slot++
	}
	if n := len(w.fields); n > f0 {
		p.Fields = w.fields[f0:n:n]
	}
	tb, err := d.TimeBytes()
	if err != nil {
		return p, w.decodeError(err, e)
	}
	if tb == nil {
		p.Time = w.now()
		return p, nil
	}
	p.Time, err = w.parseTime(tb)
	return p, err
}

// setField adds the field key=v to the point whose fields start at f0 in
// the batch's fields; of two fields with one key, the last value wins, as
// in InfluxDB.
func (w *writer) setField(f0 int, key string, v point.Value) {
	for i := f0; i < len(w.fields); i++ {
		if w.fields[i].Key == key {
			w.fields[i].Value = v
			return
		}
	}
	w.fields = append(w.fields, point.Field{Key: key, Value: v})
}

// decodeError turns a decoder error into a reason with the column in the
// input line; the decoder's line number counts chunk lines and is dropped.
func (w *writer) decodeError(err error, e entry) error {
	if !w.detail {
		return errNotKept
	}
	var de *lineprotocol.DecodeError
	if !errors.As(err, &de) {
		return &invalidError{err: err}
	}
	ie := &invalidError{err: de.Err}
	if !e.multi {
		ie.col = de.Column + e.shift
	}
	return ie
}

// now returns Options.Now for the current batch, read on first use.
func (w *writer) now() int64 {
	if !w.nowSet {
		ns := w.opts.Now().UnixNano()
		if r := ns % w.unit; r < 0 {
			ns -= r + w.unit
		} else {
			ns -= r
		}
		w.nowNS, w.nowSet = ns, true
	}
	return w.nowNS
}

func (w *writer) parseTime(b []byte) (int64, error) {
	t, err := atoi(b)
	if err != nil {
		if !w.detail {
			return 0, errNotKept
		}
		if errors.Is(err, strconv.ErrRange) {
			return 0, invalidf("timestamp %s out of range", b)
		}
		return 0, invalidf("invalid timestamp %q", b)
	}
	if u := w.unit; u != 1 {
		if t > math.MaxInt64/u || t < math.MinInt64/u {
			if !w.detail {
				return 0, errNotKept
			}
			return 0, invalidf("timestamp %s%s out of range", b, w.opts.Precision)
		}
		t *= u
	}
	return t, nil
}

// validate checks p like point.Validate, which the engine applies, but only
// for what the decoder leaves open. The decoder already guarantees non-empty
// names without control bytes (so without newlines) and at least one field;
// parseValue rejects NaN and infinities, and parse drops duplicate fields. So
// what remains is duplicate tag keys. (point.Validate scans every name for
// newlines, which costs a fifth of the parse; the tests check that every
// point handed to the DB passes it.) Many tags are checked in sorted order,
// so that a line holding thousands costs O(n log n), not O(n²).
func (w *writer) validate(p *point.Point) error {
	if len(p.Tags) <= smallTagSet {
		for i := 1; i < len(p.Tags); i++ {
			for _, t := range p.Tags[:i] {
				if t.Key == p.Tags[i].Key {
					if !w.detail {
						return errNotKept
					}
					return invalidf("duplicate tag key %q", t.Key)
				}
			}
		}
		return nil
	}
	keys := w.keys[:0]
	for _, t := range p.Tags {
		keys = append(keys, t.Key)
	}
	slices.Sort(keys)
	w.keys = keys
	defer clear(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			if !w.detail {
				return errNotKept
			}
			return invalidf("duplicate tag key %q", keys[i])
		}
	}
	return nil
}

// smallTagSet is the most tags validate compares pairwise.
const smallTagSet = 16

// atoi parses a decimal int64 like strconv.ParseInt(string(b), 10, 64),
// several times faster on the 19-digit timestamps of nanosecond input.
// Its errors are strconv.ErrSyntax and strconv.ErrRange themselves, so
// that a rejected line costs no allocation.
func atoi(b []byte) (int64, error) {
	digits := b
	if len(b) > 0 && b[0] == '-' {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return atoiSlow(b)
	}
	var n uint64 // 19 digits cannot overflow it
	for len(digits) >= 8 {
		v, ok := parse8(digits)
		if !ok {
			return atoiSlow(b)
		}
		n = n*1e8 + v
		digits = digits[8:]
	}
	for _, c := range digits {
		c -= '0'
		if c > 9 {
			return atoiSlow(b)
		}
		n = n*10 + uint64(c)
	}
	if b[0] == '-' {
		if n > 1<<63 {
			return atoiSlow(b)
		}
		return int64(-n), nil
	}
	if n > math.MaxInt64 {
		return atoiSlow(b)
	}
	return int64(n), nil
}

// atoiSlow is atoi for any input: an optional sign and decimal digits. It
// returns what strconv.ParseInt returns, with strconv's sentinels as the
// errors (no *strconv.NumError, which would cost allocations).
func atoiSlow(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		digits = b[1:]
	}
	n, err := atou(digits)
	switch {
	case err == strconv.ErrSyntax:
		return 0, err
	case neg && (err != nil || n > 1<<63):
		return math.MinInt64, strconv.ErrRange
	case neg:
		return int64(-n), nil
	case err != nil || n > math.MaxInt64:
		return math.MaxInt64, strconv.ErrRange
	}
	return int64(n), nil
}

// atou parses decimal digits (no sign) like strconv.ParseUint(string(b),
// 10, 64), with strconv's sentinels as the errors.
func atou(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, strconv.ErrSyntax
	}
	var n uint64
	over := false
	for _, c := range b {
		c -= '0'
		if c > 9 {
			return 0, strconv.ErrSyntax
		}
		if n > (math.MaxUint64-uint64(c))/10 {
			over = true
			continue
		}
		n = n*10 + uint64(c)
	}
	if over {
		return math.MaxUint64, strconv.ErrRange
	}
	return n, nil
}

// parse8 parses the 8 decimal digits that b starts with, in a few word
// operations. It reports false if one of the bytes is not a digit.
func parse8(b []byte) (uint64, bool) {
	v := binary.LittleEndian.Uint64(b) // b[0], the first digit, in the low byte
	// A digit is 0x30-0x39: its high nibble is 3, and adding 6 to it
	// carries into the high nibble for 0x3a-0x3f only.
	if v&0xf0f0f0f0f0f0f0f0 != 0x3030303030303030 || (v+0x0606060606060606)&0xf0f0f0f0f0f0f0f0 != 0x3030303030303030 {
		return 0, false
	}
	v -= 0x3030303030303030
	v = (v*10 + v>>8) & 0x00ff00ff00ff00ff   // pairs of digits in 16-bit lanes
	v = (v*100 + v>>16) & 0x0000ffff0000ffff // groups of four in 32-bit lanes
	return (v*10000 + v>>32) & 0x00000000ffffffff, true
}

// name returns b as a string. slot is the position of the name in its line
// (measurement, tag keys and values, field keys): names usually repeat at the
// same position from one line to the next, which saves the map lookup.
func (w *writer) name(slot int, b []byte) string {
	if slot < len(w.recent) {
		if s := w.recent[slot]; s == string(b) {
			return s
		}
		s := w.intern(b)
		w.recent[slot] = s
		return s
	}
	return w.intern(b)
}

// intern returns b as a string, from the table of names when it is there.
func (w *writer) intern(b []byte) string {
	if s, ok := w.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= maxInternLen {
		if len(w.names) >= maxInterned || w.namesBytes+len(b)+entryCost > maxInternBytes {
			clear(w.names)
			w.namesBytes = 0
		}
		w.namesBytes += len(b) + entryCost
		w.names[s] = s
	}
	return s
}

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseSimpleFloat parses the common decimal form -ddd.ddd with at most 15
// digits and no exponent. Then the digits as an integer and the power of ten
// are exact float64s and their quotient, rounded once, is what
// strconv.ParseFloat returns. It reports false for anything else.
func parseSimpleFloat(b []byte) (float64, bool) {
	i := 0
	if len(b) > 0 && b[0] == '-' {
		i = 1
	}
	var mant uint64
	digits, frac := 0, -1 // frac counts digits after the point, -1 before it
	for _, c := range b[i:] {
		if c == '.' {
			if frac >= 0 {
				return 0, false
			}
			frac = 0
			continue
		}
		if c -= '0'; c > 9 || digits == 15 {
			return 0, false
		}
		mant = mant*10 + uint64(c)
		digits++
		if frac >= 0 {
			frac++
		}
	}
	if digits == 0 {
		return 0, false
	}
	f := float64(mant)
	if frac > 0 {
		f /= pow10[frac]
	}
	if i == 1 {
		f = -f
	}
	return f, true
}

// overflows reports whether b is a decimal float ([+-]digits[.digits]
// [e[+-]digits]) whose leading digit stands for 10^309 or more, which
// strconv.ParseFloat refuses as out of range. It reports false for
// anything else (strconv decides).
func overflows(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		i++
	}
	lead, seen, digits := 0, false, 0 // lead: the leading digit's power of ten before the exponent
	for pt := false; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '.' && !pt:
			pt = true
		case c >= '0' && c <= '9':
			digits++
			switch {
			case !seen && c != '0':
				seen = true
				if pt {
					lead-- // counted below from the point
				}
			case !seen && pt:
				lead--
			case seen && !pt:
				lead++
			}
		case c == 'e' || c == 'E':
			goto exp
		default:
			return false
		}
	}
	return false // no exponent: at most len(b) digits, far below 10^309 for real input
exp:
	if digits == 0 || !seen {
		return false
	}
	i++
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	if i == len(b) {
		return false
	}
	e := 0
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			return false
		}
		if e < 1e6 {
			e = e*10 + int(c)
		}
	}
	if neg {
		e = -e
	}
	return lead+e >= 309
}

// parseValue parses the bytes of a field value of the given kind, as
// returned by Decoder.NextFieldBytes (strings are already unescaped and
// checked to be UTF-8). Its errors are sentinels, which cost no allocation
// (valueError words them for a reason that is kept), but for a float that
// only strconv can tell invalid, which costs strconv's error.
func parseValue(kind lineprotocol.ValueKind, b []byte) (point.Value, error) {
	switch kind {
	case lineprotocol.Float:
		if f, ok := parseSimpleFloat(b); ok {
			return point.Float(f), nil
		}
		if overflows(b) {
			return point.Value{}, strconv.ErrRange // without strconv's error
		}
		// What the decoder accepts: strconv's syntax (so hexadecimal
		// mantissas too), finite values only.
		f, err := strconv.ParseFloat(string(b), 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return point.Value{}, strconv.ErrRange
		case err != nil:
			return point.Value{}, strconv.ErrSyntax
		case math.IsInf(f, 0) || math.IsNaN(f):
			return point.Value{}, errNotNumber
		}
		return point.Float(f), nil
	case lineprotocol.Int:
		n, err := atoi(b)
		if err != nil {
			return point.Value{}, err
		}
		return point.Int(n), nil
	case lineprotocol.Uint:
		n, err := atou(b)
		if err != nil {
			return point.Value{}, err
		}
		return point.Uint(n), nil
	case lineprotocol.Bool:
		switch string(b) {
		case "t", "T", "true", "True", "TRUE":
			return point.Bool(true), nil
		case "f", "F", "false", "False", "FALSE":
			return point.Bool(false), nil
		}
		return point.Value{}, strconv.ErrSyntax
	case lineprotocol.String:
		return point.String(string(b)), nil
	}
	return point.Value{}, errUnknownKind
}

var (
	errNotNumber   = errors.New("lineproto: not a number")
	errUnknownKind = errors.New("lineproto: unknown value kind")
)

// valueError words the error parseValue returned for the value b of kind.
func valueError(kind lineprotocol.ValueKind, b []byte, err error) error {
	rng := err == strconv.ErrRange
	switch kind {
	case lineprotocol.Float:
		switch {
		case rng:
			return fmt.Errorf("float %s out of range", b)
		case err == errNotNumber:
			return fmt.Errorf("float %s is not a number", b)
		}
		return fmt.Errorf("invalid float %q", b)
	case lineprotocol.Int:
		if rng {
			return fmt.Errorf("integer %si out of range", b)
		}
		return fmt.Errorf("invalid integer %q", string(b)+"i")
	case lineprotocol.Uint:
		if rng {
			return fmt.Errorf("unsigned integer %su out of range", b)
		}
		return fmt.Errorf("invalid unsigned integer %q", string(b)+"u")
	case lineprotocol.Bool:
		return fmt.Errorf("invalid boolean %q", b)
	}
	return fmt.Errorf("unknown value kind %v", kind)
}
