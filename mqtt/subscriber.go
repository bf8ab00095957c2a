package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// Writer receives the points. *engine.DB satisfies it. Write must be atomic
// (all points or none) and return only once the points are durable; to
// refuse one point it returns an error for which errors.As finds an
// *engine.PointError. Write must not keep the slice or its points' Tags and
// Fields slices after it returns.
//
// A Writer that is also a lineproto.AppenderDB (as *engine.DB is) gets
// each batch through one appender Commit instead (append.go), and Write
// only for a batch whose Commit was refused for a point. A wrapper that
// embeds *engine.DB to intercept Write inherits SampleAppender too: hold
// the engine in a named field instead.
type Writer interface {
	Write(points []engine.Point) error
}

// Defaults for the zero fields of Options.
const (
	DefaultMaxBatchMessages     = 1024
	DefaultQueueMessages        = 4096
	DefaultConnectTimeout       = 10 * time.Second
	DefaultMaxReconnectInterval = 30 * time.Second
	DefaultKeepAlive            = 30 * time.Second
	DefaultRebirthInterval      = 5 * time.Second
)

// ErrInvalidOptions is returned by New for options that cannot work.
var ErrInvalidOptions = errors.New("mqtt: invalid options")

// Subscription is one topic filter and the format of its messages.
type Subscription struct {
	// Filter is an MQTT topic filter, wildcards (+, #) and shared
	// subscriptions ($share/GROUP/filter) allowed.
	Filter string
	Format Format
	// Precision is the unit of line-protocol timestamps; default ns.
	Precision lineproto.Precision
	// JSON maps JSON payloads to points; required for FormatJSON.
	JSON *JSONMapping
}

