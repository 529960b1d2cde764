package main

import (
	"bytes"
	"encoding/binary"
	"math"
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
	// class 1: 3 of 4 predicted are right and 3 of 4 true are found
	if err != nil || !strings.HasPrefix(string(csv), "volume,class,name,dice,precision,recall,") ||
		!strings.Contains(string(csv), "a,1,tissue,0.75,0.75,0.75,4,4,3,") || !strings.Contains(string(csv), "ALL,2,fluid,1,1,1,") {
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

// writeLabels writes labels as a NIfTI of datatype dt (int16 or float32), with the affine's
// x offset set to shift.
func writeLabels(t *testing.T, path string, dt nifti.DataType, labels []uint8, shift float64) {
	t.Helper()
	var data []byte
	for _, l := range labels {
		if dt == nifti.Int16 {
			data = binary.LittleEndian.AppendUint16(data, uint16(l))
		} else {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(l)))
		}
	}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: dt, BitPix: int16(8 * len(data) / len(labels)),
		Dim: [8]int64{3, int64(len(labels)), 1, 1, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1",
		SformCode: 1, SrowX: [4]float64{1, 0, 0, shift}, SrowY: [4]float64{0, 1, 0, 0}, SrowZ: [4]float64{0, 0, 1, 0}}
	if err := nifti.Write(path, h, data, nifti.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestEvalTypesAndAffines: int16 and float32 label files are compared like uint8 ones; a
// different affine is an error, or a warning with --allow-affine-mismatch; a non-integer label
// is refused.
func TestEvalTypesAndAffines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pred, truth := filepath.Join(dir, "p.nii"), filepath.Join(dir, "t.nii")
	writeLabels(t, truth, nifti.Int16, []uint8{0, 1, 1, 2}, 0)
	writeLabels(t, pred, nifti.Float32, []uint8{0, 1, 1, 2}, 0)
	if code, stdout, stderr := cliRun(t, "eval", "--min-mean-dice", "1", "--classes", "3", pred, truth); code != 0 {
		t.Fatalf("int16 vs float32: exit %d\n%s%s", code, stdout, stderr)
	}
	writeLabels(t, pred, nifti.Float32, []uint8{0, 1, 1, 2}, 0.5)
	if code, _, stderr := cliRun(t, "eval", "--classes", "3", pred, truth); code != exitFailed || !strings.Contains(stderr, "affine differs") {
		t.Errorf("shifted affine: exit %d, %q", code, stderr)
	}
	if code, _, stderr := cliRun(t, "eval", "--allow-affine-mismatch", "--classes", "3", pred, truth); code != 0 || !strings.Contains(stderr, "warning:") {
		t.Errorf("--allow-affine-mismatch: exit %d, %q", code, stderr)
	}
	h := &nifti.Header{Version: 1, ByteOrder: binary.LittleEndian, Datatype: nifti.Float32, BitPix: 32,
		Dim: [8]int64{3, 1, 1, 1, 1, 1, 1, 1}, PixDim: [8]float64{1, 1, 1, 1}, SclSlope: 1, Magic: "n+1"}
	nifti.Write(pred, h, binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5)), nifti.WriteOptions{})
	writeLabels(t, truth, nifti.Int16, []uint8{1}, 0)
	if code, _, stderr := cliRun(t, "eval", pred, truth); code != exitFailed || !strings.Contains(stderr, "want an integer label") {
		t.Errorf("label 1.5: exit %d, %q", code, stderr)
	}
}
