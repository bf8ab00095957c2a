// Package mqtt ingests points from an MQTT broker into a strata database.
//
// A Subscriber connects to one broker with a stable client id and a
// persistent session (clean session off), subscribes to one or more topic
// filters at QoS 1, each with its own payload format, and writes what it
// receives through a Writer (an *engine.DB). A message is acknowledged to
// the broker only after the Write that holds its points returned nil, that
// is after they are durable as the database's sync mode defines it: a broker
// restart or a kill -9 of the process loses no publish the broker accepted.
// The broker redelivers what was not acknowledged; a redelivered point is
// the same series and time, so it replaces itself.
//
// # Formats
//
//   - FormatLineProtocol: one or more lines of InfluxDB line protocol per
//     message. A rejected line is counted; the others are stored.
//   - FormatJSON: an object, an array of objects, or an object holding an
//     array of readings, turned into points by a JSONMapping (which members
//     are the measurement, the time and its unit, the tags and the fields;
//     topic levels as tags).
//   - FormatSparkplugB: Eclipse Sparkplug B payloads on spBv1.0 topics.
//     NBIRTH and DBIRTH define metric names and aliases; NDATA and DDATA are
//     decoded by alias; each metric is a point with measurement = the metric
//     name, tags group_id, edge_node_id and device_id, and field "value".
//     Births and deaths are recorded as points of measurement
//     sparkplug_state (field "online"). A data message with an unknown alias
//     is counted and answered with the rebirth request of the specification
//     (an NCMD carrying "Node Control/Rebirth" = true).
//
// A message that does not parse is counted, logged with its topic, and
// acknowledged, so that it is not redelivered forever.
//
// # Delivery
//
// Messages are written in batches (every message waiting, up to
// Options.MaxBatchMessages) and acknowledged in the order they arrived.
// When the database refuses a Write for another reason than a bad point
// (closed, out of space), nothing of the batch is acknowledged and the
// Write is retried with backoff until it succeeds or Run's context ends;
// the broker then redelivers on the next connection.
//
// Brokers limit the QoS 1 messages in flight to a client (Mosquitto's
// max_inflight_messages, default 20) and the messages queued for an offline
// persistent session (max_queued_messages, default 1000, beyond which
// Mosquitto drops them). Raise both for a high rate or a long outage.
package mqtt
