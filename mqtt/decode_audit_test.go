package mqtt

// An audit of the three decoders against the cases an independent suite
// would vary: every Sparkplug B datatype and flag, the session rules of the
// specification (aliases, rebirths, deaths, STATE), JSON numbers, times and
// shapes, and line protocol's partial writes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
	"github.com/stratadb/strata/mqtt/sparkplugb"
)

// auditRecv is the arrival time the audit decodes with.
var auditRecv = time.Unix(5, 0)

// lpText formats a point as line protocol, tags sorted, with the kind of
// each value visible (5i, 5u, "s", 5, true).
func lpText(p engine.Point) string {
	return pointTextWith(p, func(v engine.Value) string {
		switch v.Kind() {
		case engine.KindInt:
			return strconv.FormatInt(v.Int(), 10) + "i"
		case engine.KindUint:
			return strconv.FormatUint(v.Uint(), 10) + "u"
		case engine.KindString:
			return strconv.Quote(v.Str())
		}
		return v.String()
	})
}

func lpTexts(pts []engine.Point) []string {
	var out []string
	for _, p := range pts {
		out = append(out, lpText(p))
	}
	return out
}

// auditSparkplug returns a Sparkplug decoder on a Subscriber that never
// connects, and its subscription's counters.
func auditSparkplug(t *testing.T) (decoder, *subscription) {
	d, sub, _ := auditSparkplugSubscriber(t)
	return d, sub
}

func auditSparkplugSubscriber(t *testing.T) (decoder, *subscription, *Subscriber) {
	t.Helper()
	s, err := New(nopWriter{}, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x", RebirthInterval: time.Nanosecond,
		Subscriptions: []Subscription{{Filter: "#", Format: FormatSparkplugB}}})
	if err != nil {
		t.Fatal(err)
	}
	return s.subs[0].decoder, s.subs[0], s
}

// spMet builds a metric: a name (none when ""), an alias (none when 0),
// a datatype (none when dt < 0) and a value (nil: none; uint32: int_value;
// uint64: long_value; float32, float64, bool, string, []byte, *DataSet,
// *Template).
func spMet(name string, alias uint64, dt int, v any) *sparkplugb.Payload_Metric {
	m := &sparkplugb.Payload_Metric{}
	if name != "" {
		m.Name = proto.String(name)
	}
	if alias != 0 {
		m.Alias = proto.Uint64(alias)
	}
	if dt >= 0 {
		m.Datatype = proto.Uint32(uint32(dt))
	}
	setMetricValue(m, v)
	return m
}

