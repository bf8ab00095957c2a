// Package server serves a strata database over HTTP to the clients that
// already speak InfluxDB's write API, Prometheus remote write and the
// Prometheus query API (docs/design.md, "HTTP server"). It lives in its own
// module so that the library stays free of the PromQL engine and metrics.
package server
