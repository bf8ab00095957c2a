//go:build !race

package engine

// raceEnabled is true when the race detector is on: tests shrink their
// workloads to stay within the package's time budget.
const raceEnabled = false
