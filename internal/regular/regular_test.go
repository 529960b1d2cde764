package regular

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestOpenRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, st, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st.Size() != 5 {
		t.Errorf("size %d", st.Size())
	}
	// The descriptor reads normally: O_NONBLOCK was cleared.
	b := make([]byte, 5)
	if n, err := f.Read(b); n != 5 || err != nil || string(b) != "hello" {
		t.Errorf("read %d %v %q", n, err, b)
	}
	if got, err := ReadFile(p); err != nil || string(got) != "hello" {
		t.Errorf("ReadFile: %q %v", got, err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(p, link)
	if _, _, err := Open(link); err != nil {
		t.Errorf("a link to a regular file: %v", err)
	}
}

// A FIFO (with no writer: a plain open would block forever), a folder, a device and a socket
// are refused at once, naming the path.
func TestOpenRefusesOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	linkToFifo := filepath.Join(dir, "link")
	os.Symlink(fifo, linkToFifo)
	for _, p := range []string{fifo, linkToFifo, dir, "/dev/null", sock} {
		done := make(chan error, 1)
		go func() {
			f, _, err := Open(p)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			var pe *fs.PathError
			if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) || pe.Path != p {
				t.Errorf("Open(%s): %v; want a PathError wrapping ErrNotRegular", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", p)
		}
		if _, err := Check(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Check(%s): %v", p, err)
		}
		if _, err := ReadFile(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s): %v", p, err)
		}
	}
	if _, _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
