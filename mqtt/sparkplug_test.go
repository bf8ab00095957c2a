package mqtt

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/mqtt/sparkplugb"
)

// spMetricOpt builds a Sparkplug metric.
type spm struct {
	name  string
	alias uint64
	noDT  bool
	dt    sparkplugb.DataType
	value any
	ts    uint64
}

func spPayload(ts uint64, ms ...spm) []byte {
	p := &sparkplugb.Payload{Timestamp: proto.Uint64(ts), Seq: proto.Uint64(0)}
	for _, m := range ms {
		pm := &sparkplugb.Payload_Metric{}
		if m.name != "" {
			pm.Name = proto.String(m.name)
		}
		if m.alias != 0 {
			pm.Alias = proto.Uint64(m.alias)
		}
		if !m.noDT {
			pm.Datatype = proto.Uint32(uint32(m.dt))
		}
		if m.ts != 0 {
			pm.Timestamp = proto.Uint64(m.ts)
		}
		setMetricValue(pm, m.value)
		p.Metrics = append(p.Metrics, pm)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

func samplesText(se []engine.Series) string {
	var out []string
	for _, s := range se {
		var tags []string
		for _, t := range s.Tags {
			tags = append(tags, t.Key+"="+t.Value)
		}
		var vals []string
		for _, x := range s.Samples {
			vals = append(vals, fmt.Sprintf("%v@%d", x.Value, x.Time/1e6))
		}
		out = append(out, strings.Join(tags, ",")+" "+s.Field+": "+strings.Join(vals, " "))
	}
	return strings.Join(out, "\n")
}

// TestSparkplugB runs the Sparkplug B vectors through a broker: births
// define aliases, data by alias, an unknown alias triggers a rebirth
// request, deaths are recorded and forget the aliases, a stale death is
// ignored.
func TestSparkplugB(t *testing.T) {
	_, broker := startMochi(t)
	db := openDB(t)
	// One filter per message type, so that the rebirth commands the
	// subscriber publishes do not come back to it.
	var subs []Subscription
	for _, typ := range []string{"NBIRTH", "NDATA", "NDEATH", "DBIRTH", "DDATA", "DDEATH"} {
		subs = append(subs, Subscription{Filter: "spBv1.0/+/" + typ + "/#", Format: FormatSparkplugB})
	}
	subs = append(subs, Subscription{Filter: "spBv1.0/G1/NDATA", Format: FormatSparkplugB})
	s, _ := runSubscriber(t, db, Options{Brokers: []string{broker}, ClientID: "strata-spb", RebirthInterval: time.Nanosecond, Subscriptions: subs})
	total := func(st Stats, get func(FilterStats) int64) (n int64) {
		for _, f := range st.Filters {
			n += get(f)
		}
		return n
	}
	waitSubscribed(t, s)

	// The edge node's own client listens for commands.
	cmds := make(chan *sparkplugb.Payload, 16)
	node := publisher(t, broker, "edge-N1")
	if tok := node.Subscribe("spBv1.0/G1/NCMD/N1", 1, func(_ paho.Client, m paho.Message) {
		var p sparkplugb.Payload
		if err := proto.Unmarshal(m.Payload(), &p); err != nil {
			t.Errorf("NCMD payload: %v", err)
		}
		cmds <- &p
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	sent := int64(0)
	send := func(topic string, payload []byte) {
		t.Helper()
		publish(t, node, topic, payload)
		sent++
		waitStats(t, s, "messages", func(st Stats) bool { return total(st, func(f FilterStats) int64 { return f.Messages }) >= sent })
	}
	wantRebirth := func() {
		t.Helper()
		select {
		case p := <-cmds:
			if len(p.Metrics) != 1 || p.Metrics[0].GetName() != "Node Control/Rebirth" || !p.Metrics[0].GetBooleanValue() ||
				sparkplugb.DataType(p.Metrics[0].GetDatatype()) != sparkplugb.DataType_Boolean {
				t.Errorf("rebirth request = %v", p)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no rebirth request")
		}
	}

	// Data before any birth: unknown, rebirth requested.
	send("spBv1.0/G1/NDATA/N1", spPayload(500, spm{alias: 1, noDT: true, value: 1.0}))
	wantRebirth()

	// Birth: names, aliases, datatypes and first values.
	send("spBv1.0/G1/NBIRTH/N1", spPayload(1000,
		spm{name: "bdSeq", dt: sparkplugb.DataType_Int64, value: uint64(0)},
		spm{name: "Temperature", alias: 1, dt: sparkplugb.DataType_Double, value: 20.5},
		spm{name: "Running", alias: 2, dt: sparkplugb.DataType_Boolean, value: true},
		spm{name: "Offset", alias: 4, dt: sparkplugb.DataType_Int16, value: uint32(0xFFFFFFFE)}))
	send("spBv1.0/G1/DBIRTH/N1/D1", spPayload(1001,
		spm{name: "Pressure", alias: 3, dt: sparkplugb.DataType_Float, value: float32(1.5)}))
	// Data by alias, the datatype left out as the specification allows.
	send("spBv1.0/G1/NDATA/N1", spPayload(2000, spm{alias: 1, noDT: true, value: 21.0, ts: 1999}, spm{alias: 2, noDT: true, value: false}))
	send("spBv1.0/G1/DDATA/N1/D1", spPayload(2001, spm{alias: 3, noDT: true, value: float32(1.75)}))
	// Unknown alias: counted, the known one stored, rebirth requested.
	send("spBv1.0/G1/NDATA/N1", spPayload(3000, spm{alias: 99, noDT: true, value: 5.0}, spm{alias: 1, noDT: true, value: 22.0}))
	wantRebirth()
	// Device death, then node death: aliases forgotten.
	send("spBv1.0/G1/DDEATH/N1/D1", spPayload(4000))
	send("spBv1.0/G1/NDEATH/N1", spPayload(4001, spm{name: "bdSeq", dt: sparkplugb.DataType_Int64, value: uint64(0)}))
	send("spBv1.0/G1/NDATA/N1", spPayload(4500, spm{alias: 1, noDT: true, value: 99.0}))
	wantRebirth()
	// Rebirth with a new bdSeq; a stale death of the old session is ignored.
	send("spBv1.0/G1/NBIRTH/N1", spPayload(5000,
		spm{name: "bdSeq", dt: sparkplugb.DataType_Int64, value: uint64(1)},
		spm{name: "Temperature", alias: 1, dt: sparkplugb.DataType_Double, value: 23.0}))
	send("spBv1.0/G1/NDEATH/N1", spPayload(5500, spm{name: "bdSeq", dt: sparkplugb.DataType_Int64, value: uint64(0)}))
	send("spBv1.0/G1/NDATA/N1", spPayload(6000, spm{alias: 1, noDT: true, value: 24.0}))
	// Garbage on a Sparkplug topic and a bad topic: counted, acknowledged.
	send("spBv1.0/G1/NDATA/N1", []byte{0xff, 0xff, 0xff})
	send("spBv1.0/G1/NDATA", spPayload(7000))

	check := func(measurement, want string) {
		t.Helper()
		if got := samplesText(queryAll(t, db, measurement)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", measurement, got, want)
		}
	}
	check("Temperature", "edge_node_id=N1,group_id=G1 value: 20.5@1000 21@1999 22@3000 23@5000 24@6000")
	check("Running", "edge_node_id=N1,group_id=G1 value: true@1000 false@2000")
	check("Offset", "edge_node_id=N1,group_id=G1 value: -2@1000")
	check("Pressure", "device_id=D1,edge_node_id=N1,group_id=G1 value: 1.5@1001 1.75@2001")
	// The node's death is stored at its arrival (now), not at the will's
	// payload time (4001): after the rebirth's 5000.
	if got := samplesText(queryAll(t, db, StateMeasurement)); !regexp.MustCompile(`^device_id=D1,edge_node_id=N1,group_id=G1 online: true@1001 false@4000\n` +
		`edge_node_id=N1,group_id=G1 online: true@1000 true@5000 false@\d{13}$`).MatchString(got) {
		t.Errorf("%s:\n got %s", StateMeasurement, got)
	}

	st := s.Stats()
	unknown := total(st, func(f FilterStats) int64 { return f.UnknownAliases })
	rebirths := total(st, func(f FilterStats) int64 { return f.Rebirths })
	failures := total(st, func(f FilterStats) int64 { return f.Failures })
	messages := total(st, func(f FilterStats) int64 { return f.Messages })
	if unknown != 3 || rebirths != 3 || failures != 5 || messages != sent {
		t.Errorf("stats = %+v, want 3 unknown aliases, 3 rebirths, 5 failures, %d messages", st, sent)
	}
}

// TestSparkplugRebirthRateLimited: a node that keeps sending unknown
// aliases is asked for a rebirth once per RebirthInterval.
func TestSparkplugRebirthRateLimited(t *testing.T) {
	s, err := New(openDB(t), &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x", RebirthInterval: time.Hour,
		Subscriptions: []Subscription{{Filter: "#", Format: FormatSparkplugB}}})
	if err != nil {
		t.Fatal(err)
	}
	d := s.subs[0].decoder
	for range 5 {
		_, err := d.decode("spBv1.0/G/NDATA/N", spPayload(1, spm{alias: 7, noDT: true, value: 1.0}), time.Unix(1, 0), nil)
		if !errors.Is(err, ErrPayload) {
			t.Fatalf("err = %v", err)
		}
	}
	if n := s.subs[0].rebirths.Load(); n != 1 {
		t.Errorf("rebirth requests = %d, want 1", n)
	}
	if n := s.subs[0].unknownAliases.Load(); n != 5 {
		t.Errorf("unknown aliases = %d, want 5", n)
	}
}

func FuzzSparkplugDecode(f *testing.F) {
	f.Add("spBv1.0/G/NBIRTH/N", spPayload(1, spm{name: "a", alias: 1, dt: sparkplugb.DataType_Int8, value: uint32(0xff)}))
	f.Add("spBv1.0/G/NDATA/N", spPayload(2, spm{alias: 1, noDT: true, value: uint32(3)}))
	f.Add("spBv1.0/G/DBIRTH/N/D", spPayload(1, spm{name: "s", dt: sparkplugb.DataType_String, value: "x"}))
	f.Add("spBv1.0/G/NDEATH/N", spPayload(3, spm{name: "bdSeq", dt: sparkplugb.DataType_UInt64, value: uint64(1)}))
	f.Add("spBv1.0/STATE/host", []byte("ONLINE"))
	f.Add("STATE/host", []byte("OFFLINE"))
	f.Add("spBv1.0/G//N", []byte{})
	f.Add("spBv1.0/G/DDATA/N/", []byte{})
	f.Add("spBv1.0//NBIRTH/N", spPayload(1, spm{name: "a", alias: 1, dt: sparkplugb.DataType_Double, value: 1.0}))
	// The cases of the audit (decode_audit_test.go): every datatype at the
	// ends of its range, unsupported and malformed values, flags, deaths
	// with and without a datatype, data by alias and by name.
	for _, topic := range []string{"spBv1.0/G/NBIRTH/N", "spBv1.0/G/DDATA/N/D", "spBv1.0/G/NDATA/N"} {
		f.Add(topic, fuzzSparkplugBirth)
	}
	f.Add("spBv1.0/G/NDATA/N", spMsg(0, spMet("", 1, -1, uint32(0x80)), spMet("", 2, -1, uint64(1<<63+1)), spMet("", 3, -1, math.NaN()),
		withTS(spMet("", 4, -1, "x"), math.MaxUint64), spMet("", 99, -1, 1.0), spMet("B", 0, -1, true)))
	f.Add("spBv1.0/G/DDATA/N/D", spMsg(2, spMet("", 5, -1, []byte{1}), spMet("", 6, int(sparkplugb.DataType_Double), float32(1)), spMet("", 7, -1, "\xff")))
	f.Add("spBv1.0/G/NDEATH/N", spMsg(0, spMet("bdSeq", 0, -1, uint64(0))))
	f.Add("spBv1.0/G/NDEATH/N", spMsg(1, spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(1))))
	f.Add("spBv1.0/G/DDEATH/N/D", spMsg(math.MaxUint64))
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		s, err := New(nopWriter{}, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x",
			Subscriptions: []Subscription{{Filter: "#", Format: FormatSparkplugB}}})
		if err != nil {
			t.Fatal(err)
		}
		d := s.subs[0].decoder
		// Births first, so that data by alias finds its metrics.
		for _, b := range []string{"spBv1.0/G/NBIRTH/N", "spBv1.0/G/DBIRTH/N/D"} {
			if _, err := d.decode(b, fuzzSparkplugBirth, time.Unix(1, 0), nil); err == nil || !strings.Contains(err.Error(), "not of the datatype") {
				t.Fatalf("birth: %v", err)
			}
		}
		for range 2 { // the second time with the state of the first
			pts, err := d.decode(topic, payload, time.Unix(1, 0), nil)
			if err != nil && !errors.Is(err, ErrPayload) {
				t.Fatalf("err %v is not ErrPayload", err)
			}
			for _, p := range pts {
				if p.Measurement == "" || len(p.Fields) != 1 || !utf8.ValidString(p.Measurement) {
					t.Fatalf("bad point %+v", p)
				}
				if err := point.ValidateValue(&p.Fields[0]); err != nil {
					t.Fatalf("point %+v: %v", p, err)
				}
				if p.Fields[0].Value.Kind() == engine.KindString && !utf8.ValidString(p.Fields[0].Value.Str()) {
					t.Fatalf("point %+v: string not UTF-8", p)
				}
				for _, tag := range p.Tags {
					if tag.Value == "" || !utf8.ValidString(tag.Value) {
						t.Fatalf("point %+v: bad tag", p)
					}
				}
			}
		}
	})
}

