package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"voxpipe/io/nifti"
)

func writeMask(t *testing.T, path string, labels []uint8) {
	t.Helper()
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Uint8, BitPix: 8,
		Dim: [8]int64{3, int64(len(labels)), 1, 1, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1}
	if err := nifti.Write(path, h, labels, nifti.DefaultWriteOptions()); err != nil {
		t.Fatal(err)
	}
}

func TestEval(t *testing.T) {
	dir := t.TempDir()
	pred, truth := filepath.Join(dir, "pred"), filepath.Join(dir, "truth")
	os.MkdirAll(pred, 0o755)
	os.MkdirAll(truth, 0o755)
	// class 1: pred 4 voxels, truth 4, 3 shared -> Dice 0.75; class 2: pred 2, truth 2, 2 shared -> 1
	writeMask(t, filepath.Join(truth, "a.nii.gz"), []uint8{0, 1, 1, 1, 1, 2, 2, 0})
	writeMask(t, filepath.Join(pred, "a_mask.nii.gz"), []uint8{1, 1, 1, 1, 0, 2, 2, 0})
	app := newApp()
	var stdout bytes.Buffer
	app.Writer = &stdout
	if err := app.Run([]string{"voxpipe", "eval", "--classes", "3", pred, truth}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "mean Dice (classes 1..2): 0.8750") {
		t.Errorf("output:\n%s", stdout.String())
	}
	csv, err := os.ReadFile(filepath.Join(pred, "eval.csv"))
	if err != nil || !strings.Contains(string(csv), "a,1,0.75,") || !strings.Contains(string(csv), "ALL,2,1,") {
		t.Errorf("eval.csv (%v):\n%s", err, csv)
	}
	if code := run([]string{"voxpipe", "eval", "--classes", "3", "--min-mean-dice", "0.9", pred, truth}); code != exitFailed {
		t.Errorf("gate below the mean Dice: exit %d, want %d", code, exitFailed)
	}
	writeMask(t, filepath.Join(truth, "b.nii.gz"), []uint8{0})
	if code := run([]string{"voxpipe", "eval", pred, truth}); code != exitUsage {
		t.Errorf("truth without prediction: exit %d, want %d", code, exitUsage)
	}
}
