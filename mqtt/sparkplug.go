package mqtt

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mqtt/sparkplugb"
)

// Sparkplug B (Eclipse Sparkplug 3.0) as a host application reads it.
//
// Topics are spBv1.0/GROUP/TYPE/EDGE_NODE[/DEVICE]. An edge node announces
// its metrics in NBIRTH (and each device its own in DBIRTH) with a name, an
// optional alias and a datatype; later NDATA/DDATA metrics may carry only
// the alias. The state here maps (group, node, device) to the aliases of its
// last birth. A data message naming an alias no birth defined (strata
// restarted, the birth was missed) is counted and answered, at most once
// per RebirthInterval and node, with the rebirth request of the
// specification: an NCMD to spBv1.0/GROUP/NCMD/EDGE_NODE whose metric
// "Node Control/Rebirth" is the boolean true; the node answers with a new
// NBIRTH and DBIRTHs. A new NBIRTH starts a new session of the node: the
// aliases of its devices are forgotten until their DBIRTHs. NDEATH forgets
// the node's aliases (those of its devices too) when its bdSeq matches the
// one of the node's NBIRTH (an older one is a stale will and ignored);
// DDEATH forgets the device's. STATE messages (spBv1.0/STATE/HOST, and
// STATE/HOST of Sparkplug 2.2) and commands are not data and are ignored.
//
// Every metric value becomes a point: measurement = the metric name, tags
// group_id, edge_node_id and device_id (for device messages), field "value",
// time = the metric's timestamp, else the payload's, else the arrival time.
// Signed integers are stored as int (Int8 to Int32 read as two's complement
// from int_value or long_value, sign-extended or not), UInt8-32 as int,
// UInt64 as uint, Float and Double as float, Boolean as bool, String, Text
// and UUID as string, DateTime as int (ms). Null metrics (is_null, or no
// value) and transient ones (is_transient on the metric, or on its birth
// when the metric does not say: the specification has historians not
// store them) are left out silently. Other datatypes (arrays, datasets, templates, bytes, files,
// property sets) and floats that are NaN or infinite are skipped and
// counted (FilterStats.SkippedMetrics). A value that does not match its
// datatype, datatype Unknown, or a name or text that is not UTF-8 is
// skipped, counted, and makes the message a failure. Births and deaths are
// also recorded as points of measurement sparkplug_state, field "online"
// (true for a birth, false for a death), with the same tags; an NDEATH,
// whose payload time is the will's (set when the node connected), is
// recorded at its arrival, as the specification requires, and marks the
// node's known devices offline too.

// Sparkplug names fixed by the specification.
const (
	sparkplugNamespace = "spBv1.0"
	rebirthMetric      = "Node Control/Rebirth"
	bdSeqMetric        = "bdSeq"
	// StateMeasurement is the measurement of birth and death points.
	StateMeasurement = "sparkplug_state"
)

// maxSparkplugEntities bounds the nodes and devices remembered; past it the
// state is emptied and nodes are asked for rebirths as they send data.
const maxSparkplugEntities = 1 << 16

// spDef is what a birth says of a metric.
type spDef struct {
	datatype  sparkplugb.DataType
	transient bool
}

type spEntity struct {
	aliases map[uint64]string // metric name by alias
	defs    map[string]spDef  // by metric name
	bdSeq   int64             // of the NBIRTH; -1 if none
}

// sparkplugState is the Sparkplug state of a Subscriber, shared by its
// Sparkplug filters (births and data may come through different ones).
type sparkplugState struct {
	entities map[string]*spEntity // key: group/node or group/node/device
	rebirth  map[string]time.Time // key: group/node; last request
	payload  sparkplugb.Payload
}

// sparkplugDecoder decodes the messages of one filter; counters go to its
// subscription.
type sparkplugDecoder struct {
	*sparkplugState
	s   *Subscriber
	sub *subscription
}

func newSparkplugDecoder(s *Subscriber, sub *subscription) *sparkplugDecoder {
	if s.sparkplug == nil {
		s.sparkplug = &sparkplugState{entities: map[string]*spEntity{}, rebirth: map[string]time.Time{}}
	}
	return &sparkplugDecoder{sparkplugState: s.sparkplug, s: s, sub: sub}
}

