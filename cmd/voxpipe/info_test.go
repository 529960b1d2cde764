package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInfo(t *testing.T) {
	app := newApp()
	var stdout, stderr bytes.Buffer
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run([]string{"voxpipe", "info", "../../fixtures/volumes/phantom_000.nii.gz"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NIfTI-1", "96x96x64", "int16", "2.5 x 2.5 x 3", "sform       code 1", "589824 voxels"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("info output lacks %q:\n%s", want, stdout.String())
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.nii")
	os.WriteFile(bad, []byte("not a volume"), 0o644)
	if code := run([]string{"voxpipe", "info", bad}); code != exitFailed {
		t.Errorf("info on a bad file: exit %d, want %d", code, exitFailed)
	}
	if code := run([]string{"voxpipe", "info"}); code != exitUsage {
		t.Errorf("info without a file: exit %d, want %d", code, exitUsage)
	}
}
