// Package atomicfile replaces a file whole: readers see the old file or the new one, never a
// mix or a part.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write has write fill a temporary file beside path (".<name>.tmp-*"), syncs it, makes it 0644
// and renames it over path. On any failure the temporary file is removed and path is left as it
// was. The folder must exist.
func Write(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteBytes is Write of data.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
