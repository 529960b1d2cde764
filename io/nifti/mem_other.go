//go:build !unix

package nifti

func mapFile(f dataFile, size int64) ([]byte, func() error, error) { return readFileAt(f, size) }

func allocAnon(n int) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}
