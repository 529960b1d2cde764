package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"
)

// transcode IN OUT TOOL [ARG...]: runs TOOL ARG... IN/FILE OUT/FILE for every file of the
// folder IN (a DICOM encoder or decoder: dcmcjpeg, dcmcjpls, gdcmconv), each under the
// script's deadline. A script checks that the tool is installed first ([exec:TOOL]).
func cmdTranscode(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "transcode")
	if len(args) < 3 {
		ts.Fatalf("usage: transcode in out tool [arg...]")
	}
	in, out := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(out, 0o777))
	entries, err := os.ReadDir(in)
	ts.Check(err)
	ctx, cancel := context.WithDeadline(context.Background(), scriptDeadline(ts))
	defer cancel()
	for _, e := range entries {
		argv := append(args[3:len(args):len(args)], filepath.Join(in, e.Name()), filepath.Join(out, e.Name()))
		if b, err := exec.CommandContext(ctx, args[2], argv...).CombinedOutput(); err != nil {
			ts.Fatalf("%s %v: %v\n%s", args[2], argv, err, b)
		}
	}
}
