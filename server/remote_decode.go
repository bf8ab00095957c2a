package server

// A remote-write body is decoded in place, field by field, with protowire
// (google.golang.org/protobuf's wire-format primitives), rather than
// unmarshalled into a prompb.WriteRequest: a generated Unmarshal allocates
// a struct per message, so 32 MiB of empty messages ("0a 00" repeated)
// became 16M TimeSeries of 96 bytes each, and several GB of heap. Here a
// request costs its decompressed bytes, the strings of the series it
// stores, and a scratch and a batch that do not grow with the body,
// whatever the message shape:
//
//   - checkWriteRequest walks the whole body once, allocating nothing: it
//     checks the wire format of every message strata reads and the framing
//     of those it skips, and counts the samples. A body that does not
//     decode is refused before anything of it is stored.
//   - eachSeries walks it again and hands over one time series at a time:
//     its labels as views into the body (at most maxRemoteLabels, in a
//     scratch reused from series to series) and its bytes, over which a
//     sampleIter reads the samples.
//
// The messages (prompb's remote.proto and types.proto; other fields are
// skipped, as protobuf readers do):
//
//	WriteRequest { repeated TimeSeries timeseries = 1; repeated MetricMetadata metadata = 3; }
//	TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2;
//	               repeated Exemplar exemplars = 3; repeated Histogram histograms = 4; }
//	Label        { string name = 1; string value = 2; }
//	Sample       { double value = 1; int64 timestamp = 2; }

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stratadb/strata/engine"
)

// maxRemoteLabels is the most labels a remote-write series may have: the
// engine's tag limit and the metric name. A series with more is refused
// without its labels being held.
const maxRemoteLabels = engine.MaxTags + 1

// errWire is the cause of a body that is no WriteRequest.
var errWire = errors.New("server: malformed protobuf")

// wireLabel is a label of a series, as views into the body.
type wireLabel struct{ name, value []byte }

// consumeField reads the field at the start of b: its number, its wire
// type, the payload of a length-delimited field (nil for the others), and
// the length of the whole field.
func consumeField(b []byte) (num protowire.Number, typ protowire.Type, val []byte, n int, err error) {
	num, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: %v", errWire, protowire.ParseError(tn))
	}
	var vn int
	if typ == protowire.BytesType {
		val, vn = protowire.ConsumeBytes(b[tn:])
	} else {
		vn = protowire.ConsumeFieldValue(num, typ, b[tn:])
	}
	if vn < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: field %d: %v", errWire, num, protowire.ParseError(vn))
	}
	return num, typ, val, tn + vn, nil
}

// checkFraming checks that b is a sequence of well-formed fields, of any
// numbers and types: the framing of a message strata skips.
func checkFraming(b []byte) error {
	for len(b) > 0 {
		_, _, _, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// wantType reports a known field of the wrong wire type, which generated
// protobuf code refuses too.
func wantType(msg string, num protowire.Number, typ, want protowire.Type) error {
	if typ == want {
		return nil
	}
	return fmt.Errorf("%w: %s field %d has wire type %d, want %d", errWire, msg, num, typ, want)
}

// checkWriteRequest checks the wire format of the WriteRequest b and
// returns the number of samples it holds.
func checkWriteRequest(b []byte) (samples, histograms int, err error) {
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return 0, 0, err
		}
		b = b[n:]
		switch num {
		case 1:
			if err := wantType("WriteRequest", num, typ, protowire.BytesType); err != nil {
				return 0, 0, err
			}
			k, h, err := checkTimeSeries(v)
			if err != nil {
				return 0, 0, err
			}
			samples += k
			histograms += h
		case 3:
			if err := wantType("WriteRequest", num, typ, protowire.BytesType); err != nil {
				return 0, 0, err
			}
			if err := checkFraming(v); err != nil {
				return 0, 0, err
			}
		}
	}
	return samples, histograms, nil
}

func checkTimeSeries(b []byte) (samples, histograms int, err error) {
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return 0, 0, err
		}
		b = b[n:]
		if num < 1 || num > 4 {
			continue
		}
		if err := wantType("TimeSeries", num, typ, protowire.BytesType); err != nil {
			return 0, 0, err
		}
		switch num {
		case 1:
			err = checkMessage("Label", v, protowire.BytesType, protowire.BytesType)
		case 2:
			err = checkMessage("Sample", v, protowire.Fixed64Type, protowire.VarintType)
			samples++
		case 4: // native histograms: not stored (counted)
			err = checkFraming(v)
			histograms++
		default: // exemplars: not stored
			err = checkFraming(v)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return samples, histograms, nil
}

