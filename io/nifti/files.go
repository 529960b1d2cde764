package nifti

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"voxpipe/internal/regular"
)

// Files returns the files that hold the volume at path, as Open would read them: path itself,
// or for either half of a .hdr/.img pair (each possibly gzipped) the header file, then the
// image file. It only looks the files up (os.Stat); a missing partner is an error wrapping
// os.ErrNotExist.
func Files(path string) ([]string, error) {
	names := namesOf(path)
	groups := [][]string{names.headers}
	if names.pair {
		groups = append(groups, names.images)
	}
	var files []string
	for _, candidates := range groups {
		found := ""
		for _, name := range candidates {
			if _, err := os.Stat(name); err == nil {
				found = name
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("nifti: %s: none of %v exists: %w", path, candidates, os.ErrNotExist)
		}
		files = append(files, found)
	}
	return files, nil
}

// CheckComplete checks, cheaply and without reading any voxel, that the file at path (whose
// header is h, from ReadHeader) holds as much data as its header declares: an uncompressed
// data file is long enough; a gzipped one's trailer (ISIZE, the uncompressed size mod 2^32)
// is the size the header implies. Errors wrap ErrTruncated or ErrCorrupt.
func CheckComplete(path string, h *Header) error {
	lay, err := LayoutOf(h)
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	files, err := Files(path)
	if err != nil {
		return err
	}
	data := files[len(files)-1]
	end := lay.End()
	f, st, err := regular.Open(data)
	if err != nil {
		return err
	}
	defer f.Close()
	if !Gzipped(data) {
		if st.Size() < end {
			return fmt.Errorf("check %s: %w: %d bytes, the header declares %d", data, ErrTruncated, st.Size(), end)
		}
		return nil
	}
	var trailer [4]byte
	if st.Size() < 18 {
		return fmt.Errorf("check %s: %w: %d bytes is no gzip file", data, ErrTruncated, st.Size())
	}
	if _, err := f.ReadAt(trailer[:], st.Size()-4); err != nil {
		return fmt.Errorf("check %s: %w", data, err)
	}
	if isize := binary.LittleEndian.Uint32(trailer[:]); isize != uint32(end) {
		return fmt.Errorf("check %s: %w: the gzip trailer gives %d bytes (mod 2^32), the header declares %d", data, ErrCorrupt, isize, end)
	}
	return nil
}

// Gzipped reports whether path names a gzipped file (.gz, any case).
func Gzipped(path string) bool {
	return len(path) > 3 && strings.EqualFold(path[len(path)-3:], ".gz")
}