// spMsg encodes a payload; ts 0 leaves the payload timestamp out.
func spMsg(ts uint64, ms ...*sparkplugb.Payload_Metric) []byte {
	p := &sparkplugb.Payload{Seq: proto.Uint64(0), Metrics: ms}
	if ts != 0 {
		p.Timestamp = proto.Uint64(ts)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

func withTS(m *sparkplugb.Payload_Metric, ms uint64) *sparkplugb.Payload_Metric {
	m.Timestamp = proto.Uint64(ms)
	return m
}

// spDecode decodes one message and checks the points (only those of
// measurements other than sparkplug_state when states is false) and
// whether it failed.
func spDecode(t *testing.T, d decoder, topic string, payload []byte, states bool, wantErr bool, want ...string) {
	t.Helper()
	pts, err := d.decode(topic, payload, auditRecv, nil)
	if (err != nil) != wantErr || (err != nil && !errors.Is(err, ErrPayload)) {
		t.Errorf("%s: err = %v, want error %v (ErrPayload)", topic, err, wantErr)
	}
	var got []string
	for _, p := range pts {
		if states || p.Measurement != StateMeasurement {
			got = append(got, lpText(p))
		}
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", topic, got, want)
	}
}

const (
	spTags  = "edge_node_id=N,group_id=G"
	spDTags = "device_id=D,edge_node_id=N,group_id=G"
)

// Every scalar datatype of the specification, with the values at the ends
// of its range: signed integers arrive as unsigned two's complement (in
// int_value for Int8 to Int32, sign-extended or not; in long_value for
// Int64, and for Int8 to Int32 from encoders that use it, Tahu's Java one
// among them for UInt32), unsigned ones above 2^63 stay exact.
func TestAuditSparkplugDatatypes(t *testing.T) {
	d, sub := auditSparkplug(t)
	type c struct {
		name string
		dt   sparkplugb.DataType
		v    any
		want string
	}
	cases := []c{
		{"i8", sparkplugb.DataType_Int8, uint32(0xFFFFFF80), "-128i"},
		{"i8 not extended", sparkplugb.DataType_Int8, uint32(0x80), "-128i"},
		{"i8 max", sparkplugb.DataType_Int8, uint32(127), "127i"},
		{"i16", sparkplugb.DataType_Int16, uint32(0xFFFF8000), "-32768i"},
		{"i16 not extended", sparkplugb.DataType_Int16, uint32(0xFFFF), "-1i"},
		{"i32", sparkplugb.DataType_Int32, uint32(0x80000000), "-2147483648i"},
		{"i32 long", sparkplugb.DataType_Int32, uint64(0xFFFFFFFF), "-1i"},
		{"i32 long extended", sparkplugb.DataType_Int32, uint64(math.MaxUint64), "-1i"},
		{"i8 long", sparkplugb.DataType_Int8, uint64(0xFE), "-2i"},
		{"i64 min", sparkplugb.DataType_Int64, uint64(1 << 63), "-9223372036854775808i"},
		{"i64 -1", sparkplugb.DataType_Int64, uint64(math.MaxUint64), "-1i"},
		{"i64 max", sparkplugb.DataType_Int64, uint64(math.MaxInt64), "9223372036854775807i"},
		{"u8", sparkplugb.DataType_UInt8, uint32(255), "255i"},
		{"u16", sparkplugb.DataType_UInt16, uint32(65535), "65535i"},
		{"u32", sparkplugb.DataType_UInt32, uint32(math.MaxUint32), "4294967295i"},
		{"u32 long", sparkplugb.DataType_UInt32, uint64(math.MaxUint32), "4294967295i"},
		{"u64 above 2^63", sparkplugb.DataType_UInt64, uint64(1<<63 + 5), "9223372036854775813u"},
		{"u64 max", sparkplugb.DataType_UInt64, uint64(math.MaxUint64), "18446744073709551615u"},
		{"f", sparkplugb.DataType_Float, float32(1.5), "1.5"},
		{"f neg", sparkplugb.DataType_Float, float32(-0.25), "-0.25"},
		{"d", sparkplugb.DataType_Double, 2.000000000000001, "2.000000000000001"},
		{"b", sparkplugb.DataType_Boolean, true, "true"},
		{"b false", sparkplugb.DataType_Boolean, false, "false"},
		{"s", sparkplugb.DataType_String, "a \"b\" c", strconv.Quote("a \"b\" c")},
		{"s empty", sparkplugb.DataType_String, "", `""`},
		{"text", sparkplugb.DataType_Text, "long\ntext", strconv.Quote("long\ntext")},
		{"uuid", sparkplugb.DataType_UUID, "123e4567-e89b-12d3-a456-426614174000", `"123e4567-e89b-12d3-a456-426614174000"`},
		{"dt", sparkplugb.DataType_DateTime, uint64(1700000000123), "1700000000123i"},
	}
	var ms []*sparkplugb.Payload_Metric
	var want []string
	for i, c := range cases {
		ms = append(ms, spMet(c.name, uint64(i+1), int(c.dt), c.v))
		want = append(want, fmt.Sprintf("%s,%s value=%s 1000000000", c.name, spTags, c.want))
	}
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000, ms...), false, false, want...)

	// The same values in NDATA, by alias, without datatypes.
	ms, want = ms[:0], want[:0]
	for i, c := range cases {
		ms = append(ms, spMet("", uint64(i+1), -1, c.v))
		want = append(want, fmt.Sprintf("%s,%s value=%s 2000000000", c.name, spTags, c.want))
	}
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(2000, ms...), false, false, want...)
	if n := sub.skipped.Load(); n != 0 {
		t.Errorf("skipped = %d, want 0", n)
	}
}

