package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"voxpipe/store/records"
)

// run says once which input files it left out (not volumes, not DICOM images, not regular
// files) and which sub-folders it did not search, and lists the files in the run's
// ignored.csv.
func TestRunListsTheFilesItLeftOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	os.MkdirAll(filepath.Join(in, "sub"), 0o755)
	data, err := os.ReadFile("../../fixtures/volumes/phantom_000.nii.gz")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(in, "a.nii.gz"), data, 0o644)
	os.WriteFile(filepath.Join(in, "sub", "b.nii.gz"), data, 0o644)
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not a volume\n"), 0o644)
	os.WriteFile(filepath.Join(in, ".hidden"), []byte("a temporary\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(in, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "run", "--engine", "cpu", "--run-id", "r", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"left out input files that are not volumes", "count=2", "notes.txt", "left out sub-folders", filepath.Join(in, "sub")} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("stderr has %q %d times, want once:\n%s", want, strings.Count(stderr, want), stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "runs", "r", records.IgnoredName))
	if err != nil {
		t.Fatal(err)
	}
	want := "run_id,path,reason\n" +
		"r," + filepath.Join(in, "notes.txt") + ",not a NIfTI volume or a DICOM file\n" +
		"r," + filepath.Join(in, "pipe") + ",not a regular file\n"
	if string(b) != want {
		t.Errorf("ignored.csv:\n%s\nwant\n%s", b, want)
	}
}
