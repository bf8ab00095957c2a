package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratadb/strata/engine"
)

// JSONMapping says how a JSON payload becomes points. A payload is an
// object (one reading), an array of objects (one reading each), or, with
// Readings set, an object whose member Readings is an array of objects. A
// member named by the mapping is looked up in the reading first and then in
// the enclosing object, so that values shared by the readings (a device id,
// a time) can sit beside the array. A name with dots ("a.b") walks into
// nested objects.
//
// Example: with Measurement "env", Time "ts", TimeUnit "ms", Tags
// ["sensor"], TopicTags {2: "site"} and no Fields, the message
//
//	topic   plant/berlin/env
//	payload {"sensor":"s1","ts":1700000000000,"temp":21.5,"hum":40,"ok":true}
//
// becomes env,sensor=s1,site=berlin hum=40,ok=true,temp=21.5 1700000000000000000.
type JSONMapping struct {
	// Measurement is the measurement of every point, unless
	// MeasurementKey or MeasurementLevel gives one. Default "mqtt".
	Measurement string
	// MeasurementKey is a member whose string value is the measurement.
	MeasurementKey string
	// MeasurementLevel is a topic level (1 is the first) that is the
	// measurement, when MeasurementKey is empty or missing.
	MeasurementLevel int
	// Time is the member holding the time: a number in TimeUnit, or an
	// RFC 3339 string. Empty, missing or null: the time the message arrived.
	Time string
	// TimeUnit is the unit of a numeric time: "ns", "us", "ms" or "s"
	// (fractions allowed, read exactly to the nanosecond and truncated
	// below it); default "s".
	TimeUnit string
	// Tags are members whose values (strings, numbers or booleans, as
	// text: an integer with all its digits, another number as the shortest
	// float) become tags of the same name. A missing one is left out. A tag
	// key may be given once, here or in TopicTags.
	Tags []string
	// TopicTags maps topic levels (1 is the first) to tag keys.
	TopicTags map[int]string
	// Fields are the members stored as fields. Empty means every member
	// of the reading holding a number or a boolean that is not the time,
	// the measurement or a tag. Numbers are stored as floats, booleans as
	// booleans, strings (only when named here) as strings.
	Fields []string
	// Readings is a member holding an array of readings; empty means the
	// payload itself is the reading or the array of readings.
	Readings string
}

func (m *JSONMapping) validate() error {
	switch m.TimeUnit {
	case "", "ns", "us", "µs", "ms", "s":
	default:
		return fmt.Errorf("json time unit %q (want ns, us, ms or s)", m.TimeUnit)
	}
	if m.MeasurementLevel < 0 {
		return fmt.Errorf("json measurement level %d", m.MeasurementLevel)
	}
	// A tag key given twice would make every point one the database
	// refuses (a duplicate tag key).
	keys := map[string]bool{}
	for _, key := range m.Tags {
		if key == "" || keys[key] {
			return fmt.Errorf("json tag %q: empty or given twice", key)
		}
		keys[key] = true
	}
	for level, key := range m.TopicTags {
		if level < 1 || key == "" {
			return fmt.Errorf("json topic tag %d=%q: levels start at 1 and need a key", level, key)
		}
		if keys[key] {
			return fmt.Errorf("json topic tag %d=%q: tag key given twice", level, key)
		}
		keys[key] = true
	}
	return nil
}

// unitExp returns the unit of numeric times in ns as a power of ten.
func (m *JSONMapping) unitExp() int {
	switch m.TimeUnit {
	case "ns":
		return 0
	case "us", "µs":
		return 3
	case "ms":
		return 6
	}
	return 9
}

// minTime and maxTime are the times a point can hold (int64 Unix ns).
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// maxJSONReadings bounds the readings of one message.
const maxJSONReadings = 1 << 20

type jsonDecoder struct {
	m      *JSONMapping
	levels []string
}

