// Package forward delivers what a strata database stores to a central,
// distributed engine over Prometheus remote write or InfluxDB line protocol
// (see DESIGN.md, "Forwarding to a central cluster"). It lives in its own
// module so that the library stays free of its protocol dependencies.
package forward