// fuzzSparkplugBirth defines aliases 1 to 8 of every kind, one transient,
// one of a bad name, and a value not of its datatype (the error the fuzzer
// expects).
var fuzzSparkplugBirth = func() []byte {
	tr := spMet("tr", 8, int(sparkplugb.DataType_Double), 1.0)
	tr.IsTransient = proto.Bool(true)
	return spMsg(1,
		spMet("bdSeq", 0, int(sparkplugb.DataType_Int64), uint64(0)),
		spMet("i8", 1, int(sparkplugb.DataType_Int8), uint32(0xff)),
		spMet("u64", 2, int(sparkplugb.DataType_UInt64), uint64(math.MaxUint64)),
		spMet("d", 3, int(sparkplugb.DataType_Double), math.Inf(1)),
		spMet("s", 4, int(sparkplugb.DataType_String), "x"),
		spMet("bytes", 5, int(sparkplugb.DataType_Bytes), []byte{1}),
		spMet("f", 6, int(sparkplugb.DataType_Float), 1.0),
		spMet("bad \xff", 7, int(sparkplugb.DataType_Text), "t"),
		tr,
		spMet("B", 9, int(sparkplugb.DataType_Boolean), false))
}()

type nopWriter struct{}

func (nopWriter) Write([]engine.Point) error { return nil }