// Options configure a Subscriber. Broker, ClientID and Subscriptions are
// required; every zero field of the others means its default.
type Options struct {
	// Brokers are the broker URLs tried in turn: tcp://HOST:1883,
	// ssl://HOST:8883 (or tls://), ws:// and wss://.
	Brokers []string
	// ClientID identifies the persistent session at the broker. Keep it
	// stable across restarts, or the broker keeps no messages for it.
	ClientID string
	// Username and Password authenticate to the broker when set.
	Username, Password string
	// TLS configures ssl://, tls:// and wss:// connections (CA, client
	// certificate); nil means the system roots.
	TLS *tls.Config
	// Subscriptions are the topic filters. A message whose topic matches
	// several filters is handled by the first one, in this order.
	Subscriptions []Subscription
	// MaxBatchMessages is the most messages written in one Write; default
	// 1024.
	MaxBatchMessages int
	// QueueMessages is how many received messages may wait for the writer
	// before the client stops reading from the broker; default 4096.
	QueueMessages int
	// ConnectTimeout bounds one connection attempt; default 10s.
	ConnectTimeout time.Duration
	// MaxReconnectInterval caps the exponential backoff between
	// reconnection attempts; default 30s.
	MaxReconnectInterval time.Duration
	// KeepAlive is the MQTT keep-alive interval; default 30s.
	KeepAlive time.Duration
	// RebirthInterval is the shortest time between two rebirth requests to
	// one Sparkplug edge node; default 5s.
	RebirthInterval time.Duration
	// Now gives the time of points that carry none; default time.Now.
	Now func() time.Time
	// Logger receives connection events and messages that do not parse;
	// default slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if len(c.Brokers) == 0 {
		return c, fmt.Errorf("%w: no broker", ErrInvalidOptions)
	}
	if c.ClientID == "" {
		return c, fmt.Errorf("%w: empty client id (a persistent session needs a stable one)", ErrInvalidOptions)
	}
	if len(c.Subscriptions) == 0 {
		return c, fmt.Errorf("%w: no subscription", ErrInvalidOptions)
	}
	c.Subscriptions = append([]Subscription(nil), c.Subscriptions...)
	for i, s := range c.Subscriptions {
		if err := validFilter(s.Filter); err != nil {
			return c, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		switch s.Format {
		case FormatLineProtocol, FormatSparkplugB:
		case FormatJSON:
			if s.JSON == nil {
				c.Subscriptions[i].JSON = &JSONMapping{}
			}
			if err := c.Subscriptions[i].JSON.validate(); err != nil {
				return c, fmt.Errorf("%w: filter %q: %w", ErrInvalidOptions, s.Filter, err)
			}
		default:
			return c, fmt.Errorf("%w: filter %q: unknown format %d", ErrInvalidOptions, s.Filter, s.Format)
		}
	}
	if c.MaxBatchMessages <= 0 {
		c.MaxBatchMessages = DefaultMaxBatchMessages
	}
	if c.QueueMessages <= 0 {
		c.QueueMessages = DefaultQueueMessages
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.MaxReconnectInterval <= 0 {
		c.MaxReconnectInterval = DefaultMaxReconnectInterval
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.RebirthInterval <= 0 {
		c.RebirthInterval = DefaultRebirthInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Subscriber ingests MQTT messages into a Writer. Create one with New and
// run it with Run.
type Subscriber struct {
	db   Writer
	opts Options
	subs []*subscription
	in   chan inbound
	stop chan struct{} // closed when Run returns, so the handler never blocks
	// waiters counts the goroutines waiting for a SUBACK; Run waits for
	// them once stop is closed. None starts once mu's stopped is set.
	waiters sync.WaitGroup

	ready     chan struct{} // closed once the first subscription is acknowledged
	readyOnce sync.Once

	connected  atomic.Bool
	connects   atomic.Int64
	reconnects atomic.Int64
	queued     atomic.Int64

	mu      sync.Mutex // guards client and stopped
	client  paho.Client
	stopped bool // Run is returning: no new SUBACK waiter

	running atomic.Bool

	// afterFlush, when set (by tests), is called after each batch's
	// counters are updated; beforeCommit before each appender Commit, which
	// it fails by returning an error.
	afterFlush   func()
	beforeCommit func() error

	// Used by the writer goroutine only.
	sparkplug *sparkplugState
	app       point.SampleAppender // of db, nil when it has none
	refs      refTable
	points    []engine.Point
	owners    []int // owners[i] is the batch index of the message of points[i]
	failed    []bool
}

// subscription is a Subscription with its decoder and counters.
type subscription struct {
	Subscription
	match   string // the filter without a $share/GROUP/ prefix
	decoder decoder

	messages, points, failures, dropped atomic.Int64
	unknownAliases, rebirths, skipped   atomic.Int64
	lagNanos                            atomic.Int64
}

// inbound is a received message waiting for the writer.
type inbound struct {
	msg  paho.Message
	sub  int
	recv time.Time
}

// New returns a Subscriber of db. It does not connect: Run does.
func New(db Writer, opts *Options) (*Subscriber, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil writer", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Subscriber{db: db, opts: o, in: make(chan inbound, o.QueueMessages), stop: make(chan struct{}), ready: make(chan struct{}),
		app: appenderOf(db)}
	for _, sub := range o.Subscriptions {
		ss := &subscription{Subscription: sub, match: stripShare(sub.Filter)}
		switch sub.Format {
		case FormatLineProtocol:
			ss.decoder = &lpDecoder{precision: sub.Precision}
		case FormatJSON:
			ss.decoder = &jsonDecoder{m: sub.JSON}
		case FormatSparkplugB:
			ss.decoder = newSparkplugDecoder(s, ss)
		}
		s.subs = append(s.subs, ss)
	}
	return s, nil
}

// Ready returns a channel closed once the broker acknowledged the
// subscriptions of the first connection.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Run connects, subscribes and ingests until ctx is done, then disconnects
// and returns nil. Messages received but not yet written are not
// acknowledged: the broker delivers them again on the next connection. The
// first connection is retried with backoff like the later ones, so Run does
// not fail for a broker that is down. Run may be called once.
func (s *Subscriber) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("mqtt: Run called twice")
	}
	c := paho.NewClient(s.clientOptions())
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
	tok := c.Connect() // retried in the background until it succeeds
	defer func() {
		// Unblock a handler waiting on a full queue first: paho's
		// Disconnect waits for its handler goroutine.
		close(s.stop)
		c.Disconnect(250)
		// A late connect handler must not start a waiter while Wait runs.
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.waiters.Wait()
	}()
	select {
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return fmt.Errorf("mqtt: connect: %w", err)
		}
	case <-ctx.Done():
		return nil
	}

	batch := make([]inbound, 0, s.opts.MaxBatchMessages)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case m := <-s.in:
			batch = append(batch, m)
		}
	fill:
		for len(batch) < s.opts.MaxBatchMessages {
			select {
			case m := <-s.in:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		s.queued.Add(-int64(len(batch)))
		if err := s.flush(ctx, batch); err != nil {
			return nil // ctx is done; the batch is not acknowledged
		}
	}
}

