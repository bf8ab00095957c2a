package main

import (
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratadb/strata/forward"
	"github.com/stratadb/strata/mqtt"
	"github.com/stratadb/strata/server"
)

// forwardStatus feeds the operator page's forwarding figures from f. The
// protocol is shown, never the URL (it may hold credentials).
func forwardStatus(f *forwardHandle, protocol string) func() server.ForwardStatus {
	return func() server.ForwardStatus {
		s := f.stats()
		return server.ForwardStatus{
			Protocol: protocol, Lag: s.Lag,
			BacklogSamples: s.BacklogSamples, BacklogBytes: s.BacklogBytes,
			SamplesSent: s.SamplesSent, SamplesDropped: s.SamplesDropped, Retries: s.Retries,
			LastSuccess: s.LastSuccess, LastError: s.LastError,
		}
	}
}

// mqttStatus feeds the operator page's MQTT figures from sub: the brokers
// as host:port (without credentials) and the sums over its topic filters.
func mqttStatus(sub *mqtt.Subscriber, brokers, topics []string) func() server.MQTTStatus {
	hosts := make([]string, 0, len(brokers))
	for _, b := range brokers {
		if u, err := url.Parse(b); err == nil && u.Host != "" {
			hosts = append(hosts, u.Host)
		}
	}
	broker := ""
	if len(hosts) > 0 {
		broker = hosts[0]
	}
	return func() server.MQTTStatus {
		s := sub.Stats()
		st := server.MQTTStatus{Connected: s.Connected, Broker: broker, Topics: topics}
		for _, f := range s.Filters {
			st.Messages += f.Messages
			st.Points += f.Points
			st.Errors += f.Failures
		}
		return st
	}
}

// textMetric is a metric as forward.Stats and mqtt.Stats describe them, in
// terms of the Prometheus text format, so that those packages need no
// metrics library.
type textMetric struct {
	Name   string
	Help   string
	Type   string   // "counter" or "gauge"
	Labels []string // label pairs: name, value, name, value...
	Value  float64
}

// statsCollector exposes the metrics that metrics returns (a forwarder's
// strata_forward_* or a subscriber's strata_mqtt_*) on the server's
// /metrics.
func statsCollector[M forward.Metric | mqtt.Metric](metrics func() []M) prometheus.Collector {
	return metricsCollector(func() []textMetric {
		ms := metrics()
		out := make([]textMetric, len(ms))
		for i, m := range ms {
			out[i] = textMetric(m)
		}
		return out
	})
}

type metricsCollector func() []textMetric

func (c metricsCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	descs := map[string]*prometheus.Desc{}
	for _, m := range c() {
		var names, values []string
		for i := 0; i+1 < len(m.Labels); i += 2 {
			names = append(names, m.Labels[i])
			values = append(values, m.Labels[i+1])
		}
		d, ok := descs[m.Name]
		if !ok {
			d = prometheus.NewDesc(m.Name, m.Help, names, nil)
			descs[m.Name] = d
		}
		typ := prometheus.GaugeValue
		if m.Type == "counter" {
			typ = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(d, typ, m.Value, values...)
	}
}

// forwardCollector exposes f's Stats as strata_forward_* metrics.
func forwardCollector(f *forwardHandle) prometheus.Collector {
	return statsCollector(func() []forward.Metric { return f.stats().Metrics() })
}

// mqttCollector exposes sub's Stats as strata_mqtt_* metrics.
func mqttCollector(sub *mqtt.Subscriber) prometheus.Collector {
	return statsCollector(func() []mqtt.Metric { return sub.Stats().Metrics() })
}
