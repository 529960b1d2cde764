package main

// Script commands that make and rewrite files: mkfifo, truncate, nii.

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"voxpipe/io/nifti"

	"github.com/rogpeppe/go-internal/testscript"
)

// mkfifo PATH: makes a named pipe.
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "mkfifo")
	if len(args) != 1 {
		ts.Fatalf("usage: mkfifo path")
	}
	ts.Check(syscall.Mkfifo(ts.MkAbs(args[0]), 0o644))
}

// truncate FILE BYTES: cuts FILE to BYTES bytes (negative: that many bytes fewer).
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "truncate")
	if len(args) != 2 {
		ts.Fatalf("usage: truncate file bytes")
	}
	path := ts.MkAbs(args[0])
	n, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	if n < 0 {
		st, err := os.Stat(path)
		ts.Check(err)
		n += st.Size()
	}
	ts.Check(os.Truncate(path, n))
}

// readNifti reads a single-file NIfTI (.nii or .nii.gz): its header and its data bytes as
// stored (host byte order for the files voxpipe writes).
func readNifti(ts *testscript.TestScript, path string) (*nifti.Header, []byte) {
	h, err := nifti.ReadHeader(path)
	ts.Check(err)
	raw, err := os.ReadFile(path)
	ts.Check(err)
	if nifti.Gzipped(path) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		ts.Check(err)
		raw, err = io.ReadAll(zr)
		ts.Check(err)
	}
	if h.VoxOffset > int64(len(raw)) {
		ts.Fatalf("%s: vox_offset %d past the end (%d bytes)", path, h.VoxOffset, len(raw))
	}
	h.Extensions = nil
	return h, raw[h.VoxOffset:]
}

// nii pair IN OUT.hdr | nii stack OUT IN... | nii slope FILE VALUE: see the package comment.
func cmdNii(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "nii")
	if len(args) < 1 {
		ts.Fatalf("usage: nii pair|stack|slope ...")
	}
	opt := nifti.WriteOptions{Level: 1}
	sub, rest := args[0], args[1:]
	if (sub == "pair" || sub == "stack") && len(rest) >= 2 {
		out := rest[0]
		if sub == "pair" {
			out = rest[1]
		}
		ts.Check(os.MkdirAll(filepath.Dir(ts.MkAbs(out)), 0o777))
	}
	switch {
	case sub == "pair" && len(rest) == 2:
		if !strings.HasSuffix(rest[1], ".hdr") {
			ts.Fatalf("nii pair: %s does not end in .hdr", rest[1])
		}
		h, data := readNifti(ts, ts.MkAbs(rest[0]))
		h.Magic = ""
		ts.Check(nifti.Write(ts.MkAbs(rest[1]), h, data, nifti.WriteOptions{Level: nifti.DefaultLevel}))
	case sub == "stack" && len(rest) >= 2:
		var h *nifti.Header
		var all []byte
		for _, in := range rest[1:] {
			hi, data := readNifti(ts, ts.MkAbs(in))
			if h != nil && hi.Dim != h.Dim {
				ts.Fatalf("nii stack: %s has dims %v, not %v", in, hi.Dim[1:4], h.Dim[1:4])
			}
			h = hi
			all = append(all, data...)
		}
		h.Dim[0], h.Dim[4] = 4, int64(len(rest)-1)
		for i := 5; i < 8; i++ {
			h.Dim[i] = 1
		}
		if h.PixDim[4] == 0 {
			h.PixDim[4] = 1
		}
		ts.Check(nifti.Write(ts.MkAbs(rest[0]), h, all, opt))
	case sub == "slope" && len(rest) == 2:
		v, err := strconv.ParseFloat(rest[1], 64)
		ts.Check(err)
		path := ts.MkAbs(rest[0])
		h, data := readNifti(ts, path)
		h.SclSlope = v
		ts.Check(nifti.Write(path, h, data, opt))
		// The writer may normalise a non-finite slope: check that the file holds the value.
		got, err := nifti.ReadHeader(path)
		ts.Check(err)
		if !(got.SclSlope == v || math.IsNaN(v) && math.IsNaN(got.SclSlope)) {
			ts.Fatalf("nii slope: %s holds scl_slope %v, not %v", rest[0], got.SclSlope, v)
		}
	default:
		ts.Fatalf("usage: nii pair IN OUT.hdr | nii stack OUT IN... | nii slope FILE VALUE")
	}
}