func (d *sparkplugDecoder) decode(topic string, payload []byte, recv time.Time, dst []engine.Point) ([]engine.Point, error) {
	levels := strings.Split(topic, "/")
	if len(levels) >= 2 && levels[0] == sparkplugNamespace && levels[1] == "STATE" ||
		len(levels) == 2 && levels[0] == "STATE" { // Sparkplug 2.2
		return dst, nil // a host application's state, not data
	}
	if len(levels) < 4 || len(levels) > 5 || levels[0] != sparkplugNamespace {
		return dst, fmt.Errorf("%w: sparkplug: topic %q is not spBv1.0/GROUP/TYPE/NODE[/DEVICE]", ErrPayload, topic)
	}
	group, typ, node := levels[1], levels[2], levels[3]
	switch typ {
	case "NBIRTH", "DBIRTH", "NDATA", "DDATA", "NDEATH", "DDEATH":
	default:
		return dst, nil // NCMD, DCMD and the like: commands, not data
	}
	device := ""
	if len(levels) == 5 {
		device = levels[4]
	}
	// The ids become tags, which may not be empty.
	if isDevice := typ[0] == 'D'; isDevice != (len(levels) == 5) || group == "" || node == "" ||
		isDevice && device == "" || !utf8.ValidString(topic) {
		return dst, fmt.Errorf("%w: sparkplug: %s on topic %q", ErrPayload, typ, topic)
	}
	p := &d.payload
	proto.Reset(p)
	if err := proto.Unmarshal(payload, p); err != nil {
		return dst, fmt.Errorf("%w: sparkplug: %w", ErrPayload, err)
	}
	tags := []engine.Tag{{Key: "edge_node_id", Value: node}, {Key: "group_id", Value: group}}
	if device != "" {
		tags = append(tags, engine.Tag{Key: "device_id", Value: device})
	}
	msgTime, msgOK := recv.UnixNano(), true
	if p.Timestamp != nil {
		msgTime, msgOK = msToNanos(p.GetTimestamp())
	}
	nodeKey := group + "/" + node
	key := nodeKey
	if device != "" {
		key += "/" + device
	}

	switch typ {
	case "NBIRTH", "DBIRTH":
		if len(d.entities) >= maxSparkplugEntities {
			clear(d.entities)
		}
		e := &spEntity{aliases: map[uint64]string{}, defs: map[string]spDef{}, bdSeq: -1}
		if typ == "NBIRTH" {
			// A new session of the node: its devices will be born again.
			d.forget(nodeKey, true)
		}
		d.entities[key] = e
		for _, m := range p.Metrics {
			dt := sparkplugb.DataType(m.GetDatatype())
			if m.Name != nil {
				e.defs[m.GetName()] = spDef{datatype: dt, transient: m.GetIsTransient()}
				if m.Alias != nil {
					e.aliases[m.GetAlias()] = m.GetName()
				}
				if m.GetName() == bdSeqMetric {
					if v, st := metricValue(m, dt); st == valueOK {
						e.bdSeq = intValue(v)
					}
				}
			}
		}
		if msgOK {
			dst = append(dst, engine.Point{Measurement: StateMeasurement, Tags: tags,
				Fields: []engine.Field{{Key: "online", Value: engine.Bool(true)}}, Time: msgTime})
		}
		dst, err := d.metrics(p, nil, e, tags, msgTime, msgOK, nodeKey, dst)
		if err == nil && !msgOK {
			err = errTimeRange(1) // the online point
		}
		return dst, err

	case "NDEATH", "DDEATH":
		e := d.entities[key]
		if typ == "NDEATH" && e != nil && e.bdSeq >= 0 {
			for _, m := range p.Metrics {
				if m.GetName() != bdSeqMetric {
					continue
				}
				dt := sparkplugb.DataType(m.GetDatatype())
				if m.Datatype == nil {
					dt = e.defs[bdSeqMetric].datatype
				}
				if v, st := metricValue(m, dt); st == valueOK && intValue(v) != e.bdSeq {
					return dst, nil // the will of an earlier session
				}
			}
		}
		devices := d.forget(key, typ == "NDEATH")
		if typ == "NDEATH" {
			// The will's timestamp is that of the node's connection: the
			// specification has the host use the time it receives it.
			msgTime, msgOK = recv.UnixNano(), true
		}
		if !msgOK {
			return dst, errTimeRange(1)
		}
		offline := []engine.Field{{Key: "online", Value: engine.Bool(false)}}
		dst = append(dst, engine.Point{Measurement: StateMeasurement, Tags: tags, Fields: offline, Time: msgTime})
		// The node's death is its devices' too.
		for _, dev := range devices {
			devTags := append(slices.Clip(tags), engine.Tag{Key: "device_id", Value: dev})
			dst = append(dst, engine.Point{Measurement: StateMeasurement, Tags: devTags, Fields: offline, Time: msgTime})
		}
		return dst, nil
	}

	// NDATA, DDATA.
	e := d.entities[key]
	return d.metrics(p, e, e, tags, msgTime, msgOK, nodeKey, dst)
}

