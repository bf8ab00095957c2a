package mqtt

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestRunEndsWithSubscribePending stops a subscriber whose connection
// dropped between its SUBSCRIBE and the SUBACK, while the client keeps
// reconnecting to a broker that is gone. The client keeps such a
// subscribe pending for the next connection and never finishes it on
// Disconnect; Run, which waits for its goroutines, must still return.
func TestRunEndsWithSubscribePending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	brokerDone := make(chan struct{})
	go func() { // a broker for one connection, which it drops on SUBSCRIBE
		defer close(brokerDone)
		conn, err := ln.Accept()
		ln.Close() // every reconnect is refused from now on
		if err != nil {
			return
		}
		defer conn.Close()
		if _, err := packets.ReadPacket(conn); err != nil { // CONNECT
			return
		}
		if err := packets.NewControlPacket(packets.Connack).Write(conn); err != nil {
			return
		}
		for {
			p, err := packets.ReadPacket(conn)
			if _, sub := p.(*packets.SubscribePacket); err != nil || sub {
				return
			}
		}
	}()
	lost := make(chan struct{}, 1)
	logger := slog.New(&signalHandler{Handler: slog.NewTextHandler(testLogOut(), nil), match: "connection lost", ch: lost})
	s, err := New(newNotifyWriter(openDB(t)), &Options{Brokers: []string{"tcp://" + ln.Addr().String()},
		ClientID: "pending", Subscriptions: []Subscription{{Filter: "a/#"}}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	watchdog := time.After(time.Minute) // not a wait: a pass ends long before
	select {
	case <-lost:
	case <-watchdog:
		t.Fatal("the connection was never lost")
	}
	<-brokerDone
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-watchdog:
		t.Fatal("Run did not return: a goroutine still waits for the pending subscribe")
	}
}

// signalHandler is a slog.Handler that also signals ch when a record's
// message contains match.
type signalHandler struct {
	slog.Handler
	match string
	ch    chan struct{}
}

func (h *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}