// A timestamp past 2262 (beyond int64 ns) is refused: the point is not
// stored (it was stored at the last representable time), the message is
// reported, and a birth still registers its aliases.
func TestSparkplugTimeBeyondInt64(t *testing.T) {
	s, err := New(nopWriter{}, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x",
		Subscriptions: []Subscription{{Filter: "#", Format: FormatSparkplugB}}})
	if err != nil {
		t.Fatal(err)
	}
	d := s.subs[0].decoder
	const far = uint64(math.MaxInt64/1_000_000) + 1 // ms
	recv := time.Unix(1, 0)
	// A birth whose payload time is too far: its metrics without a time of
	// their own are refused, one with a good time is kept, and the alias
	// is known afterwards.
	pts, err := d.decode("spBv1.0/G/NBIRTH/N", spPayload(far,
		spm{name: "a", alias: 1, dt: sparkplugb.DataType_Double, value: 1.0},
		spm{name: "b", alias: 2, dt: sparkplugb.DataType_Double, value: 2.0, ts: 5}), recv, nil)
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "past 2262") {
		t.Errorf("birth: err %v", err)
	}
	if len(pts) != 1 || pts[0].Measurement != "b" || pts[0].Time != 5e6 {
		t.Errorf("birth points %+v", pts)
	}
	// Data by alias: a metric time too far is refused, a good one kept.
	pts, err = d.decode("spBv1.0/G/NDATA/N", spPayload(7,
		spm{alias: 1, noDT: true, value: 3.0, ts: far},
		spm{alias: 2, noDT: true, value: 4.0}), recv, nil)
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "1 points") {
		t.Errorf("data: err %v", err)
	}
	if len(pts) != 1 || pts[0].Measurement != "b" || pts[0].Time != 7e6 {
		t.Errorf("data points %+v", pts)
	}
	// A device death timestamped too far: no state point. A node death is
	// recorded at its arrival, whatever its payload's time.
	pts, err = d.decode("spBv1.0/G/DDEATH/N/D", spPayload(far), recv, nil)
	if !errors.Is(err, ErrPayload) || len(pts) != 0 {
		t.Errorf("device death: %+v, %v", pts, err)
	}
	pts, err = d.decode("spBv1.0/G/NDEATH/N", spPayload(far), recv, nil)
	if err != nil || len(pts) != 1 || pts[0].Time != recv.UnixNano() {
		t.Errorf("node death: %+v, %v", pts, err)
	}
}
