package mqtt

// A publisher for the benchmarks that costs next to nothing per message,
// so that a figure measures the broker and strata rather than the client
// that feeds them: plain MQTT 3.1.1 over TCP, PUBLISH packets encoded
// before the clock starts (only the packet id is written per message),
// written through a buffer, QoS 1 with a window of unacknowledged
// messages per connection (a reader goroutine counts the PUBACKs, which
// the broker sends in order).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// pubPacket is an encoded QoS 1 PUBLISH whose packet id is at idOff.
type pubPacket struct {
	b     []byte
	idOff int
}

// appendRemaining appends n as an MQTT remaining length.
func appendRemaining(b []byte, n int) []byte {
	for {
		c := byte(n % 128)
		n /= 128
		if n > 0 {
			c |= 0x80
		}
		b = append(b, c)
		if n == 0 {
			return b
		}
	}
}

func appendMQTTString(b []byte, s string) []byte {
	return append(append(b, byte(len(s)>>8), byte(len(s))), s...)
}

func encodePublish(topic string, payload []byte) pubPacket {
	b := appendRemaining([]byte{0x32}, 2+len(topic)+2+len(payload)) // PUBLISH, QoS 1
	b = appendMQTTString(b, topic)
	off := len(b)
	b = append(b, 0, 0)
	return pubPacket{b: append(b, payload...), idOff: off}
}

// rawPublisher is one connection of the benchmark publisher.
type rawPublisher struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// dialRawPublisher connects to broker (tcp://HOST:PORT) with a clean
// session.
func dialRawPublisher(tb testing.TB, broker, clientID string) *rawPublisher {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(broker, "tcp://"), 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	p := &rawPublisher{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), w: bufio.NewWriterSize(conn, 64<<10)}
	vh := appendMQTTString(nil, "MQTT")
	vh = append(vh, 4, 0x02, 0, 60) // level 3.1.1, clean session, keep-alive 60s
	vh = appendMQTTString(vh, clientID)
	p.w.Write(appendRemaining([]byte{0x10}, len(vh)))
	p.w.Write(vh)
	if err := p.w.Flush(); err != nil {
		tb.Fatal(err)
	}
	var ack [4]byte
	if _, err := io.ReadFull(p.r, ack[:]); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		tb.Fatalf("connack %x: %v", ack, err)
	}
	return p
}

// publish sends n messages, packets[(first+k*step) % len] for k < n, with
// at most window unacknowledged, and returns once all are acknowledged.
func (p *rawPublisher) publish(packets []pubPacket, first, step, n, window int) error {
	slots := make(chan struct{}, window)
	acked := make(chan error, 1)
	go func() {
		var ack [4]byte
		for range n {
			if _, err := io.ReadFull(p.r, ack[:]); err != nil {
				acked <- err
				return
			}
			if ack[0] != 0x40 || ack[1] != 2 {
				acked <- fmt.Errorf("not a PUBACK: %x", ack)
				return
			}
			<-slots
		}
		acked <- nil
	}()
	for k := range n {
		select {
		case slots <- struct{}{}:
		default:
			// The window is full: send what is buffered and wait.
			if err := p.w.Flush(); err != nil {
				return err
			}
			slots <- struct{}{}
		}
		pk := &packets[(first+k*step)%len(packets)]
		id := uint16(k%65535 + 1)
		p.w.Write(pk.b[:pk.idOff])
		p.w.WriteByte(byte(id >> 8))
		p.w.WriteByte(byte(id))
		if _, err := p.w.Write(pk.b[pk.idOff+2:]); err != nil {
			return err
		}
	}
	if err := p.w.Flush(); err != nil {
		return err
	}
	select {
	case err := <-acked:
		return err
	case <-time.After(2 * time.Minute):
		return errors.New("publisher: acknowledgements stopped")
	}
}

// publishAll publishes n messages over conns connections, message i on
// connection i%conns, and returns when the broker acknowledged all.
func publishAll(tb testing.TB, pubs []*rawPublisher, packets []pubPacket, n, window int) {
	tb.Helper()
	errc := make(chan error, len(pubs))
	for c, p := range pubs {
		share := n / len(pubs)
		if c < n%len(pubs) {
			share++
		}
		go func() { errc <- p.publish(packets, c, len(pubs), share, window) }()
	}
	for range pubs {
		if err := <-errc; err != nil {
			tb.Fatal(err)
		}
	}
}