// forget drops the state of key, and of the node's devices when node is
// set; it returns the ids of those devices, sorted.
func (d *sparkplugDecoder) forget(key string, node bool) (devices []string) {
	delete(d.entities, key)
	if node {
		prefix := key + "/"
		for k := range d.entities {
			if dev, ok := strings.CutPrefix(k, prefix); ok {
				delete(d.entities, k)
				devices = append(devices, dev)
			}
		}
		slices.Sort(devices)
	}
	return devices
}

// metrics appends a point for each metric of p with a value. aliases
// resolves metrics sent by alias (nil for births, which carry names); defs
// gives the datatypes that data messages may leave out, and the transient
// flags. msgTime is the payload's time, which msgOK says fits int64 ns.
func (d *sparkplugDecoder) metrics(p *sparkplugb.Payload, aliases, defs *spEntity, tags []engine.Tag, msgTime int64, msgOK bool, nodeKey string, dst []engine.Point) ([]engine.Point, error) {
	unknown, badTime, skipped, bad := 0, 0, 0, 0
	for _, m := range p.Metrics {
		name, dt := m.GetName(), sparkplugb.DataType(m.GetDatatype())
		if m.Name == nil {
			ok := false
			if aliases != nil && m.Alias != nil {
				name, ok = aliases.aliases[m.GetAlias()]
			}
			if !ok {
				unknown++
				continue
			}
		}
		def, defined := spDef{}, false
		if defs != nil {
			def, defined = defs.defs[name]
		}
		if m.Datatype == nil {
			if !defined {
				unknown++
				continue
			}
			dt = def.datatype
		}
		transient := def.transient
		if m.IsTransient != nil {
			transient = m.GetIsTransient()
		}
		if m.GetIsNull() || m.Value == nil || transient { // no value is null
			continue
		}
		v, st := metricValue(m, dt)
		if st == valueOK && (name == "" || !utf8.ValidString(name)) {
			st = valueBad
		}
		switch st {
		case valueBad:
			bad++
			fallthrough
		case valueUnsupported:
			skipped++
			continue
		}
		t, ok := msgTime, msgOK
		if m.Timestamp != nil {
			t, ok = msToNanos(m.GetTimestamp())
		}
		if !ok {
			badTime++
			continue
		}
		dst = append(dst, engine.Point{Measurement: name, Tags: tags,
			Fields: []engine.Field{{Key: "value", Value: v}}, Time: t})
	}
	d.sub.skipped.Add(int64(skipped))
	var problems []string
	if unknown > 0 {
		d.sub.unknownAliases.Add(int64(unknown))
		d.requestRebirth(nodeKey)
		problems = append(problems, fmt.Sprintf("%d metrics of unknown alias or name (rebirth requested)", unknown))
	}
	if bad > 0 {
		problems = append(problems, fmt.Sprintf("%d metrics skipped: a value not of the datatype, datatype Unknown, or a name or text not UTF-8", bad))
	}
	if badTime > 0 {
		problems = append(problems, timeRangeText(badTime))
	}
	if len(problems) > 0 {
		return dst, fmt.Errorf("%w: sparkplug: %s", ErrPayload, strings.Join(problems, "; "))
	}
	return dst, nil
}

// errTimeRange reports n points not stored for a timestamp past what int64
// ns hold (2262).
func errTimeRange(n int) error {
	return fmt.Errorf("%w: sparkplug: %s", ErrPayload, timeRangeText(n))
}

func timeRangeText(n int) string {
	return fmt.Sprintf("%d points timestamped past 2262, beyond int64 nanoseconds", n)
}

// requestRebirth publishes the rebirth command to the node, at most once
// per RebirthInterval.
func (d *sparkplugDecoder) requestRebirth(nodeKey string) {
	now := time.Now()
	if last, ok := d.rebirth[nodeKey]; ok && now.Sub(last) < d.s.opts.RebirthInterval {
		return
	}
	if len(d.rebirth) >= maxSparkplugEntities {
		clear(d.rebirth)
	}
	d.rebirth[nodeKey] = now
	group, node, _ := strings.Cut(nodeKey, "/")
	b, err := proto.Marshal(RebirthRequest(now))
	if err != nil {
		return
	}
	d.sub.rebirths.Add(1)
	d.s.publish(sparkplugNamespace+"/"+group+"/NCMD/"+node, b)
}

