//go:build !unix

package nifti

func allocAnon(n int) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}
