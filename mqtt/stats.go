package mqtt

import "time"

// Stats are a Subscriber's counters.
type Stats struct {
	Connected  bool  // connected to the broker now
	Reconnects int64 // connections made after the first
	Queued     int64 // messages received and waiting for the writer
	Filters    []FilterStats
}

// FilterStats are the counters of one topic filter.
type FilterStats struct {
	Filter string
	Format Format
	// Messages is the number of messages handled and acknowledged; Points
	// the points stored from them.
	Messages, Points int64
	// Failures counts messages that did not parse in full (a bad payload,
	// a rejected line or reading, an unknown Sparkplug alias) or held a
	// point the database refused; DroppedPoints counts those refused points.
	Failures, DroppedPoints int64
	// UnknownAliases counts Sparkplug metrics of an alias no birth defined;
	// Rebirths the rebirth requests published.
	UnknownAliases, Rebirths int64
	// SkippedMetrics counts Sparkplug metrics with a value not stored: a
	// datatype strata does not store (arrays, DataSet, Template, Bytes,
	// File, PropertySet), a float NaN or infinite, a value not of its
	// datatype, or a name or text not UTF-8. (Null and transient metrics
	// are not counted.)
	SkippedMetrics int64
	// Lag is the time between the arrival of the last acknowledged message
	// and its acknowledgement.
	Lag time.Duration
}

// Stats returns the current counters.
func (s *Subscriber) Stats() Stats {
	st := Stats{Connected: s.connected.Load(), Reconnects: s.reconnects.Load(), Queued: max(s.queued.Load(), 0)}
	for _, sub := range s.subs {
		st.Filters = append(st.Filters, FilterStats{
			Filter: sub.Filter, Format: sub.Format,
			Messages: sub.messages.Load(), Points: sub.points.Load(),
			Failures: sub.failures.Load(), DroppedPoints: sub.dropped.Load(),
			UnknownAliases: sub.unknownAliases.Load(), Rebirths: sub.rebirths.Load(),
			SkippedMetrics: sub.skipped.Load(),
			Lag:            time.Duration(sub.lagNanos.Load()),
		})
	}
	return st
}

// Metric is one metric of Stats.Metrics, in terms of the Prometheus text
// format, so that a server can expose it without this package depending on
// a metrics library.
type Metric struct {
	Name   string   // e.g. strata_mqtt_messages_total
	Help   string   // one line
	Type   string   // "counter" or "gauge"
	Labels []string // label pairs: name, value, name, value...
	Value  float64
}

// Metrics describes s as strata_mqtt_* metrics, labelled by topic filter
// and format where they are per filter.
func (s Stats) Metrics() []Metric {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	out := []Metric{
		{Name: "strata_mqtt_connected", Help: "1 while connected to the MQTT broker.", Type: "gauge", Value: b2f(s.Connected)},
		{Name: "strata_mqtt_reconnects_total", Help: "Connections to the MQTT broker after the first.", Type: "counter", Value: float64(s.Reconnects)},
		{Name: "strata_mqtt_queued_messages", Help: "MQTT messages received and not yet written.", Type: "gauge", Value: float64(s.Queued)},
	}
	per := []struct {
		name, help, typ string
		get             func(FilterStats) float64
	}{
		{"strata_mqtt_messages_total", "MQTT messages handled and acknowledged.", "counter", func(f FilterStats) float64 { return float64(f.Messages) }},
		{"strata_mqtt_points_total", "Points stored from MQTT messages.", "counter", func(f FilterStats) float64 { return float64(f.Points) }},
		{"strata_mqtt_failures_total", "MQTT messages not stored in full (did not parse, or held refused points); acknowledged anyway.", "counter", func(f FilterStats) float64 { return float64(f.Failures) }},
		{"strata_mqtt_dropped_points_total", "Points of MQTT messages refused by the database.", "counter", func(f FilterStats) float64 { return float64(f.DroppedPoints) }},
		{"strata_mqtt_sparkplug_unknown_aliases_total", "Sparkplug metrics of an alias or name no birth defined.", "counter", func(f FilterStats) float64 { return float64(f.UnknownAliases) }},
		{"strata_mqtt_sparkplug_rebirth_requests_total", "Sparkplug rebirth requests published.", "counter", func(f FilterStats) float64 { return float64(f.Rebirths) }},
		{"strata_mqtt_sparkplug_skipped_metrics_total", "Sparkplug metrics with a value not stored (unsupported datatype, NaN or infinite float, malformed value).", "counter", func(f FilterStats) float64 { return float64(f.SkippedMetrics) }},
		{"strata_mqtt_lag_seconds", "Time from the arrival of the last acknowledged MQTT message to its acknowledgement.", "gauge", func(f FilterStats) float64 { return f.Lag.Seconds() }},
	}
	for _, p := range per {
		for _, f := range s.Filters {
			out = append(out, Metric{Name: p.name, Help: p.help, Type: p.typ,
				Labels: []string{"filter", f.Filter, "format", f.Format.String()}, Value: p.get(f)})
		}
	}
	return out
}