func (s *Subscriber) clientOptions() *paho.ClientOptions {
	o := paho.NewClientOptions()
	for _, b := range s.opts.Brokers {
		o.AddBroker(b)
	}
	o.SetClientID(s.opts.ClientID)
	o.SetCustomOpenConnectionFn(openConnection)
	o.SetCleanSession(false)
	o.SetAutoAckDisabled(true) // acknowledged by flush, once durable
	o.SetOrderMatters(true)    // one handler call at a time, in arrival order
	o.SetAutoReconnect(true)
	o.SetConnectRetry(true)
	o.SetConnectRetryInterval(time.Second)
	o.SetMaxReconnectInterval(s.opts.MaxReconnectInterval)
	o.SetConnectTimeout(s.opts.ConnectTimeout)
	o.SetKeepAlive(s.opts.KeepAlive)
	o.SetResumeSubs(true)
	if s.opts.Username != "" {
		o.SetUsername(s.opts.Username)
		o.SetPassword(s.opts.Password)
	}
	if s.opts.TLS != nil {
		o.SetTLSConfig(s.opts.TLS)
	}
	o.SetDefaultPublishHandler(s.receive)
	o.SetOnConnectHandler(func(c paho.Client) {
		if s.connects.Add(1) > 1 {
			s.reconnects.Add(1)
		}
		s.connected.Store(true)
		// The broker keeps the subscriptions of a persistent session; they
		// are renewed anyway in case it lost the session (no persistence).
		filters := make(map[string]byte, len(s.subs))
		for _, sub := range s.subs {
			filters[sub.Filter] = 1
		}
		tok := c.SubscribeMultiple(filters, nil)
		s.mu.Lock()
		if !s.stopped {
			s.waiters.Go(func() { s.awaitSubscribed(tok, len(filters)) })
		}
		s.mu.Unlock()
		s.opts.Logger.Info("mqtt: connected", "client_id", s.opts.ClientID)
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.connected.Store(false)
		s.opts.Logger.Warn("mqtt: connection lost; reconnecting", "err", err)
	})
	return o
}

// awaitSubscribed waits for the SUBACK of a connection's subscribe of n
// filters and marks the subscriber ready.
func (s *Subscriber) awaitSubscribed(tok paho.Token, n int) {
	// Done on the SUBACK, with an error when the connection drops
	// first (the next connection subscribes again), or never: in
	// a persistent session the client keeps the token of a lost
	// connection for the next one, and Disconnect while it is
	// reconnecting leaves it pending. So Run's end stops the wait.
	select {
	case <-tok.Done():
	case <-s.stop:
		return
	}
	if err := tok.Error(); err != nil {
		s.opts.Logger.Error("mqtt: subscribe", "err", err)
		return
	}
	s.opts.Logger.Info("mqtt: subscribed", "filters", n)
	s.readyOnce.Do(func() { close(s.ready) })
}

// receive is paho's handler: it queues the message for the writer. It
// blocks while the queue is full, which stops reading from the broker.
func (s *Subscriber) receive(_ paho.Client, msg paho.Message) {
	i := s.route(msg.Topic())
	if i < 0 {
		// No filter of ours: a stale subscription of the session.
		msg.Ack()
		return
	}
	s.queued.Add(1)
	select {
	case s.in <- inbound{msg: msg, sub: i, recv: s.opts.Now()}:
	case <-s.stop:
		s.queued.Add(-1)
	}
}

// route returns the index of the first subscription whose filter matches
// topic, or -1.
func (s *Subscriber) route(topic string) int {
	for i, sub := range s.subs {
		if topicMatch(sub.match, topic) {
			return i
		}
	}
	return -1
}

// flush decodes and writes batch, then acknowledges its messages in order.
// It returns an error only when ctx ended before the points were written.
func (s *Subscriber) flush(ctx context.Context, batch []inbound) error {
	s.points = s.points[:0]
	s.owners = s.owners[:0]
	s.failed = s.failed[:0]
	for i, m := range batch {
		sub := s.subs[m.sub]
		n := len(s.points)
		var err error
		s.points, err = sub.decoder.decode(m.msg.Topic(), m.msg.Payload(), m.recv, s.points)
		failed := err != nil
		if failed {
			s.opts.Logger.Warn("mqtt: message not stored in full", "topic", m.msg.Topic(), "format", sub.Format, "err", err)
		}
		s.failed = append(s.failed, failed)
		for range s.points[n:] {
			s.owners = append(s.owners, i)
		}
	}
	store := s.write
	if s.app != nil {
		store = s.appendBatch
	}
	if err := store(ctx, batch); err != nil {
		return err
	}
	now := s.opts.Now()
	for i, m := range batch {
		m.msg.Ack()
		sub := s.subs[m.sub]
		sub.messages.Add(1)
		if s.failed[i] {
			sub.failures.Add(1)
		}
		sub.lagNanos.Store(int64(now.Sub(m.recv)))
	}
	for i := range s.points {
		s.subs[batch[s.owners[i]].sub].points.Add(1)
	}
	clear(s.points) // drop references to the payloads' strings
	if s.afterFlush != nil {
		s.afterFlush()
	}
	return nil
}