// Datatypes strata does not store (Bytes, File, DataSet, Template, arrays,
// PropertySet) and floats that are not finite are skipped and counted; the
// other metrics of the message are stored and the message is no failure.
// A value that does not match its datatype, datatype Unknown, or text that
// is not UTF-8 is skipped, counted, and fails the message.
func TestAuditSparkplugUnsupportedAndMalformed(t *testing.T) {
	d, sub, s := auditSparkplugSubscriber(t)
	ds := &sparkplugb.Payload_DataSet{NumOfColumns: proto.Uint64(1), Columns: []string{"c"}, Types: []uint32{uint32(sparkplugb.DataType_Int32)},
		Rows: []*sparkplugb.Payload_DataSet_Row{{Elements: []*sparkplugb.Payload_DataSet_DataSetValue{{Value: &sparkplugb.Payload_DataSet_DataSetValue_IntValue{IntValue: 1}}}}}}
	tpl := &sparkplugb.Payload_Template{TemplateRef: proto.String("Motor"), Metrics: []*sparkplugb.Payload_Metric{spMet("rpm", 0, int(sparkplugb.DataType_Int32), uint32(5))}}
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000,
		spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(0)),
		spMet("ok", 1, int(sparkplugb.DataType_Double), 1.0),
		spMet("bytes", 2, int(sparkplugb.DataType_Bytes), []byte{1, 2}),
		spMet("file", 3, int(sparkplugb.DataType_File), []byte("content")),
		spMet("dataset", 4, int(sparkplugb.DataType_DataSet), ds),
		spMet("template", 5, int(sparkplugb.DataType_Template), tpl),
		spMet("array", 6, int(sparkplugb.DataType_Int32Array), []byte{1, 0, 0, 0}),
		spMet("nan", 7, int(sparkplugb.DataType_Double), math.NaN()),
		spMet("inf", 8, int(sparkplugb.DataType_Float), float32(math.Inf(-1))),
		spMet("after", 9, int(sparkplugb.DataType_Int32), uint32(3)),
	), false, false,
		"bdSeq,"+spTags+" value=0i 1000000000",
		"ok,"+spTags+" value=1 1000000000",
		"after,"+spTags+" value=3i 1000000000")
	if n := sub.skipped.Load(); n != 7 {
		t.Errorf("skipped = %d, want 7", n)
	}
	// By alias too, and the NaN metric gets a finite value later.
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(2000,
		spMet("", 2, -1, []byte{3}), spMet("", 7, -1, 2.5), spMet("", 8, -1, float32(math.Inf(1)))), false, false,
		"nan,"+spTags+" value=2.5 2000000000")
	if n := sub.skipped.Load(); n != 9 {
		t.Errorf("skipped = %d, want 9", n)
	}
	st := s.Stats()
	if st.Filters[0].SkippedMetrics != 9 || st.Filters[0].UnknownAliases != 0 {
		t.Errorf("stats %+v", st.Filters[0])
	}
	found := false
	for _, m := range st.Metrics() {
		found = found || m.Name == "strata_mqtt_sparkplug_skipped_metrics_total" && m.Value == 9
	}
	if !found {
		t.Errorf("no strata_mqtt_sparkplug_skipped_metrics_total 9 in %+v", st.Metrics())
	}

	// Malformed metrics.
	sub.skipped.Store(0)
	spDecode(t, d, "spBv1.0/G/DBIRTH/N/D", spMsg(1000,
		spMet("float for a double", 1, int(sparkplugb.DataType_Double), float32(1)),
		spMet("long for a boolean", 2, int(sparkplugb.DataType_Boolean), uint64(1)),
		spMet("int for an int64", 3, int(sparkplugb.DataType_Int64), uint32(1)),
		spMet("unknown datatype", 4, int(sparkplugb.DataType_Unknown), 1.0),
		spMet("datatype 99", 5, 99, 1.0),
		spMet("bad \xff name", 6, int(sparkplugb.DataType_Double), 1.0),
		spMet("bad string", 7, int(sparkplugb.DataType_String), "\xffx"),
		spMet("good", 8, int(sparkplugb.DataType_String), "é"),
	), false, true, "good,"+spDTags+` value="é" 1000000000`)
	if n := sub.skipped.Load(); n != 7 {
		t.Errorf("skipped = %d, want 7", n)
	}
	// The datatype of a data metric may differ from its birth's: it is read
	// as it says, as it is when it matches its value.
	spDecode(t, d, "spBv1.0/G/DDATA/N/D", spMsg(2000, spMet("", 1, int(sparkplugb.DataType_Float), float32(2))), false, false,
		"float for a double,"+spDTags+" value=2 2000000000")
}

