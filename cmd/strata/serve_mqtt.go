package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
	"github.com/stratadb/strata/mqtt"
)

// mqttFlags are the --mqtt-* flags of strata serve.
type mqttFlags struct {
	brokers, topics                  stringList
	format, clientID                 *string
	username, password, passwordFile *string
	tlsCA, tlsCert, tlsKey           *string
	precision                        *string
	jMeasurement, jMeasurementKey    *string
	jMeasurementLevel                *int
	jTime, jTimeUnit, jTags, jFields *string
	jTopicTags, jReadings            *string
	maxBatch                         *int
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func addMQTTFlags(fs *flag.FlagSet) *mqttFlags {
	m := &mqttFlags{}
	fs.Var(&m.brokers, "mqtt-broker", "MQTT broker to subscribe to: tcp://HOST:1883, ssl://HOST:8883, ws://, wss:// (repeat for fail-over); empty: no MQTT")
	fs.Var(&m.topics, "mqtt-topic", "topic filter to subscribe to at QoS 1, as FILTER or FILTER=FORMAT (e.g. 'plant/#=json'); repeatable, each with its own format")
	m.format = fs.String("mqtt-format", "lp", "format of the --mqtt-topic filters that name none: lp (line protocol), json or sparkplugb")
	host, _ := os.Hostname()
	m.clientID = fs.String("mqtt-client-id", "strata-"+host, "MQTT client id; keep it stable, the broker keeps the persistent session under it")
	m.username = fs.String("mqtt-username", "", "MQTT user name")
	m.password = fs.String("mqtt-password", "", "MQTT password")
	m.passwordFile = fs.String("mqtt-password-file", "", "read the MQTT password from this file (keeps it out of the process list)")
	m.tlsCA = fs.String("mqtt-tls-ca", "", "PEM file of the CA that signed the broker's certificate (default: system roots)")
	m.tlsCert = fs.String("mqtt-tls-cert", "", "PEM client certificate for brokers that require one (with --mqtt-tls-key)")
	m.tlsKey = fs.String("mqtt-tls-key", "", "PEM key of --mqtt-tls-cert")
	m.precision = fs.String("mqtt-precision", "ns", "unit of line-protocol timestamps over MQTT: ns, us, ms or s")
	m.maxBatch = fs.Int("mqtt-max-batch", mqtt.DefaultMaxBatchMessages, "most MQTT messages written (and acknowledged) together")
	m.jMeasurement = fs.String("mqtt-json-measurement", "mqtt", "json: measurement of every point, unless the key or topic level below gives one")
	m.jMeasurementKey = fs.String("mqtt-json-measurement-key", "", "json: member whose value is the measurement")
	m.jMeasurementLevel = fs.Int("mqtt-json-measurement-level", 0, "json: topic level (1 = first) that is the measurement")
	m.jTime = fs.String("mqtt-json-time-key", "", "json: member holding the time (a number in --mqtt-json-time-unit or RFC 3339); empty: arrival time")
	m.jTimeUnit = fs.String("mqtt-json-time-unit", "s", "json: unit of a numeric time: ns, us, ms or s")
	m.jTags = fs.String("mqtt-json-tags", "", "json: comma-separated members stored as tags")
	m.jFields = fs.String("mqtt-json-fields", "", "json: comma-separated members stored as fields (default: every number and boolean not otherwise used)")
	m.jTopicTags = fs.String("mqtt-json-topic-tags", "", "json: topic levels as tags, LEVEL=KEY,... (1 = first level), e.g. 2=site,3=line")
	m.jReadings = fs.String("mqtt-json-readings-key", "", "json: member holding an array of readings (default: the payload is one reading or an array of them)")
	return m
}

// check reports --mqtt-* flags that cannot work, before anything is
// opened: every check of options and of mqtt.New but those that read a
// file, and (fs telling which flags were given) any --mqtt-* flag given
// without --mqtt-broker, which would be ignored.
func (m *mqttFlags) check(fs *flag.FlagSet) error {
	if len(m.brokers) == 0 {
		other := ""
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "mqtt-") && f.Name != "mqtt-broker" && other == "" {
				other = f.Name
			}
		})
		if other != "" {
			return fmt.Errorf("--%s needs --mqtt-broker", other)
		}
	}
	opts, err := m.options()
	if err != nil || opts == nil {
		return err
	}
	// mqtt.New only keeps the writer: a subscriber that never runs
	// checks the topic filters and the rest as the real one will.
	_, err = mqtt.New(unusedWriter{}, opts)
	return err
}

// unusedWriter is the writer of the subscriber check makes, never run.
type unusedWriter struct{}

func (unusedWriter) Write([]engine.Point) error { return errors.New("unused") }

