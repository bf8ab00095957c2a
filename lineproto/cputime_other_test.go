//go:build !unix

package lineproto_test

import "time"

// cpuTime is not measured here; the benchmarks then omit lines/cpu-s.
func cpuTime() time.Duration { return 0 }
