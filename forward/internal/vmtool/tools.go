//go:build tools

// Package vmtool pins the VictoriaMetrics single-node release that the
// forward integration test builds and runs (go build -C here, GOWORK=off).
// It is a module of its own so that VictoriaMetrics never enters the
// forward module's dependencies.
package vmtool

import _ "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics"