// is_null metrics (and those without a value) have no point and are no
// error; is_transient ones are not stored (the specification: "should not
// be stored in a historian"), whether the flag is on the data metric or on
// its birth; is_historical
// ones are stored at their own time; properties and metadata change
// nothing.
func TestAuditSparkplugFlags(t *testing.T) {
	d, sub := auditSparkplug(t)
	null := spMet("null", 1, int(sparkplugb.DataType_Double), nil)
	null.IsNull = proto.Bool(true)
	transient := spMet("transient", 2, int(sparkplugb.DataType_Double), 1.0)
	transient.IsTransient = proto.Bool(true)
	historical := withTS(spMet("historical", 3, int(sparkplugb.DataType_Double), 2.0), 500)
	historical.IsHistorical = proto.Bool(true)
	quality := spMet("quality", 4, int(sparkplugb.DataType_Int32), uint32(7))
	quality.Properties = &sparkplugb.Payload_PropertySet{Keys: []string{"Quality", "engUnit"}, Values: []*sparkplugb.Payload_PropertyValue{
		{Type: proto.Uint32(uint32(sparkplugb.DataType_Int32)), Value: &sparkplugb.Payload_PropertyValue_IntValue{IntValue: 192}},
		{Type: proto.Uint32(uint32(sparkplugb.DataType_String)), Value: &sparkplugb.Payload_PropertyValue_StringValue{StringValue: "°C"}}}}
	quality.Metadata = &sparkplugb.Payload_MetaData{Description: proto.String("d"), ContentType: proto.String("text/plain")}
	noValue := spMet("no value", 5, int(sparkplugb.DataType_Double), nil) // null without saying so
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000, null, transient, historical, quality, noValue), false, false,
		"historical,"+spTags+" value=2 500000000",
		"quality,"+spTags+" value=7i 1000000000")

	nullData := spMet("", 4, -1, nil)
	nullData.IsNull = proto.Bool(true)
	stored := spMet("", 2, -1, 5.0)
	stored.IsTransient = proto.Bool(false)
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(2000,
		spMet("", 1, -1, 3.0),                // was null
		spMet("", 2, -1, 4.0),                // transient by its birth
		withTS(spMet("", 3, -1, 6.0), 1500),  // historical
		nullData,                             // null now
		withTS(stored, 1900),                 // explicitly not transient
		withTS(spMet("", 1, -1, 3.5), 1999)), // the same metric twice
		false, false,
		"null,"+spTags+" value=3 2000000000",
		"historical,"+spTags+" value=6 1500000000",
		"transient,"+spTags+" value=5 1900000000",
		"null,"+spTags+" value=3.5 1999000000")
	if n := sub.skipped.Load(); n != 0 {
		t.Errorf("skipped = %d, want 0 (null and transient are not counted)", n)
	}
}

// Times: a metric's own timestamp, else the payload's, else the arrival.
func TestAuditSparkplugTimes(t *testing.T) {
	d, _ := auditSparkplug(t)
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000,
		withTS(spMet("a", 1, int(sparkplugb.DataType_Int64), uint64(1)), 900),
		spMet("b", 2, int(sparkplugb.DataType_Int64), uint64(2))), true, false,
		"a,"+spTags+" value=1i 900000000",
		"b,"+spTags+" value=2i 1000000000",
		StateMeasurement+","+spTags+" online=true 1000000000")
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(0,
		spMet("", 1, -1, uint64(3)),
		withTS(spMet("", 2, -1, uint64(4)), 2000),
		withTS(spMet("", 2, -1, uint64(5)), 0)), false, false,
		"a,"+spTags+" value=3i 5000000000",
		"b,"+spTags+" value=4i 2000000000",
		"b,"+spTags+" value=5i 0")
}