// maxDrops is how many refused points a batch may drop one by one before
// its points are written one at a time.
const maxDrops = 8

// write writes s.points. A point the database refuses (invalid, field type
// conflict) is dropped and counted as a failure of its message; any other
// error is retried with backoff until it succeeds or ctx is done.
func (s *Subscriber) write(ctx context.Context, batch []inbound) error {
	backoff := firstRetryWait
	drops := 0
	for len(s.points) > 0 {
		if drops == maxDrops {
			return s.writeEach(ctx, batch)
		}
		err := s.db.Write(s.points)
		if err == nil {
			return nil
		}
		var pe *engine.PointError
		if errors.As(err, &pe) && pe.Index >= 0 && pe.Index < len(s.points) {
			s.dropPoint(pe.Index, batch, pe)
			drops++
			continue
		}
		if backoff, err = s.retryWait(ctx, err, backoff); err != nil {
			return err
		}
	}
	return nil
}

// writeEach writes s.points one at a time, dropping those refused.
func (s *Subscriber) writeEach(ctx context.Context, batch []inbound) error {
	for i := 0; i < len(s.points); i++ {
		backoff := firstRetryWait
		for {
			err := s.db.Write(s.points[i : i+1])
			if err == nil {
				break
			}
			var pe *engine.PointError
			if errors.As(err, &pe) {
				s.dropPoint(i, batch, pe)
				i--
				break
			}
			if backoff, err = s.retryWait(ctx, err, backoff); err != nil {
				return err
			}
		}
	}
	return nil
}

// The waits between retries of a failed write: the first, then doubled
// after each failure up to the longest.
const (
	firstRetryWait   = 50 * time.Millisecond
	longestRetryWait = 5 * time.Second
)

// retryWait logs the failed write err, then waits backoff or until ctx is
// done. It returns the next wait, or ctx's error.
func (s *Subscriber) retryWait(ctx context.Context, err error, backoff time.Duration) (time.Duration, error) {
	s.opts.Logger.Error("mqtt: write failed; retrying", "err", err, "retry_in", backoff)
	select {
	case <-ctx.Done():
		return backoff, ctx.Err()
	case <-time.After(backoff):
	}
	return min(2*backoff, longestRetryWait), nil
}

func (s *Subscriber) dropPoint(i int, batch []inbound, err error) {
	m := s.owners[i]
	sub := s.subs[batch[m].sub]
	sub.dropped.Add(1)
	if !s.failed[m] {
		s.failed[m] = true
		s.opts.Logger.Warn("mqtt: point refused", "topic", batch[m].msg.Topic(), "format", sub.Format, "err", err)
	}
	s.points = append(s.points[:i], s.points[i+1:]...)
	s.owners = append(s.owners[:i], s.owners[i+1:]...)
}

// publish sends a message (a Sparkplug rebirth request) at QoS 0 without
// waiting for it.
func (s *Subscriber) publish(topic string, payload []byte) {
	s.mu.Lock()
	c := s.client
	s.mu.Unlock()
	if c != nil {
		c.Publish(topic, 0, false, payload)
	}
}

// validFilter checks an MQTT topic filter.
func validFilter(f string) error {
	m := stripShare(f)
	if m == "" {
		return fmt.Errorf("empty topic filter %q", f)
	}
	levels := strings.Split(m, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("topic filter %q: # must be the last level", f)
		case l != "#" && l != "+" && strings.ContainsAny(l, "#+"):
			return fmt.Errorf("topic filter %q: a wildcard must be a whole level", f)
		}
	}
	return nil
}

// stripShare returns a shared subscription's filter without its
// $share/GROUP/ prefix.
func stripShare(f string) string {
	if rest, ok := strings.CutPrefix(f, "$share/"); ok {
		if _, filter, ok := strings.Cut(rest, "/"); ok {
			return filter
		}
	}
	return f
}

// topicMatch reports whether topic matches the filter, as MQTT 3.1.1
// section 4.7 defines: + is one level, # is the rest (the parent included),
// and a wildcard at the first level does not match a topic starting with $.
func topicMatch(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		f, frest, fmore := strings.Cut(filter, "/")
		if f == "#" {
			return true
		}
		t, trest, tmore := strings.Cut(topic, "/")
		if f != "+" && f != t {
			return false
		}
		if !fmore || !tmore {
			if fmore && !tmore {
				return frest == "#"
			}
			return fmore == tmore
		}
		filter, topic = frest, trest
	}
}
