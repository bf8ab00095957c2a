package mqtt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

// Format is the payload format of a topic filter.
type Format uint8

const (
	FormatLineProtocol Format = iota // InfluxDB line protocol, "lp"
	FormatJSON                       // JSON with a JSONMapping, "json"
	FormatSparkplugB                 // Eclipse Sparkplug B, "sparkplugb"
)

// ParseFormat returns the format named s: "lp" (or "line", "influx"),
// "json", or "sparkplugb" (or "sparkplug", "spb").
func ParseFormat(s string) (Format, error) {
	switch s {
	case "lp", "line", "influx", "lineprotocol":
		return FormatLineProtocol, nil
	case "json":
		return FormatJSON, nil
	case "sparkplugb", "sparkplug", "spb", "spBv1.0":
		return FormatSparkplugB, nil
	}
	return 0, fmt.Errorf("mqtt: unknown format %q (want lp, json or sparkplugb)", s)
}

func (f Format) String() string {
	switch f {
	case FormatLineProtocol:
		return "lp"
	case FormatJSON:
		return "json"
	case FormatSparkplugB:
		return "sparkplugb"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ErrPayload is wrapped by the errors of payloads that do not parse.
var ErrPayload = errors.New("mqtt: bad payload")

// decoder turns one message into points appended to dst. It returns the
// points it could decode even with an error (a partly bad message). It is
// called from the writer goroutine only.
type decoder interface {
	decode(topic string, payload []byte, recv time.Time, dst []engine.Point) ([]engine.Point, error)
}

// lpDecoder decodes line protocol with the lineproto package, so that MQTT
// and HTTP accept exactly the same lines.
type lpDecoder struct {
	precision lineproto.Precision
	c         collector
}

// collector is a lineproto.DB that keeps copies of the points.
type collector struct{ points []engine.Point }

func (c *collector) Write(points []engine.Point) error {
	for _, p := range points {
		p.Tags = append([]engine.Tag(nil), p.Tags...)
		p.Fields = append([]engine.Field(nil), p.Fields...)
		c.points = append(c.points, p)
	}
	return nil
}

func (d *lpDecoder) decode(_ string, payload []byte, recv time.Time, dst []engine.Point) ([]engine.Point, error) {
	d.c.points = dst
	// A buffer is read in place, without the reading goroutine a reader gets.
	res, err := lineproto.Write(context.Background(), &d.c, bytes.NewBuffer(payload), lineproto.Options{
		Precision: d.precision,
		Now:       func() time.Time { return recv },
	})
	dst, d.c.points = d.c.points, nil
	if err != nil {
		return dst, fmt.Errorf("%w: %w", ErrPayload, err)
	}
	if res.RejectedCount > 0 {
		return dst, fmt.Errorf("%w: %d of %d lines rejected, first: %w", ErrPayload, res.RejectedCount, res.Lines, res.Rejected[0])
	}
	return dst, nil
}
