package dicomseg

import (
	"bytes"
	"io"

	"voxpipe/internal/regular"
)

// WrittenHere reports whether the file at path is a DICOM file this package wrote: its meta
// group names this writer's implementation class UID. A file that is missing, not regular,
// or written by anything else (a SEG of another tool, a user's file under that name) is not.
func WrittenHere(path string) bool {
	f, _, err := regular.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512) // preamble, "DICM" and the meta group
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	return n > 132 && string(head[128:132]) == "DICM" && bytes.Contains(head, []byte(implementationUID))
}
