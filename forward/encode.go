package forward

// Encoders of a batch of samples for the two protocols.
//
// prometheus: a remote write 1.0 WriteRequest (protobuf, block-compressed
// with snappy), encoded with protowire:
//
//	WriteRequest { repeated TimeSeries timeseries = 1; }
//	TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//	Label        { string name = 1; string value = 2; }
//	Sample       { double value = 1; int64 timestamp = 2; } // ms
//
// Series are named as the query API names them: __name__ is m_f, or m when
// the field is "value"; tags are labels; characters no label name may hold
// become '_' (tag keys that become one name give one label, their values
// joined by ';' in key order), invalid UTF-8 in label values U+FFFD; a tag
// key that would become __name__ is left out. Labels are sorted by
// name. Float, int and uint samples are sent as float64, bools as 0 or 1;
// string fields are skipped (counted). Timestamps are floored to ms; of
// consecutive samples of a series in one ms, the later in time is sent,
// and none of the ms of the series' last sample in the previous batch.
//
// influx: line protocol as stored: the canonical series key's measurement
// and tags, the field, the value in its kind's syntax, ns timestamps. Fields
// of one point (same tag set and time, next to each other in the batch) share
// a line; a field written twice in a row (an overwrite) starts a new line,
// as a line may not hold a field key twice.

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/promname"
	"google.golang.org/protobuf/encoding/protowire"
)

// seriesMeta is what the encoders cache of one series.
type seriesMeta struct {
	kind engine.Kind
	// prometheus: the encoded Label fields of a TimeSeries.
	labels []byte
	// influx: the line prefix (escaped measurement and tags) and the
	// escaped field key, both cut from the canonical key.
	prefix, field string
}

// promName returns the metric name of (measurement, field): the query API's
// name (promname.Metric, server.MetricName) with each character a legacy
// metric name may not hold replaced by '_' (colons kept). The query API
// itself shows the name unsanitized, so a measurement or field outside
// [a-zA-Z0-9_:] is named differently there.
func promName(measurement, field string) string {
	return promname.Sanitize(promname.Metric(measurement, field), true)
}

// promLabels encodes the sorted label set of a series as repeated Label
// fields (field 1 of TimeSeries).
func promLabels(info engine.SeriesInfo) []byte {
	type label struct{ name, value string }
	ls := make([]label, 0, len(info.Tags)+1)
	ls = append(ls, label{"__name__", promName(info.Measurement, info.Field)})
	for _, t := range info.Tags {
		name := promname.Label(t.Key) // server.LabelName, the query API's
		if name == "__name__" {
			continue // as the query API leaves it out
		}
		// Remote-write receivers refuse a label value of invalid UTF-8;
		// the query API shows such bytes as U+FFFD too (JSON).
		ls = append(ls, label{name, strings.ToValidUTF8(t.Value, "\uFFFD")})
	}
	slices.SortStableFunc(ls, func(a, b label) int { return strings.Compare(a.name, b.name) })
	// Tag keys that sanitize alike give one label, their values joined by
	// ';' in key order (the tags' order, kept by the stable sort), as the
	// query API gives it: names must be unique.
	out := ls[:0]
	for i := 0; i < len(ls); i++ {
		if n := len(out); n > 0 && out[n-1].name == ls[i].name {
			out[n-1].value += ";" + ls[i].value
			continue
		}
		out = append(out, ls[i])
	}
	ls = out
	var dst, l []byte
	for _, x := range ls {
		l = protowire.AppendTag(l[:0], 1, protowire.BytesType)
		l = protowire.AppendString(l, x.name)
		l = protowire.AppendTag(l, 2, protowire.BytesType)
		l = protowire.AppendString(l, x.value)
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendBytes(dst, l)
	}
	return dst
}

