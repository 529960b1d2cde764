// Package benchvol gives benchmarks the volume they run on: its size is a default or what an
// environment variable says (VOXPIPE_..._DIMS=512x512x1000 for full-size runs by hand).
package benchvol

import (
	"os"
	"testing"

	"voxpipe/phantom"
)

// Dims are the NXxNYxNZ in the environment variable env, or def when it is unset, and their
// text.
func Dims(tb testing.TB, env, def string) (dims [3]int, text string) {
	tb.Helper()
	text = os.Getenv(env)
	if text == "" {
		text = def
	}
	nx, ny, nz, err := phantom.ParseDims(text)
	if err != nil {
		tb.Fatalf("%s: %v", env, err)
	}
	return [3]int{nx, ny, nz}, text
}

// Phantom generates the phantom (seed 7) of the dims Dims gives.
func Phantom(tb testing.TB, env, def string) (*phantom.Phantom, string) {
	tb.Helper()
	d, text := Dims(tb, env, def)
	ph, err := phantom.Generate(phantom.Params{NX: d[0], NY: d[1], NZ: d[2], Seed: 7})
	if err != nil {
		tb.Fatal(err)
	}
	return ph, text
}
