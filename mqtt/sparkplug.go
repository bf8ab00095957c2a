package mqtt

import (
	"fmt"
	"math"
	"strings"
	"time"

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
// NBIRTH and DBIRTHs. NDEATH forgets the node's aliases (those of its
// devices too) when its bdSeq matches the one of the node's NBIRTH (an older
// one is a stale will and ignored); DDEATH forgets the device's.
//
// Every metric value becomes a point: measurement = the metric name, tags
// group_id, edge_node_id and device_id (for device messages), field "value",
// time = the metric's timestamp, else the payload's, else the arrival time.
// Signed integers are stored as int, UInt8-32 as int, UInt64 as uint,
// Float and Double as float, Boolean as bool, String, Text and UUID as
// string, DateTime as int (ms). Null metrics and other datatypes (arrays,
// datasets, templates, bytes, files) are skipped. Births and deaths are also
// recorded as points of measurement sparkplug_state, field "online" (true
// for a birth, false for a death), with the same tags.

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

type spMetric struct {
	name     string
	datatype sparkplugb.DataType
}

type spEntity struct {
	aliases map[uint64]spMetric
	types   map[string]sparkplugb.DataType // datatype by name
	bdSeq   int64                          // of the NBIRTH; -1 if none
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
	if len(levels) < 4 || len(levels) > 5 || levels[0] != sparkplugNamespace {
		if len(levels) >= 2 && levels[0] == sparkplugNamespace && levels[1] == "STATE" {
			return dst, nil // a host application's state, not data
		}
		return dst, fmt.Errorf("%w: sparkplug: topic %q is not spBv1.0/GROUP/TYPE/NODE[/DEVICE]", ErrPayload, topic)
	}
	group, typ, node := levels[1], levels[2], levels[3]
	device := ""
	if len(levels) == 5 {
		device = levels[4]
	}
	isDevice := strings.HasPrefix(typ, "D")
	if isDevice != (device != "") {
		switch typ {
		case "NBIRTH", "NDATA", "NDEATH", "DBIRTH", "DDATA", "DDEATH":
			return dst, fmt.Errorf("%w: sparkplug: %s on topic %q", ErrPayload, typ, topic)
		}
	}
	switch typ {
	case "NBIRTH", "DBIRTH", "NDATA", "DDATA", "NDEATH", "DDEATH":
	default:
		return dst, nil // NCMD, DCMD and the like: commands, not data
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
		e := &spEntity{aliases: map[uint64]spMetric{}, types: map[string]sparkplugb.DataType{}, bdSeq: -1}
		if typ == "NBIRTH" {
			// A new session of the node: its devices will be born again.
			d.forget(nodeKey, true)
		}
		d.entities[key] = e
		for _, m := range p.Metrics {
			dt := sparkplugb.DataType(m.GetDatatype())
			if m.Name != nil {
				e.types[m.GetName()] = dt
				if m.Alias != nil {
					e.aliases[m.GetAlias()] = spMetric{name: m.GetName(), datatype: dt}
				}
				if m.GetName() == bdSeqMetric {
					if v, ok := metricValue(m, dt); ok {
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
				if v, ok := metricValue(m, sparkplugb.DataType(m.GetDatatype())); ok && intValue(v) != e.bdSeq {
					return dst, nil // the will of an earlier session
				}
			}
		}
		d.forget(key, typ == "NDEATH")
		if !msgOK {
			return dst, errTimeRange(1)
		}
		return append(dst, engine.Point{Measurement: StateMeasurement, Tags: tags,
			Fields: []engine.Field{{Key: "online", Value: engine.Bool(false)}}, Time: msgTime}), nil
	}

	// NDATA, DDATA.
	e := d.entities[key]
	return d.metrics(p, e, e, tags, msgTime, msgOK, nodeKey, dst)
}

// forget drops the state of key, and of the node's devices when node is set.
func (d *sparkplugDecoder) forget(key string, node bool) {
	delete(d.entities, key)
	if node {
		prefix := key + "/"
		for k := range d.entities {
			if strings.HasPrefix(k, prefix) {
				delete(d.entities, k)
			}
		}
	}
}

// metrics appends a point for each metric of p with a value. aliases
// resolves metrics sent by alias (nil for births, which carry names); types
// gives the datatypes that data messages may leave out. msgTime is the
// payload's time, which msgOK says fits int64 ns.
func (d *sparkplugDecoder) metrics(p *sparkplugb.Payload, aliases, types *spEntity, tags []engine.Tag, msgTime int64, msgOK bool, nodeKey string, dst []engine.Point) ([]engine.Point, error) {
	unknown, badTime := 0, 0
	for _, m := range p.Metrics {
		name, dt := m.GetName(), sparkplugb.DataType(m.GetDatatype())
		if m.Name == nil {
			a, ok := spMetric{}, false
			if aliases != nil && m.Alias != nil {
				a, ok = aliases.aliases[m.GetAlias()]
			}
			if !ok {
				unknown++
				continue
			}
			name = a.name
			if m.Datatype == nil {
				dt = a.datatype
			}
		} else if m.Datatype == nil {
			if types == nil {
				unknown++
				continue
			}
			t, ok := types.types[name]
			if !ok {
				unknown++
				continue
			}
			dt = t
		}
		if m.GetIsNull() || name == "" {
			continue
		}
		v, ok := metricValue(m, dt)
		if !ok {
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
	if unknown > 0 {
		d.sub.unknownAliases.Add(int64(unknown))
		d.requestRebirth(nodeKey)
		return dst, fmt.Errorf("%w: sparkplug: %d metrics of unknown alias or name (rebirth requested)", ErrPayload, unknown)
	}
	if badTime > 0 {
		return dst, errTimeRange(badTime)
	}
	return dst, nil
}

// errTimeRange reports n points not stored for a timestamp past what int64
// ns hold (2262).
func errTimeRange(n int) error {
	return fmt.Errorf("%w: sparkplug: %d points timestamped past 2262, beyond int64 nanoseconds", ErrPayload, n)
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

// metricValue returns the value of m as datatype dt.
func metricValue(m *sparkplugb.Payload_Metric, dt sparkplugb.DataType) (engine.Value, bool) {
	switch v := m.GetValue().(type) {
	case *sparkplugb.Payload_Metric_IntValue:
		switch dt {
		case sparkplugb.DataType_Int8:
			return engine.Int(int64(int8(v.IntValue))), true
		case sparkplugb.DataType_Int16:
			return engine.Int(int64(int16(v.IntValue))), true
		case sparkplugb.DataType_Int32:
			return engine.Int(int64(int32(v.IntValue))), true
		case sparkplugb.DataType_UInt8, sparkplugb.DataType_UInt16, sparkplugb.DataType_UInt32:
			return engine.Int(int64(v.IntValue)), true
		}
	case *sparkplugb.Payload_Metric_LongValue:
		switch dt {
		case sparkplugb.DataType_Int64:
			return engine.Int(int64(v.LongValue)), true
		case sparkplugb.DataType_UInt64:
			return engine.Uint(v.LongValue), true
		case sparkplugb.DataType_DateTime:
			return engine.Int(int64(v.LongValue)), true
		case sparkplugb.DataType_Int8, sparkplugb.DataType_Int16, sparkplugb.DataType_Int32,
			sparkplugb.DataType_UInt8, sparkplugb.DataType_UInt16, sparkplugb.DataType_UInt32:
			return engine.Int(int64(v.LongValue)), true
		}
	case *sparkplugb.Payload_Metric_FloatValue:
		if dt == sparkplugb.DataType_Float {
			return engine.Float(float64(v.FloatValue)), true
		}
	case *sparkplugb.Payload_Metric_DoubleValue:
		if dt == sparkplugb.DataType_Double {
			return engine.Float(v.DoubleValue), true
		}
	case *sparkplugb.Payload_Metric_BooleanValue:
		if dt == sparkplugb.DataType_Boolean {
			return engine.Bool(v.BooleanValue), true
		}
	case *sparkplugb.Payload_Metric_StringValue:
		switch dt {
		case sparkplugb.DataType_String, sparkplugb.DataType_Text, sparkplugb.DataType_UUID:
			return engine.String(v.StringValue), true
		}
	}
	return engine.Value{}, false
}