// influxParts cuts a canonical series key ("m,k=v field", escaped as line
// protocol) at its unescaped space.
func influxParts(key string) (prefix, field string) {
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '\\':
			i++
		case ' ':
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

// floorMillis converts Unix ns to ms, flooring.
func floorMillis(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return ms
}

// promEncoder builds WriteRequests, reusing its buffers. add sorts a
// batch's samples into their series as they come, in a compact form (no
// copy of the feed's samples is kept), and encode writes them out.
type promEncoder struct {
	slot    []int32  // by series id (ids are dense): 1 + its group, 0 for none
	ids     []uint64 // ids with a group, in order of first appearance
	group   [][]promSample
	skipped int // samples of the batch it cannot carry
	// lastMs is, by series id, the ms of the last sample encoded in an
	// earlier batch (math.MinInt64 for none): a receiver that holds a
	// sample of that ms refuses another value for it, and with it the
	// whole batch, so a later sample of the same ms is not sent.
	lastMs []int64
	// sentMs is, by series id, the greatest ms of the series in a batch
	// the remote accepted (math.MinInt64 for none): a sample at or
	// behind it is what a receiver without an out-of-order window
	// refuses, and with it the whole batch (see encodeBatch's strict).
	sentMs []int64
}

// promSample is a sample as encoded: its time (ns; sent as ms) and the
// float64 value.
type promSample struct {
	t int64
	v float64
}

// add adds samples to the batch being built, in order.
func (e *promEncoder) add(samples []engine.FeedSample) {
	for i := range samples {
		s := &samples[i]
		v, ok := promname.Value(s.Value)
		if !ok {
			e.skipped++
			continue
		}
		if s.ID < uint64(len(e.lastMs)) && e.lastMs[s.ID] == floorMillis(s.Time) {
			continue // the remote has this ms of the series (see lastMs)
		}
		if s.ID >= uint64(len(e.slot)) {
			e.slot = slices.Grow(e.slot, int(s.ID)+1-len(e.slot))[:s.ID+1]
		}
		g := e.slot[s.ID]
		if g == 0 {
			e.ids = append(e.ids, s.ID)
			g = int32(len(e.ids))
			e.slot[s.ID] = g
			if len(e.group) < len(e.ids) {
				e.group = append(e.group, nil)
			}
		}
		// Two samples of a series in one ms are one Prometheus sample,
		// and a receiver refuses a request that holds both with different
		// values (and with them the batch). Of consecutive ones send the
		// later in time (on a tie the later write), as the query API shows.
		ss := e.group[g-1]
		if n := len(ss); n > 0 && floorMillis(ss[n-1].t) == floorMillis(s.Time) {
			if s.Time >= ss[n-1].t {
				ss[n-1] = promSample{s.Time, v}
			}
			continue
		}
		e.group[g-1] = append(ss, promSample{s.Time, v})
	}
}

// encode appends the WriteRequest of the samples added since the last call
// to dst (uncompressed) and returns it with the number of samples skipped.
// The encoder is then empty, the batch taken as accepted.
func (e *promEncoder) encode(dst []byte, meta func(id uint64) *seriesMeta) ([]byte, int) {
	dst, skipped, _ := e.encodeBatch(dst, meta, false)
	e.finish(true)
	return dst, skipped
}

// encodeBatch appends the WriteRequest of the samples added since the last
// finish to dst (uncompressed) and returns it with the number of samples
// skipped (values the protocol cannot carry). With strict, it leaves out
// the samples a receiver without an out-of-order window refuses: each at
// or behind its series' sentMs or an earlier sample of the series in the
// batch, counted in behind. The batch stays until finish.
func (e *promEncoder) encodeBatch(dst []byte, meta func(id uint64) *seriesMeta, strict bool) (_ []byte, skipped, behind int) {
	var kept []promSample
	for g, id := range e.ids {
		ss := e.group[g]
		if strict {
			floor := int64(math.MinInt64)
			if id < uint64(len(e.sentMs)) {
				floor = e.sentMs[id]
			}
			kept = kept[:0]
			for _, x := range ss {
				if ms := floorMillis(x.t); ms > floor {
					kept = append(kept, x)
					floor = ms
				}
			}
			behind += len(ss) - len(kept)
			if len(kept) == 0 {
				continue
			}
			ss = kept
		}
		m := meta(id)
		// A Sample is at most 20 bytes, so its length is one byte.
		size := len(m.labels) + len(ss)*(len(tagTSSample)+1+len(tagSampleValue)+8+len(tagSampleTime))
		for i := range ss {
			size += protowire.SizeVarint(uint64(floorMillis(ss[i].t)))
		}
		dst = append(dst, tagWRSeries...)
		dst = protowire.AppendVarint(dst, uint64(size))
		dst = append(dst, m.labels...)
		for i := range ss {
			ms := uint64(floorMillis(ss[i].t))
			dst = append(dst, tagTSSample...)
			dst = append(dst, byte(len(tagSampleValue)+8+len(tagSampleTime)+protowire.SizeVarint(ms)))
			dst = append(dst, tagSampleValue...)
			dst = protowire.AppendFixed64(dst, math.Float64bits(ss[i].v))
			dst = append(dst, tagSampleTime...)
			dst = protowire.AppendVarint(dst, ms)
		}
	}
	return dst, e.skipped, behind
}

// finish ends the batch: it notes each series' last ms sent (lastMs) and,
// when the remote accepted the batch, the greatest (sentMs), and empties
// the encoder.
func (e *promEncoder) finish(accepted bool) {
	for g, id := range e.ids {
		ss := e.group[g]
		for uint64(len(e.lastMs)) <= id {
			e.lastMs = append(e.lastMs, math.MinInt64)
		}
		e.lastMs[id] = floorMillis(ss[len(ss)-1].t)
		if accepted {
			for uint64(len(e.sentMs)) <= id {
				e.sentMs = append(e.sentMs, math.MinInt64)
			}
			for _, x := range ss {
				e.sentMs[id] = max(e.sentMs[id], floorMillis(x.t))
			}
		}
		e.slot[id] = 0
		e.group[g] = ss[:0]
	}
	e.ids = e.ids[:0]
	e.skipped = 0
}

// The field tags of the messages, encoded once.
var (
	tagWRSeries    = protowire.AppendTag(nil, 1, protowire.BytesType)   // WriteRequest.timeseries
	tagTSSample    = protowire.AppendTag(nil, 2, protowire.BytesType)   // TimeSeries.samples
	tagSampleValue = protowire.AppendTag(nil, 1, protowire.Fixed64Type) // Sample.value
	tagSampleTime  = protowire.AppendTag(nil, 2, protowire.VarintType)  // Sample.timestamp
)

// encodeInflux appends the line protocol of samples to dst.
func encodeInflux(dst []byte, samples []engine.FeedSample, meta func(id uint64) *seriesMeta) []byte {
	var prev *seriesMeta
	var prevTime int64
	open := false
	line := make([]uint64, 0, 32) // series of the open line's fields
	for i := range samples {
		s := &samples[i]
		m := meta(s.ID)
		if open && prev.prefix == m.prefix && prevTime == s.Time && !slices.Contains(line, s.ID) {
			dst = append(dst, ',')
		} else {
			line = line[:0]
			if open {
				dst = append(dst, ' ')
				dst = strconv.AppendInt(dst, prevTime, 10)
				dst = append(dst, '\n')
			}
			dst = append(dst, m.prefix...)
			dst = append(dst, ' ')
			open = true
		}
		line = append(line, s.ID)
		dst = append(dst, m.field...)
		dst = append(dst, '=')
		dst = appendInfluxValue(dst, s.Value)
		prev, prevTime = m, s.Time
	}
	if open {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, prevTime, 10)
		dst = append(dst, '\n')
	}
	return dst
}

func appendInfluxValue(dst []byte, v engine.Value) []byte {
	switch v.Kind() {
	case engine.KindFloat:
		return strconv.AppendFloat(dst, v.Float(), 'g', -1, 64)
	case engine.KindInt:
		return append(strconv.AppendInt(dst, v.Int(), 10), 'i')
	case engine.KindUint:
		return append(strconv.AppendUint(dst, v.Uint(), 10), 'u')
	case engine.KindBool:
		return strconv.AppendBool(dst, v.Bool())
	default:
		dst = append(dst, '"')
		s := v.Str()
		for i := 0; i < len(s); i++ {
			if s[i] == '"' || s[i] == '\\' {
				dst = append(dst, '\\')
			}
			dst = append(dst, s[i])
		}
		return append(dst, '"')
	}
}