// A rebirth redefines the aliases: NBIRTH starts a new session of the node
// (its devices must be born again), DBIRTH one of the device. Data naming an
// alias of no current birth, of a device never born, or of a dead node is
// counted and answered with a rebirth request; the known metrics of the
// same message are stored.
func TestAuditSparkplugSessions(t *testing.T) {
	d, sub := auditSparkplug(t)
	dbl := int(sparkplugb.DataType_Double)
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000,
		spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(0)),
		spMet("A", 1, dbl, 1.0)), false, false, "bdSeq,"+spTags+" value=0i 1000000000", "A,"+spTags+" value=1 1000000000")
	spDecode(t, d, "spBv1.0/G/DBIRTH/N/D", spMsg(1001, spMet("P", 2, dbl, 2.0)), false, false, "P,"+spDTags+" value=2 1001000000")
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(1100, spMet("", 1, -1, 1.5)), false, false, "A,"+spTags+" value=1.5 1100000000")
	// A device never born: unknown even though the node is.
	spDecode(t, d, "spBv1.0/G/DDATA/N/D9", spMsg(1150, spMet("", 1, -1, 1.0)), false, true)
	// By name without a datatype (SHOULD NOT, but valid): the birth's.
	spDecode(t, d, "spBv1.0/G/DDATA/N/D", spMsg(1200, spMet("P", 0, -1, 2.5), spMet("Q", 0, -1, 1.0)), false, true,
		"P,"+spDTags+" value=2.5 1200000000")
	if u, r := sub.unknownAliases.Load(), sub.rebirths.Load(); u != 2 || r != 2 {
		t.Errorf("unknown aliases %d, rebirths %d; want 2, 2", u, r)
	}

	// Rebirth: alias 1 is now B, the device is forgotten until its DBIRTH.
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(3000,
		spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(1)),
		spMet("B", 1, int(sparkplugb.DataType_Int32), uint32(7)),
		spMet("A", 5, dbl, 1.0)), false, false,
		"bdSeq,"+spTags+" value=1i 3000000000", "B,"+spTags+" value=7i 3000000000", "A,"+spTags+" value=1 3000000000")
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(3100, spMet("", 1, -1, uint32(8)), spMet("", 5, -1, 2.0)), false, false,
		"B,"+spTags+" value=8i 3100000000", "A,"+spTags+" value=2 3100000000")
	spDecode(t, d, "spBv1.0/G/DDATA/N/D", spMsg(3200, spMet("", 2, -1, 3.0)), false, true)
	spDecode(t, d, "spBv1.0/G/DBIRTH/N/D", spMsg(3300, spMet("P", 2, dbl, 3.0)), false, false, "P,"+spDTags+" value=3 3300000000")
	spDecode(t, d, "spBv1.0/G/DDATA/N/D", spMsg(3400, spMet("", 2, -1, 3.5)), false, false, "P,"+spDTags+" value=3.5 3400000000")

	// A device death forgets the device alone; a node death, everything.
	spDecode(t, d, "spBv1.0/G/DDEATH/N/D", spMsg(3500), true, false, StateMeasurement+","+spDTags+" online=false 3500000000")
	spDecode(t, d, "spBv1.0/G/DDATA/N/D", spMsg(3600, spMet("", 2, -1, 4.0)), false, true)
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(3700, spMet("", 1, -1, uint32(9))), false, false, "B,"+spTags+" value=9i 3700000000")
	spDecode(t, d, "spBv1.0/G/NDEATH/N", spMsg(0, spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(1))), true, false,
		StateMeasurement+","+spTags+" online=false 5000000000")
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(3800, spMet("", 1, -1, uint32(10))), false, true)
	if u, r := sub.unknownAliases.Load(), sub.rebirths.Load(); u != 5 || r != 5 {
		t.Errorf("unknown aliases %d, rebirths %d; want 5, 5", u, r)
	}
}

// NDEATH: the specification has the host mark the node and all its devices
// offline at the time it receives the death (the payload's timestamp is the
// will's, set when the node connected, before its NBIRTH). A death whose
// bdSeq is not the one of the current NBIRTH is a stale will and ignored,
// also when it leaves the datatype out. DDEATH keeps its payload's time.
func TestAuditSparkplugDeath(t *testing.T) {
	d, _ := auditSparkplug(t)
	i64 := int(sparkplugb.DataType_Int64)
	spDecode(t, d, "spBv1.0/G/NBIRTH/N", spMsg(1000, spMet("bdSeq", 0, i64, uint64(3)), spMet("A", 1, i64, uint64(1))), true, false,
		"bdSeq,"+spTags+" value=3i 1000000000", "A,"+spTags+" value=1i 1000000000", StateMeasurement+","+spTags+" online=true 1000000000")
	for _, dev := range []string{"D2", "D1"} {
		spDecode(t, d, "spBv1.0/G/DBIRTH/N/"+dev, spMsg(1001, spMet("P", 2, i64, uint64(2))), true, false,
			"P,device_id="+dev+",edge_node_id=N,group_id=G value=2i 1001000000",
			StateMeasurement+",device_id="+dev+",edge_node_id=N,group_id=G online=true 1001000000")
	}
	// Stale wills, with and without a datatype: nothing happens.
	spDecode(t, d, "spBv1.0/G/NDEATH/N", spMsg(900, spMet("bdSeq", 0, i64, uint64(2))), true, false)
	spDecode(t, d, "spBv1.0/G/NDEATH/N", spMsg(900, spMet("bdSeq", 0, -1, uint64(2))), true, false)
	spDecode(t, d, "spBv1.0/G/NDATA/N", spMsg(1100, spMet("", 1, -1, uint64(4))), false, false, "A,"+spTags+" value=4i 1100000000")
	// The real death, its datatype left out, timestamped before the birth.
	spDecode(t, d, "spBv1.0/G/NDEATH/N", spMsg(900, spMet("bdSeq", 0, -1, uint64(3))), true, false,
		StateMeasurement+","+spTags+" online=false 5000000000",
		StateMeasurement+",device_id=D1,edge_node_id=N,group_id=G online=false 5000000000",
		StateMeasurement+",device_id=D2,edge_node_id=N,group_id=G online=false 5000000000")
	// A second death (the will after an intentional NDEATH): the node is
	// already offline; recording it again is harmless.
	spDecode(t, d, "spBv1.0/G/NDEATH/N", spMsg(900, spMet("bdSeq", 0, i64, uint64(3))), true, false,
		StateMeasurement+","+spTags+" online=false 5000000000")
}

