package main

import (
	"net/url"

	"github.com/stratadb/strata/forward"
	"github.com/stratadb/strata/mqtt"
	"github.com/stratadb/strata/server"
)

// forwardStatus feeds the operator page's forwarding figures from f. The
// protocol is shown, never the URL (it may hold credentials).
func forwardStatus(f *forward.Forwarder, protocol string) func() server.ForwardStatus {
	return func() server.ForwardStatus {
		s := f.Stats()
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
