// Package fullfs gives tests a real file system with no space left: a small tmpfs mounted on a
// temporary folder and filled, so that creating a file works and writing to it fails with
// ENOSPC, as on a full disk. Mounting needs CAP_SYS_ADMIN (root in CI); where it is refused
// the test is skipped, unless VOXPIPE_REQUIRE_MOUNT=1 (set by .ci/run) makes that a failure.
package fullfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// New mounts a filled tmpfs and returns its root; it is unmounted when the test ends.
func New(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64k,mode=0755"); err != nil {
		if os.Getenv("VOXPIPE_REQUIRE_MOUNT") == "1" {
			t.Fatalf("mount a tmpfs for a full disk: %v", err)
		}
		t.Skipf("cannot mount a tmpfs for a full disk (%v); set VOXPIPE_REQUIRE_MOUNT=1 to fail instead", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	f, err := os.Create(filepath.Join(dir, ".filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xff}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Fill the last partial page too.
	for {
		if _, err := f.Write(chunk[:1]); err != nil {
			break
		}
	}
	return dir
}
