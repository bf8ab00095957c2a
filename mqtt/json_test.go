package mqtt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
)

// pointText formats a point as line protocol-like text, tags sorted,
// values as Value.String shows them.
func pointText(p engine.Point) string { return pointTextWith(p, engine.Value.String) }

// pointTextWith formats a point as pointText does, each value by val.
func pointTextWith(p engine.Point, val func(engine.Value) string) string {
	tags := slices.Clone(p.Tags)
	slices.SortFunc(tags, func(a, b engine.Tag) int { return strings.Compare(a.Key, b.Key) })
	var b strings.Builder
	b.WriteString(p.Measurement)
	for _, t := range tags {
		fmt.Fprintf(&b, ",%s=%s", t.Key, t.Value)
	}
	for i, f := range p.Fields {
		sep := ","
		if i == 0 {
			sep = " "
		}
		fmt.Fprintf(&b, "%s%s=%s", sep, f.Key, val(f.Value))
	}
	fmt.Fprintf(&b, " %d", p.Time)
	return b.String()
}

func TestJSONMapping(t *testing.T) {
	recv := time.Unix(100, 0)
	f := func(m JSONMapping, topic, payload string, want []string, wantErr bool) {
		t.Helper()
		if err := m.validate(); err != nil {
			t.Fatal(err)
		}
		d := &jsonDecoder{m: &m}
		pts, err := d.decode(topic, []byte(payload), recv, nil)
		if (err != nil) != wantErr {
			t.Errorf("%s: err = %v, want error %v", payload, err, wantErr)
		}
		if err != nil && !errors.Is(err, ErrPayload) {
			t.Errorf("%s: err = %v, not ErrPayload", payload, err)
		}
		var got []string
		for _, p := range pts {
			got = append(got, pointText(p))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", payload, got, want)
		}
	}
	env := JSONMapping{Measurement: "env", Time: "ts", TimeUnit: "ms", Tags: []string{"sensor"}, TopicTags: map[int]string{2: "site"}}
	f(env, "plant/berlin/env", `{"sensor":"s1","ts":1700000000000,"temp":21.5,"hum":40,"ok":true,"note":"x"}`,
		[]string{"env,sensor=s1,site=berlin hum=40,ok=true,temp=21.5 1700000000000000000"}, false)
	// No time member: the arrival time. Numeric tag as text.
	f(JSONMapping{Measurement: "m", Time: "ts", Tags: []string{"id"}}, "a", `{"id":7,"v":1}`,
		[]string{"m,id=7 v=1 100000000000"}, false)
	// RFC 3339 time, measurement from a member, explicit fields (a string one).
	f(JSONMapping{MeasurementKey: "kind", Time: "at", Fields: []string{"v", "state"}}, "a",
		`{"kind":"pump","at":"2024-01-02T03:04:05.5Z","v":3,"state":"on","ignored":9}`,
		[]string{"pump v=3,state=on 1704164645500000000"}, false)
	// Measurement from a topic level; an array of readings beside shared members;
	// a dotted path into a nested object.
	f(JSONMapping{MeasurementLevel: 3, Readings: "data", Time: "t", TimeUnit: "s", Tags: []string{"dev", "meta.line"}},
		"f/x/vibration", `{"dev":"d9","meta":{"line":"L2"},"data":[{"t":1,"x":0.5},{"t":2,"x":0.25,"dev":"d10"}]}`,
		[]string{"vibration,dev=d9,meta.line=L2 x=0.5 1000000000", "vibration,dev=d10,meta.line=L2 x=0.25 2000000000"}, false)
	// A top-level array, one bad reading among good ones.
	f(JSONMapping{Measurement: "m", Time: "t", TimeUnit: "us"}, "a", `[{"t":5,"v":1},"oops",{"t":6,"v":2},{"t":7}]`,
		[]string{"m v=1 5000", "m v=2 6000"}, true)
	// Not JSON, a scalar, a readings member that is no array, a bad time.
	f(JSONMapping{}, "a", `{"v":`, nil, true)
	f(JSONMapping{}, "a", `42`, nil, true)
	f(JSONMapping{Readings: "r"}, "a", `{"r":{}}`, nil, true)
	f(JSONMapping{Time: "t"}, "a", `{"t":"yesterday","v":1}`, nil, true)
	f(JSONMapping{Time: "t"}, "a", `{"t":1e300,"v":1}`, nil, true)
}