// checkMessage checks a message whose fields 1 and 2 have the wire types t1
// and t2 (Label, Sample).
func checkMessage(msg string, b []byte, t1, t2 protowire.Type) error {
	for len(b) > 0 {
		num, typ, _, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch num {
		case 1:
			err = wantType(msg, num, typ, t1)
		case 2:
			err = wantType(msg, num, typ, t2)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// eachSeries calls fn for each time series of the WriteRequest b, which
// checkWriteRequest accepted. labels holds the series' labels in the order
// sent (a scratch that the next call reuses), or its first maxRemoteLabels
// with tooMany set; ts is the series' encoding, for a sampleIter. It stops
// at the first error of fn.
func eachSeries(b []byte, scratch []wireLabel, fn func(labels []wireLabel, tooMany bool, ts []byte) error) error {
	return eachSeriesFrom(b, 0, scratch, func(_ int, labels []wireLabel, tooMany bool, ts []byte) error {
		return fn(labels, tooMany, ts)
	})
}

// eachSeriesFrom is eachSeries from offset off of b, the start of a field,
// and gives fn the offset of each series' field too.
func eachSeriesFrom(b []byte, off int, scratch []wireLabel, fn func(off int, labels []wireLabel, tooMany bool, ts []byte) error) error {
	for off < len(b) {
		num, typ, ts, n, err := consumeField(b[off:])
		if err != nil {
			return err
		}
		at := off
		off += n
		if num != 1 || typ != protowire.BytesType {
			continue
		}
		labels, tooMany, err := seriesLabels(ts, scratch[:0])
		if err != nil {
			return err
		}
		scratch = labels
		if err := fn(at, labels, tooMany, ts); err != nil {
			return err
		}
	}
	return nil
}

// seriesLabels appends the labels of the TimeSeries ts to dst, at most
// maxRemoteLabels of them.
func seriesLabels(ts []byte, dst []wireLabel) ([]wireLabel, bool, error) {
	for len(ts) > 0 {
		num, typ, v, n, err := consumeField(ts)
		if err != nil {
			return dst, false, err
		}
		ts = ts[n:]
		if num != 1 || typ != protowire.BytesType {
			continue
		}
		if len(dst) == maxRemoteLabels {
			return dst, true, nil
		}
		var l wireLabel
		for m := v; len(m) > 0; {
			num, typ, fv, n, err := consumeField(m)
			if err != nil {
				return dst, false, err
			}
			if typ == protowire.BytesType {
				// A field given twice: the last one wins, as protobuf has it.
				switch num {
				case 1:
					l.name = fv
				case 2:
					l.value = fv
				}
			}
			m = m[n:]
		}
		dst = append(dst, l)
	}
	return dst, false, nil
}

// sampleIter reads the samples of a TimeSeries encoding in order.
type sampleIter struct {
	b []byte
	t int64
	v float64
}

// next reads the next sample into t and v; it reports false at the end.
func (it *sampleIter) next() bool {
	for len(it.b) > 0 {
		num, typ, v, n, err := consumeField(it.b)
		if err != nil {
			it.b = nil
			return false
		}
		it.b = it.b[n:]
		if num != 2 || typ != protowire.BytesType {
			continue
		}
		it.t, it.v = 0, 0
		for m := v; len(m) > 0; {
			num, typ, tn := protowire.ConsumeTag(m)
			if tn < 0 {
				break
			}
			m = m[tn:]
			switch {
			case num == 1 && typ == protowire.Fixed64Type:
				u, vn := protowire.ConsumeFixed64(m)
				if vn < 0 {
					return false
				}
				it.v, m = math.Float64frombits(u), m[vn:]
			case num == 2 && typ == protowire.VarintType:
				u, vn := protowire.ConsumeVarint(m)
				if vn < 0 {
					return false
				}
				it.t, m = int64(u), m[vn:]
			default:
				vn := protowire.ConsumeFieldValue(num, typ, m)
				if vn < 0 {
					return false
				}
				m = m[vn:]
			}
		}
		return true
	}
	return false
}
