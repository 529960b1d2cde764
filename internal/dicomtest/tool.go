package dicomtest

import (
	"os"
	"path/filepath"
	"testing"

	"voxpipe/internal/testexec"
)

// Transcode writes file, runs the DICOM tool on it (args, then the input and output paths: as
// dcmcjpeg, dcmdjpls and gdcmconv take them) under the test's deadline, and returns the
// output file. A missing tool skips the test (testexec.Tool); a failing one fails it.
func Transcode(t testing.TB, file []byte, tool string, args ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.dcm"), filepath.Join(dir, "out.dcm")
	if err := os.WriteFile(in, file, 0o600); err != nil {
		t.Fatal(err)
	}
	path := testexec.Tool(t, tool, "dcmtk, libgdcm-tools")
	if b, err := testexec.Cmd(t, path, append(args, in, out)...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", tool, args, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