// Topics: STATE (Sparkplug 3.0 under the namespace, 2.2 at the top) and
// commands are not data and no error; a malformed topic is an error,
// with no point of an empty tag.
func TestAuditSparkplugTopics(t *testing.T) {
	d, _ := auditSparkplug(t)
	birth := spMsg(1000, spMet("A", 1, int(sparkplugb.DataType_Double), 1.0))
	for _, c := range []struct {
		topic   string
		payload []byte
		wantErr bool
	}{
		{"spBv1.0/STATE/host1", []byte(`{"online":true,"timestamp":1700000000000}`), false},
		{"STATE/host1", []byte("ONLINE"), false},
		{"spBv1.0/G/NCMD/N", spMsg(1, spMet("Node Control/Rebirth", 0, int(sparkplugb.DataType_Boolean), true)), false},
		{"spBv1.0/G/DCMD/N/D", birth, false},
		{"spBv1.0/G/NDATA/N/D", birth, true},
		{"spBv1.0/G/DDATA/N", birth, true},
		{"spBv1.0/G/NDATA/N/D/x", birth, true},
		{"spBv1.0/G/NBIRTH", birth, true},
		{"spBv1.0//NBIRTH/N", birth, true},
		{"spBv1.0/G/NBIRTH/", birth, true},
		{"spBv1.0/G/DBIRTH//D", birth, true},
		{"spBv1.0/G/DBIRTH/N/", birth, true},
		{"spAv1.0/G/NBIRTH/N", birth, true},
		{"spBv1.0/G/NBIRTH/N", []byte{0xff, 0xff, 0xff}, true},
	} {
		pts, err := d.decode(c.topic, c.payload, auditRecv, nil)
		if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, ErrPayload)) || (c.wantErr && len(pts) != 0) || (!c.wantErr && len(pts) != 0) {
			t.Errorf("%s: points %q, err %v; want error %v and no point", c.topic, lpTexts(pts), err, c.wantErr)
		}
	}
	// Names are measurements as they are: folders, spaces, any UTF-8.
	spDecode(t, d, "spBv1.0/My Group/NBIRTH/edge 1", spMsg(1000,
		spMet("Inputs/Motor 1/Speed (rpm)", 1, int(sparkplugb.DataType_Double), 1.0),
		spMet("Température/°C", 2, int(sparkplugb.DataType_Double), 2.0)), false, false,
		"Inputs/Motor 1/Speed (rpm),edge_node_id=edge 1,group_id=My Group value=1 1000000000",
		"Température/°C,edge_node_id=edge 1,group_id=My Group value=2 1000000000")
}

// JSON numbers as times: integers exact in every unit, decimals exact to
// the nanosecond (truncated below it), not through a float64, which is 64
// to 256 ns coarse around 2023 in ns.
func TestAuditJSONTimeExact(t *testing.T) {
	for _, c := range []struct {
		unit, ts string
		want     int64
		bad      bool
	}{
		{unit: "s", ts: "1700000000.123", want: 1700000000123000000},
		{unit: "s", ts: "1700000000.123456789", want: 1700000000123456789},
		{unit: "s", ts: "1700000000.1234567891", want: 1700000000123456789},
		{unit: "ms", ts: "1700000000123.456", want: 1700000000123456000},
		{unit: "us", ts: "1700000000123456.7", want: 1700000000123456700},
		{unit: "s", ts: "1.7e9", want: 1700000000000000000},
		{unit: "s", ts: "17E8", want: 1700000000000000000},
		{unit: "ms", ts: "1.700000000123e12", want: 1700000000123000000},
		{unit: "ns", ts: "1e18", want: 1000000000000000000},
		{unit: "s", ts: "-1.5", want: -1500000000},
		{unit: "s", ts: "0.0", want: 0},
		{unit: "s", ts: "-0", want: 0},
		{unit: "ms", ts: "0.0000001", want: 0},
		{unit: "s", ts: "1e-400", want: 0},
		{unit: "s", ts: "9223372036.854775807", want: math.MaxInt64},
		{unit: "s", ts: "-9223372036.854775808", want: math.MinInt64},
		{unit: "s", ts: "9223372036.854775808", bad: true},
		{unit: "ns", ts: "9223372036854775808", bad: true},
		{unit: "s", ts: "1e400", bad: true},
		{unit: "s", ts: "1e999999999999999999999", bad: true},
		{unit: "s", ts: "1e-999999999999999999999", want: 0},
	} {
		d := &jsonDecoder{m: &JSONMapping{Measurement: "m", Time: "t", TimeUnit: c.unit}}
		pts, err := d.decode("a", []byte(`{"t":`+c.ts+`,"v":1}`), auditRecv, nil)
		if c.bad {
			if !errors.Is(err, ErrPayload) || len(pts) != 0 {
				t.Errorf("%s %s: points %q, err %v; want an error", c.ts, c.unit, lpTexts(pts), err)
			}
			continue
		}
		if err != nil || len(pts) != 1 || pts[0].Time != c.want {
			t.Errorf("%s %s: points %q, err %v; want time %d", c.ts, c.unit, lpTexts(pts), err, c.want)
		}
	}
}

