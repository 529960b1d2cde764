//go:build race

package pipeline

// raceEnabled: the race detector slows the CPU engine some tenfold.
const raceEnabled = true