// RebirthRequest returns the NCMD payload that asks an edge node to publish
// its births again.
func RebirthRequest(now time.Time) *sparkplugb.Payload {
	ms := uint64(now.UnixMilli())
	return &sparkplugb.Payload{
		Timestamp: proto.Uint64(ms),
		Metrics: []*sparkplugb.Payload_Metric{{
			Name:      proto.String(rebirthMetric),
			Timestamp: proto.Uint64(ms),
			Datatype:  proto.Uint32(uint32(sparkplugb.DataType_Boolean)),
			Value:     &sparkplugb.Payload_Metric_BooleanValue{BooleanValue: true},
		}},
	}
}

// intValue returns a bdSeq value as an int64; -1 for a kind it cannot be.
func intValue(v engine.Value) int64 {
	switch v.Kind() {
	case engine.KindInt:
		return v.Int()
	case engine.KindUint:
		return int64(v.Uint())
	case engine.KindFloat:
		return int64(v.Float())
	}
	return -1
}

// msToNanos converts a Sparkplug timestamp (ms) to ns; ok is false past
// what int64 ns hold.
func msToNanos(ms uint64) (ns int64, ok bool) {
	if ms > math.MaxInt64/1_000_000 {
		return 0, false
	}
	return int64(ms) * 1e6, true
}

// valueStatus says whether metricValue could read a value.
type valueStatus uint8

const (
	valueOK          valueStatus = iota
	valueUnsupported             // a datatype strata does not store, or a float NaN or infinite
	valueBad                     // a value not of its datatype, datatype Unknown, text not UTF-8
)

// metricValue returns the value of m as datatype dt.
func metricValue(m *sparkplugb.Payload_Metric, dt sparkplugb.DataType) (engine.Value, valueStatus) {
	switch dt {
	case sparkplugb.DataType_Int8, sparkplugb.DataType_Int16, sparkplugb.DataType_Int32,
		sparkplugb.DataType_UInt8, sparkplugb.DataType_UInt16, sparkplugb.DataType_UInt32:
		// The specification puts them in int_value; some encoders (Tahu's
		// Java one for UInt32) use long_value.
		var n uint64
		switch v := m.GetValue().(type) {
		case *sparkplugb.Payload_Metric_IntValue:
			n = uint64(v.IntValue)
		case *sparkplugb.Payload_Metric_LongValue:
			n = v.LongValue
		default:
			return engine.Value{}, valueBad
		}
		// Signed: two's complement, whether sign-extended or not.
		switch dt {
		case sparkplugb.DataType_Int8:
			return engine.Int(int64(int8(n))), valueOK
		case sparkplugb.DataType_Int16:
			return engine.Int(int64(int16(n))), valueOK
		case sparkplugb.DataType_Int32:
			return engine.Int(int64(int32(n))), valueOK
		}
		if n > math.MaxUint32 {
			return engine.Value{}, valueBad
		}
		return engine.Int(int64(n)), valueOK
	case sparkplugb.DataType_Int64, sparkplugb.DataType_UInt64, sparkplugb.DataType_DateTime:
		v, ok := m.GetValue().(*sparkplugb.Payload_Metric_LongValue)
		if !ok {
			return engine.Value{}, valueBad
		}
		if dt == sparkplugb.DataType_UInt64 {
			return engine.Uint(v.LongValue), valueOK
		}
		return engine.Int(int64(v.LongValue)), valueOK
	case sparkplugb.DataType_Float, sparkplugb.DataType_Double:
		var f float64
		switch v := m.GetValue().(type) {
		case *sparkplugb.Payload_Metric_FloatValue:
			if dt != sparkplugb.DataType_Float {
				return engine.Value{}, valueBad
			}
			f = float64(v.FloatValue)
		case *sparkplugb.Payload_Metric_DoubleValue:
			if dt != sparkplugb.DataType_Double {
				return engine.Value{}, valueBad
			}
			f = v.DoubleValue
		default:
			return engine.Value{}, valueBad
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return engine.Value{}, valueUnsupported // the database stores finite floats
		}
		return engine.Float(f), valueOK
	case sparkplugb.DataType_Boolean:
		if v, ok := m.GetValue().(*sparkplugb.Payload_Metric_BooleanValue); ok {
			return engine.Bool(v.BooleanValue), valueOK
		}
		return engine.Value{}, valueBad
	case sparkplugb.DataType_String, sparkplugb.DataType_Text, sparkplugb.DataType_UUID:
		// proto2 strings are not checked for UTF-8 when decoded.
		if v, ok := m.GetValue().(*sparkplugb.Payload_Metric_StringValue); ok && utf8.ValidString(v.StringValue) {
			return engine.String(v.StringValue), valueOK
		}
		return engine.Value{}, valueBad
	}
	if dt >= sparkplugb.DataType_DataSet && dt <= sparkplugb.DataType_DateTimeArray {
		return engine.Value{}, valueUnsupported
	}
	return engine.Value{}, valueBad
}