// FuzzJSONTimeNanos checks the exact reading of JSON times against
// math/big.
func FuzzJSONTimeNanos(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5", "-1.5", "1700000000.123", "9223372036.854775807", "9223372036.854775808",
		"-9223372036.854775808", "-9223372036.854775809", "1e-5", "123E+4", "0.000000001", "1e18", "9.223372036854775807e18", "00", "1.", "1e"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, s string, unit uint8) {
		// JSON numbers only, with exponents math/big computes quickly.
		if len(s) == 0 || len(s) > 200 || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') ||
			strings.TrimSpace(s) != s || !json.Valid([]byte(s)) {
			return
		}
		if _, e, ok := strings.Cut(strings.ToLower(s), "e"); ok {
			if n, err := strconv.Atoi(e); err != nil || n > 400 || n < -400 {
				return
			}
		}
		exp := []int{0, 3, 6, 9}[unit%4]
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", s)
		}
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
		want := new(big.Int).Quo(r.Num(), r.Denom())
		got, ok := numberNanos(s, exp)
		if ok != want.IsInt64() || ok && got != want.Int64() {
			t.Fatalf("numberNanos(%q, %d) = %d, %v; want %v", s, exp, got, ok, want)
		}
	})
}

// JSON shapes and values.
func TestAuditJSONShapes(t *testing.T) {
	f := func(m JSONMapping, topic, payload string, wantErr bool, want ...string) {
		t.Helper()
		if err := m.validate(); err != nil {
			t.Fatal(err)
		}
		d := &jsonDecoder{m: &m}
		pts, err := d.decode(topic, []byte(payload), auditRecv, nil)
		if (err != nil) != wantErr || (err != nil && !errors.Is(err, ErrPayload)) {
			t.Errorf("%q: err = %v, want error %v", payload, err, wantErr)
		}
		if got := lpTexts(pts); !slices.Equal(got, want) {
			t.Errorf("%q:\n got %q\nwant %q", payload, got, want)
		}
	}
	m := JSONMapping{Measurement: "m", Time: "t"}
	// Only numbers and booleans are default fields: nested objects, arrays,
	// null and strings are left out; numbers beyond int64 are floats.
	f(m, "a", `{"v":1,"o":{"a":2},"arr":[1,2],"n":null,"s":"str","b":false,"big":18446744073709551616}`, false,
		"m b=false,big=1.8446744073709552e+19,v=1 5000000000")
	// Named fields: a string, a nested member, a boolean; a missing one is
	// left out.
	f(JSONMapping{Measurement: "m", Fields: []string{"s", "o.a", "b", "missing"}}, "a", `{"s":"x","o":{"a":2},"b":true}`, false,
		`m s="x",o.a=2,b=true 5000000000`)
	// A null or missing time is the arrival time.
	f(m, "a", `{"t":null,"v":1}`, false, "m v=1 5000000000")
	// A number no float64 holds fails its reading only when it is used.
	f(JSONMapping{Measurement: "m", Fields: []string{"v"}}, "a", `{"v":1,"checksum":1e999}`, false, "m v=1 5000000000")
	f(JSONMapping{Measurement: "m", Tags: []string{"id"}}, "a", `{"v":1,"id":-1e999}`, true)
	f(m, "a", `[{"v":1,"x":1e999},{"v":2}]`, true, "m v=2 5000000000")
	// Integer tags keep every digit; other numbers as the shortest float.
	f(JSONMapping{Measurement: "m", Tags: []string{"id", "f", "e", "z", "huge"}}, "a",
		`{"id":1234567890123456789,"f":7.50,"e":1e3,"z":-0,"huge":123456789012345678901234567890,"v":1}`, false,
		"m,e=1000,f=7.5,huge=123456789012345678901234567890,id=1234567890123456789,z=0 v=1 5000000000")
	// Empty and degenerate payloads.
	f(m, "a", ``, true)
	f(m, "a", `   `, true)
	f(m, "a", `null`, true)
	f(m, "a", `"text"`, true)
	f(m, "a", `{}`, true)
	f(m, "a", `[]`, false)
	f(m, "a", `[[{"v":1}]]`, true)
	// Topic levels: a level the topic does not have or an empty one gives
	// no tag, and an empty measurement level falls back to Measurement.
	f(JSONMapping{Measurement: "env", MeasurementLevel: 2, TopicTags: map[int]string{1: "site", 2: "room", 5: "x"}}, "berlin//", `{"v":1}`, false,
		"env,site=berlin v=1 5000000000")
	f(JSONMapping{Measurement: "env", MeasurementLevel: 2, TopicTags: map[int]string{1: "site"}}, "berlin/lab", `{"v":1}`, false,
		"lab,site=berlin v=1 5000000000")
}

