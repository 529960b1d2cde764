//go:build race

package inflate

// raceSlowdown scales the tests' time limits: the race detector slows decoding ~20 times.
const raceSlowdown = 20
