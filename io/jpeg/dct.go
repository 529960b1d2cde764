package jpeg

import "fmt"

// decodeDCT decodes a sequential DCT scan (placeholder until the DCT path is written).
func (s *scan) decodeDCT(r entropyReader) error {
	return fmt.Errorf("%w: %s not yet", ErrUnsupported, s.hdr.info.Process)
}
