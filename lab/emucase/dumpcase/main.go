// Command dumpcase writes a case file for lab/emucase (`scripts/kernels-emu.sh case FILE`): a generated
// phantom, a model (the default trained one, or -random) and the pure-Go CPU engine's mask of
// it, so the fused kernel's emulation can be compared with the float32 reference on realistic
// data without a GPU:
//
//	go run ./lab/emucase/dumpcase -nx 96 -ny 96 -nz 40 -seed 1 -o /tmp/case.bin
//	scripts/kernels-emu.sh case /tmp/case.bin
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"log"
	"os"
	"voxpipe/engine/cpu"
	"voxpipe/engine/engine"

	"voxpipe/fixtures"
	"voxpipe/model"
	"voxpipe/phantom"
)

func main() {
	nx := flag.Int("nx", 64, "phantom size in x")
	ny := flag.Int("ny", 64, "phantom size in y")
	nz := flag.Int("nz", 32, "phantom size in z")
	seed := flag.Uint64("seed", 1, "phantom seed")
	random := flag.Bool("random", false, "use model.RandomModel(16, 4, 61) instead of the default model")
	out := flag.String("o", "/tmp/case.bin", "output file")
	flag.Parse()
	m, err := model.ParseModel(fixtures.DefaultModel)
	if err != nil {
		log.Fatalf("dumpcase: default model: %v", err)
	}
	if *random {
		m = model.RandomModel(16, 4, 61)
	}
	ph, err := phantom.Generate(phantom.Params{NX: *nx, NY: *ny, NZ: *nz, Seed: *seed})
	if err != nil {
		log.Fatalf("dumpcase: %v", err)
	}
	var st model.Stats
	st.AddInt16(ph.Image)
	vol := &model.Volume{NX: *nx, NY: *ny, NZ: *nz, I16: ph.Image, Norm: st.Norm(ph.Header.SclSlope, ph.Header.SclInter)}
	mask := make([]uint8, len(ph.Image))
	if err := cpu.New(m, 0).Segment(context.Background(), vol, mask, engine.Options{Slab: 16}); err != nil {
		log.Fatalf("dumpcase: CPU engine: %v", err)
	}
	f, err := os.Create(*out)
	if err != nil {
		log.Fatalf("dumpcase: %v", err)
	}
	w := func(v any) {
		if err := binary.Write(f, binary.LittleEndian, v); err != nil {
			log.Fatalf("dumpcase: write %s: %v", *out, err)
		}
	}
	w([]int32{int32(*nx), int32(*ny), int32(*nz), int32(m.Channels), int32(m.Classes)})
	w([]float32{vol.Norm.Scale, vol.Norm.Shift})
	for _, t := range [][]float32{m.C1W, m.C1B, m.C2W, m.C2B, m.CGW, m.CGB, m.WXW, m.WXB, m.WGW, m.WGB, m.PsiW, m.PsiB, m.HeadW, m.HeadB} {
		w(t)
	}
	w(ph.Image)
	w(mask)
	w(ph.Truth)
	if err := f.Close(); err != nil {
		log.Fatalf("dumpcase: close %s: %v", *out, err)
	}
	log.Printf("C=%d K=%d %dx%dx%d written to %s", m.Channels, m.Classes, *nx, *ny, *nz, *out)
}