func (d *jsonDecoder) decode(topic string, payload []byte, recv time.Time, dst []engine.Point) ([]engine.Point, error) {
	v, err := unmarshalJSON(payload)
	if err != nil {
		return dst, fmt.Errorf("%w: json: %w", ErrPayload, err)
	}
	var outer map[string]any
	var readings []any
	switch x := v.(type) {
	case map[string]any:
		if d.m.Readings != "" {
			outer = x
			r, ok := lookup(x, d.m.Readings).([]any)
			if !ok {
				return dst, fmt.Errorf("%w: json: member %q is not an array", ErrPayload, d.m.Readings)
			}
			readings = r
		} else {
			readings = []any{x}
		}
	case []any:
		readings = x
	default:
		return dst, fmt.Errorf("%w: json: want an object or an array, got %T", ErrPayload, v)
	}
	if len(readings) > maxJSONReadings {
		return dst, fmt.Errorf("%w: json: %d readings, at most %d", ErrPayload, len(readings), maxJSONReadings)
	}
	d.levels = strings.Split(topic, "/")
	var firstErr error
	bad := 0
	for i, r := range readings {
		obj, ok := r.(map[string]any)
		var p engine.Point
		var err error
		if !ok {
			err = fmt.Errorf("reading %d is %T, not an object", i, r)
		} else if p, err = d.point(obj, outer, recv); err != nil {
			err = fmt.Errorf("reading %d: %w", i, err)
		}
		if err != nil {
			bad++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		dst = append(dst, p)
	}
	if firstErr != nil {
		return dst, fmt.Errorf("%w: json: %d of %d readings rejected, first: %w", ErrPayload, bad, len(readings), firstErr)
	}
	return dst, nil
}

// unmarshalJSON decodes payload as json.Unmarshal into an any does, but
// with numbers as json.Number, so that a time keeps every digit (a float64
// holds 15 to 17, and a time in ms, us or ns needs more) and so does an
// integer tag. As Unmarshal, it refuses trailing data; a number beyond
// float64 fails the reading that uses it (numberFloat), not the message.
func unmarshalJSON(payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("invalid character after top-level value")
		}
		return nil, err
	}
	return v, nil
}

// numberFloat returns n as a float64; an error when it is beyond one.
func numberFloat(n json.Number) (float64, error) {
	f, err := n.Float64()
	if err != nil {
		return 0, fmt.Errorf("number %s out of range", n)
	}
	return f, nil
}

// numberNanos returns the JSON number s, in units of 10^exp ns, in ns:
// exactly, truncated toward zero below the nanosecond. ok is false when
// it is beyond int64.
func numberNanos(s string, exp int) (ns int64, ok bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, e, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return 0, true
	}
	// The value is digits × 10^x.
	x := exp - len(frac)
	if hasExp {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil { // an exponent beyond int64
			n = math.MaxInt64
			if strings.HasPrefix(e, "-") {
				n = math.MinInt64
			}
		}
		x += int(max(min(n, 1<<20), -1<<20))
	}
	if x < 0 {
		if -x >= len(digits) {
			return 0, true
		}
		digits, x = digits[:len(digits)+x], 0
	}
	if len(digits)+x > 19 { // at least 10^19, beyond int64
		return 0, false
	}
	u, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	for range x {
		u *= 10 // at most 19 digits in all: no overflow of uint64
	}
	switch {
	case neg && u == 1<<63:
		return math.MinInt64, true
	case u > math.MaxInt64:
		return 0, false
	case neg:
		return -int64(u), true
	}
	return int64(u), true
}

// get looks name up in the reading, then in the enclosing object.
func get(r, outer map[string]any, name string) any {
	if v := lookup(r, name); v != nil {
		return v
	}
	if outer != nil {
		return lookup(outer, name)
	}
	return nil
}

// lookup returns the member at a dotted path, or nil.
func lookup(obj map[string]any, name string) any {
	if v, ok := obj[name]; ok {
		return v
	}
	for {
		head, rest, ok := strings.Cut(name, ".")
		if !ok {
			return obj[name]
		}
		next, isObj := obj[head].(map[string]any)
		if !isObj {
			return nil
		}
		obj, name = next, rest
	}
}