func FuzzJSONDecode(f *testing.F) {
	f.Add("plant/a/b", `{"sensor":"s1","ts":1700000000000,"temp":21.5}`)
	f.Add("a", `[{"t":5,"v":1},"oops",{"t":6,"v":2}]`)
	f.Add("a", `{"data":[{"t":1,"x":0.5}],"meta":{"line":"L2"}}`)
	f.Add("", `{"t":"2024-01-02T03:04:05Z","v":true}`)
	// The cases of the audit (decode_audit_test.go).
	f.Add("a//c", `{"t":1700000000.123456789,"v":1,"id":1234567890123456789}`)
	f.Add("a", `{"t":-9223372036.854775808,"v":1,"ts":9223372036.854775808}`)
	f.Add("a", `{"t":1e-999999999999999999999,"v":1,"ts":1E999999999999999999999}`)
	f.Add("a/b", `{"t":null,"v":1,"checksum":1e999,"o":{"a":2},"arr":[1,2],"s":"x","id":-0}`)
	f.Add("a", `[{"v":1,"x":1e999},{"v":2},[],null]`)
	f.Add("a", ``)
	f.Add("a", `[]`)
	f.Add("a", `{"data":[{"t":1.5e3,"v":-0.0}],"sensor":123456789012345678901234567890}`)
	m := &JSONMapping{MeasurementKey: "kind", MeasurementLevel: 2, Time: "t", TimeUnit: "ms", Tags: []string{"sensor", "meta.line"}, TopicTags: map[int]string{1: "site"}, Readings: "data"}
	m2 := &JSONMapping{Time: "ts"}
	m3 := &JSONMapping{Measurement: "m", MeasurementLevel: 2, Time: "t", TimeUnit: "s", Tags: []string{"id"}, TopicTags: map[int]string{3: "x"},
		Fields: []string{"v", "s", "o.a", "checksum"}}
	f.Fuzz(func(t *testing.T, topic, payload string) {
		for _, mm := range []*JSONMapping{m, m2, m3} {
			d := &jsonDecoder{m: mm}
			pts, err := d.decode(topic, []byte(payload), time.Unix(1, 0), nil)
			if err != nil && !errors.Is(err, ErrPayload) {
				t.Fatalf("err %v is not ErrPayload", err)
			}
			for _, p := range pts {
				if p.Measurement == "" || len(p.Fields) == 0 {
					t.Fatalf("bad point %+v", p)
				}
				for i := range p.Fields {
					if err := point.ValidateValue(&p.Fields[i]); err != nil {
						t.Fatalf("point %+v: %v", p, err)
					}
				}
				for _, tag := range p.Tags {
					if tag.Value == "" {
						t.Fatalf("point %+v: empty tag", p)
					}
				}
			}
		}
	})
}

func FuzzLineProtocolDecode(f *testing.F) {
	f.Add("cpu,host=a v=1 1000\ncpu v=2")
	f.Add("bad line")
	f.Add("m s=\"x\\\"y\",b=t,i=3i,u=4u 5")
	// The cases of the audit (decode_audit_test.go).
	f.Add("cpu v=1 1\nbad line\ncpu v=3 3\n")
	f.Add("cpu v=1 1\r\ncpu v=2 2\r\n")
	f.Add("# comment\n\ncpu,host=a v=1i 1\n   \n")
	f.Add("cpu v=1 99999999999999999999\ncpu v=NaN 1\ncpu v=2 2")
	f.Add("cpu s=\"multi\nline\" 1\ncpu v=1\r")
	f.Add("")
	f.Fuzz(func(t *testing.T, payload string) {
		d := &lpDecoder{}
		pts, err := d.decode("t", []byte(payload), time.Unix(1, 0), nil)
		if err != nil && !errors.Is(err, ErrPayload) {
			t.Fatalf("err %v is not ErrPayload", err)
		}
		for _, p := range pts {
			if p.Measurement == "" || len(p.Fields) == 0 {
				t.Fatalf("bad point %+v", p)
			}
		}
	})
}