// A tag key given twice (a topic tag and a member tag, or twice in Tags)
// would make every point a duplicate-tag point the database refuses: the
// mapping is refused instead.
func TestAuditJSONDuplicateTagKeys(t *testing.T) {
	for _, m := range []JSONMapping{
		{Tags: []string{"site"}, TopicTags: map[int]string{2: "site"}},
		{Tags: []string{"a", "a"}},
		{TopicTags: map[int]string{1: "a", 2: "a"}},
	} {
		if err := m.validate(); err == nil {
			t.Errorf("%+v: no error", m)
		}
	}
}

// Line protocol as InfluxDB writes it: the good lines of a message are
// stored and the bad ones reported (a partial write); CRLF, blank lines,
// comments and a trailing newline are fine; a line without a time takes
// the arrival time; the precision scales times.
func TestAuditLineProtocol(t *testing.T) {
	f := func(prec string, payload string, wantErr string, want ...string) {
		t.Helper()
		p, err := lineproto.ParsePrecision(prec)
		if err != nil {
			t.Fatal(err)
		}
		d := &lpDecoder{precision: p}
		pts, err := d.decode("t", []byte(payload), auditRecv, nil)
		if wantErr == "" && err != nil || wantErr != "" && (!errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%q: err = %v, want %q", payload, err, wantErr)
		}
		if got := lpTexts(pts); !slices.Equal(got, want) {
			t.Errorf("%q:\n got %q\nwant %q", payload, got, want)
		}
	}
	f("ns", "cpu v=1 1\nbad line\ncpu v=3 3\n", "1 of 3 lines rejected, first: line 2",
		"cpu v=1 1", "cpu v=3 3")
	f("ns", "cpu v=1 1\r\ncpu v=2 2\r\n", "", "cpu v=1 1", "cpu v=2 2")
	f("ns", "# comment\n\ncpu,host=a v=1i,s=\"x y\",b=t,u=2u 1\n   \n", "", `cpu,host=a v=1i,s="x y",b=true,u=2u 1`)
	f("ms", "cpu v=1 1700000000000", "", "cpu v=1 1700000000000000000")
	f("s", "cpu v=1", "", "cpu v=1 5000000000")
	f("ns", "", "")
	f("ns", "\n\n", "")
	f("ns", "cpu v=1 99999999999999999999\ncpu v=NaN 1\ncpu v=2 2", "2 of 3 lines rejected", "cpu v=2 2")
}

// setMetricValue sets the value of m from v: nil leaves it out; uint32 is
// int_value, uint64 long_value; float32, float64, bool, string, []byte,
// *DataSet and *Template their own members.
func setMetricValue(m *sparkplugb.Payload_Metric, v any) {
	switch x := v.(type) {
	case nil:
	case uint32:
		m.Value = &sparkplugb.Payload_Metric_IntValue{IntValue: x}
	case uint64:
		m.Value = &sparkplugb.Payload_Metric_LongValue{LongValue: x}
	case float32:
		m.Value = &sparkplugb.Payload_Metric_FloatValue{FloatValue: x}
	case float64:
		m.Value = &sparkplugb.Payload_Metric_DoubleValue{DoubleValue: x}
	case bool:
		m.Value = &sparkplugb.Payload_Metric_BooleanValue{BooleanValue: x}
	case string:
		m.Value = &sparkplugb.Payload_Metric_StringValue{StringValue: x}
	case []byte:
		m.Value = &sparkplugb.Payload_Metric_BytesValue{BytesValue: x}
	case *sparkplugb.Payload_DataSet:
		m.Value = &sparkplugb.Payload_Metric_DatasetValue{DatasetValue: x}
	case *sparkplugb.Payload_Template:
		m.Value = &sparkplugb.Payload_Metric_TemplateValue{TemplateValue: x}
	default:
		panic(fmt.Sprintf("setMetricValue: %T", v))
	}
}