// options returns the mqtt.Options the flags describe without reading any
// file (no password file, no TLS), or nil when no broker is set.
func (m *mqttFlags) options() (*mqtt.Options, error) {
	if len(m.brokers) == 0 {
		if len(m.topics) > 0 {
			return nil, errors.New("--mqtt-topic needs --mqtt-broker")
		}
		return nil, nil
	}
	if len(m.topics) == 0 {
		return nil, errors.New("--mqtt-broker needs at least one --mqtt-topic")
	}
	if strings.TrimSpace(*m.clientID) == "" {
		return nil, errors.New("--mqtt-client-id must not be empty (the broker keeps the session under it)")
	}
	def, err := mqtt.ParseFormat(*m.format)
	if err != nil {
		return nil, fmt.Errorf("--mqtt-format: %w", err)
	}
	prec, err := lineproto.ParsePrecision(*m.precision)
	if err != nil {
		return nil, fmt.Errorf("--mqtt-precision: %w", err)
	}
	jm, err := m.jsonMapping()
	if err != nil {
		return nil, err
	}
	if *m.maxBatch < 1 {
		return nil, fmt.Errorf("--mqtt-max-batch %d: want at least 1", *m.maxBatch)
	}
	if (*m.tlsCert == "") != (*m.tlsKey == "") {
		return nil, errors.New("--mqtt-tls-cert and --mqtt-tls-key go together")
	}
	if *m.password != "" && *m.passwordFile != "" {
		return nil, errors.New("--mqtt-password and --mqtt-password-file are exclusive")
	}
	opts := &mqtt.Options{Brokers: m.brokers, ClientID: *m.clientID, Username: *m.username, Password: *m.password,
		MaxBatchMessages: *m.maxBatch}
	for _, t := range m.topics {
		filter, format := splitTopicFormat(t, def)
		opts.Subscriptions = append(opts.Subscriptions, mqtt.Subscription{Filter: filter, Format: format, Precision: prec, JSON: jm})
	}
	return opts, nil
}

// subscriber returns the MQTT subscriber the flags describe, or nil when no
// broker is set. Its errors are those of options, mqtt.ErrInvalidOptions,
// or a file that cannot be read.
func (m *mqttFlags) subscriber(db *engine.DB, logger *slog.Logger) (*mqtt.Subscriber, error) {
	opts, err := m.options()
	if err != nil || opts == nil {
		return nil, err
	}
	opts.Logger = logger
	if *m.passwordFile != "" {
		b, err := os.ReadFile(*m.passwordFile)
		if err != nil {
			return nil, err
		}
		opts.Password = strings.TrimSpace(string(b))
	}
	if *m.tlsCA != "" || *m.tlsCert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if *m.tlsCA != "" {
			pem, err := os.ReadFile(*m.tlsCA)
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--mqtt-tls-ca %s: no PEM certificate", *m.tlsCA)
			}
		}
		if *m.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(*m.tlsCert, *m.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--mqtt-tls-cert: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts.TLS = cfg
	}
	return mqtt.New(db, opts)
}

// splitTopicFormat splits FILTER=FORMAT; a suffix that names no format is
// part of the filter (topics may hold '=').
func splitTopicFormat(s string, def mqtt.Format) (string, mqtt.Format) {
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		if f, err := mqtt.ParseFormat(s[i+1:]); err == nil {
			return s[:i], f
		}
	}
	return s, def
}

func (m *mqttFlags) jsonMapping() (*mqtt.JSONMapping, error) {
	jm := &mqtt.JSONMapping{Measurement: *m.jMeasurement, MeasurementKey: *m.jMeasurementKey,
		MeasurementLevel: *m.jMeasurementLevel, Time: *m.jTime, TimeUnit: *m.jTimeUnit,
		Tags: splitList(*m.jTags), Fields: splitList(*m.jFields), Readings: *m.jReadings}
	for _, kv := range splitList(*m.jTopicTags) {
		l, key, ok := strings.Cut(kv, "=")
		level, err := strconv.Atoi(l)
		if !ok || err != nil || level < 1 || key == "" {
			return nil, fmt.Errorf("--mqtt-json-topic-tags: %q is not LEVEL=KEY with LEVEL >= 1", kv)
		}
		if jm.TopicTags == nil {
			jm.TopicTags = map[int]string{}
		}
		jm.TopicTags[level] = key
	}
	return jm, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// runMQTT runs sub until the returned stop is called; stop waits for it to
// end (messages not yet written stay unacknowledged at the broker).
func runMQTT(sub *mqtt.Subscriber, logger *slog.Logger) (stop func()) {
	if sub == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sub.Run(ctx); err != nil {
			logger.Error("mqtt stopped", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