func (d *jsonDecoder) point(r, outer map[string]any, recv time.Time) (engine.Point, error) {
	m := d.m
	p := engine.Point{Measurement: m.Measurement}
	if m.MeasurementLevel > 0 && m.MeasurementLevel <= len(d.levels) && d.levels[m.MeasurementLevel-1] != "" {
		p.Measurement = d.levels[m.MeasurementLevel-1]
	}
	if m.MeasurementKey != "" {
		if s, ok := get(r, outer, m.MeasurementKey).(string); ok && s != "" {
			p.Measurement = s
		}
	}
	if p.Measurement == "" {
		p.Measurement = "mqtt"
	}
	p.Time = recv.UnixNano()
	if m.Time != "" {
		switch t := get(r, outer, m.Time).(type) {
		case nil:
		case json.Number:
			ns, ok := numberNanos(string(t), m.unitExp())
			if !ok {
				return p, fmt.Errorf("time %v out of range", t)
			}
			p.Time = ns
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return p, fmt.Errorf("time: %w", err)
			}
			// UnixNano is undefined outside int64 nanoseconds (1677 to 2262).
			if ts.Before(minTime) || ts.After(maxTime) {
				return p, fmt.Errorf("time %q out of range", t)
			}
			p.Time = ts.UnixNano()
		default:
			return p, fmt.Errorf("time member %q is %T", m.Time, t)
		}
	}
	for level, key := range m.TopicTags {
		if level <= len(d.levels) && d.levels[level-1] != "" {
			p.Tags = append(p.Tags, engine.Tag{Key: key, Value: d.levels[level-1]})
		}
	}
	for _, key := range m.Tags {
		s, ok, err := scalarText(get(r, outer, key))
		if err != nil {
			return p, fmt.Errorf("tag %q: %w", key, err)
		}
		if ok && s != "" {
			p.Tags = append(p.Tags, engine.Tag{Key: key, Value: s})
		}
	}
	if len(m.Fields) > 0 {
		for _, key := range m.Fields {
			v, ok, err := fieldValue(get(r, outer, key), true)
			if err != nil {
				return p, fmt.Errorf("field %q: %w", key, err)
			}
			if ok {
				p.Fields = append(p.Fields, engine.Field{Key: key, Value: v})
			}
		}
	} else {
		for key, x := range r {
			if key == m.Time || key == m.MeasurementKey || slices.Contains(m.Tags, key) {
				continue
			}
			v, ok, err := fieldValue(x, false)
			if err != nil {
				return p, fmt.Errorf("field %q: %w", key, err)
			}
			if ok {
				p.Fields = append(p.Fields, engine.Field{Key: key, Value: v})
			}
		}
		slices.SortFunc(p.Fields, func(a, b engine.Field) int { return strings.Compare(a.Key, b.Key) })
	}
	if len(p.Fields) == 0 {
		return p, fmt.Errorf("no field")
	}
	return p, nil
}

// scalarText returns v as a tag value: an integer as written (a float64
// would round an id of more than 15 to 17 digits), another number as the
// shortest float.
func scalarText(v any) (string, bool, error) {
	switch x := v.(type) {
	case string:
		return x, true, nil
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if x == "-0" {
				return "0", true, nil
			}
			return string(x), true, nil
		}
		f, err := numberFloat(x)
		if err != nil {
			return "", false, err
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true, nil
	case bool:
		return strconv.FormatBool(x), true, nil
	}
	return "", false, nil
}

func fieldValue(v any, strings bool) (engine.Value, bool, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := numberFloat(x)
		if err != nil {
			return engine.Value{}, false, err
		}
		return engine.Float(f), true, nil
	case bool:
		return engine.Bool(x), true, nil
	case string:
		if strings {
			return engine.String(x), true, nil
		}
	}
	return engine.Value{}, false, nil
}
