//go:build !race

package server

// raceEnabled is true when the race detector is on: tests shrink their
// workloads (never their checks) to stay within the package's time budget.
const raceEnabled = false
