// Package regular opens input files for reading only when they are regular files. A FIFO,
// character device or socket given as an input (or found where a .img, a DICOM file or a
// mask was expected) must fail at once with a clear error: opening a FIFO for reading
// blocks until a writer appears, and reading a device may never end.
//
// Open opens with O_NONBLOCK, which makes the open of a FIFO return at once, checks the
// descriptor's own file type with fstat (no race with a file swapped between a stat and the
// open), and only then clears O_NONBLOCK again. Written here because os.Open has no such
// mode and no library does this one step.
package regular

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular: the path names something other than a regular file (a FIFO, a device, a
// socket, a folder). The error also names the path and its type.
var ErrNotRegular = errors.New("regular: not a regular file")

// Open opens path for reading if, and only if, it is a regular file (after following
// symbolic links). It never blocks on a FIFO. Errors are *fs.PathError; a file of another
// type wraps ErrNotRegular.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fd, err := openNonblock(path)
	if err != nil {
		// A socket cannot be opened at all (ENXIO): say what it is rather than why not.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			err = typeError(st.Mode())
		}
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: typeError(st.Mode())}
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, st, nil
}

// Check reports whether path is a regular file without opening it (following links): nil,
// an *fs.PathError wrapping ErrNotRegular, or the stat's error.
func Check(path string) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return st, &fs.PathError{Op: "open", Path: path, Err: typeError(st.Mode())}
	}
	return st, nil
}

// ReadFile is os.ReadFile for regular files only.
func ReadFile(path string) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, st.Size()+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// typeError names the kind of file that is not regular.
func typeError(m fs.FileMode) error {
	kind := "special file"
	switch {
	case m.IsDir():
		kind = "folder"
	case m&fs.ModeNamedPipe != 0:
		kind = "FIFO"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	case m&fs.ModeCharDevice != 0:
		kind = "character device"
	case m&fs.ModeDevice != 0:
		kind = "block device"
	}
	return fmt.Errorf("%w (a %s)", ErrNotRegular, kind)
}

func openNonblock(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
