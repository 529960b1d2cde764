package dicom

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"unsafe"

	"voxpipe/internal/regular"
	"voxpipe/io/nifti"
)

// StoredType is the NIfTI datatype ReadRaw fills: the pixels' own integer type, or float32
// (rescaled) when the slices rescale differently.
func (s *Series) StoredType() nifti.DataType {
	if s.ScaleVaries {
		return nifti.Float32
	}
	return map[[2]int]nifti.DataType{
		{8, 0}: nifti.Uint8, {8, 1}: nifti.Int8, {16, 0}: nifti.Uint16, {16, 1}: nifti.Int16,
		{32, 0}: nifti.Uint32, {32, 1}: nifti.Int32,
	}[[2]int{s.BitsAllocated, b2i(s.Signed)}]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Voxels is the number of voxels of the volume.
func (s *Series) Voxels() int64 { return int64(s.Rows) * int64(s.Columns) * int64(len(s.Slices)) }

// ReadRaw reads the volume into dst (Voxels() samples of StoredType, host byte order), x
// fastest, rows bottom-up, slices ascending along the normal: the layout of Affine. Pixel
// values are masked to BitsStored (sign-extended when signed) and, when ScaleVaries, rescaled
// to float32. Files are read on workers goroutines (0: GOMAXPROCS), each frame straight into
// its slice's place in dst (rescaled there, in place): ReadRaw holds no copy of the volume or
// of a file, only, per goroutine, a deflated file's inflate state or an RLE frame's
// compressed bytes. It returns the datatype to store the volume as: StoredType, except that a
// uint16 volume whose values all fit int16 is Int16, as dcm2niix stores it.
func (s *Series) ReadRaw(dst []byte, workers int) (nifti.DataType, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	dt := s.StoredType()
	size := dt.Size()
	plane := s.Rows * s.Columns
	if int64(len(dst)) != s.Voxels()*int64(size) {
		return 0, fmt.Errorf("dicom: ReadRaw: buffer of %d bytes for %d voxels of %d bytes", len(dst), s.Voxels(), size)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	targets := map[*File]map[int]int{} // file -> frame -> z
	var order []*File
	for z, sl := range s.Slices {
		if targets[sl.File] == nil {
			order = append(order, sl.File)
			targets[sl.File] = map[int]int{}
		}
		targets[sl.File][sl.Frame] = z
	}
	units, frames, err := readUnits(order, targets)
	if err != nil {
		return 0, err
	}
	sample := s.BitsAllocated / 8
	bufs := make([][]byte, workers) // each worker's compressed frame
	err = forEach(len(units), workers, func(w, i int) error {
		u := units[i]
		f, ts := u.f, targets[u.f]
		frame := int(f.frameBytes())
		slot := func(z int) []byte { return dst[z*plane*size : (z+1)*plane*size] }
		to := func(fr int) []byte {
			z, ok := ts[fr]
			if !ok || u.frame >= 0 && fr != u.frame {
				return nil // a frame of another unit, or of another series (split by orientation or echo)
			}
			return slot(z)[:frame]
		}
		if err := readFile(f, frames[f], to, &bufs[w]); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		for fr, z := range ts {
			if u.frame >= 0 && fr != u.frame {
				continue
			}
			raw := slot(z)[:frame]
			s.maskBits(raw)
			flipRows(raw, s.Columns*sample, s.Rows)
			if s.ScaleVaries {
				fm := f.Frames[fr]
				toFloat32(unsafe.Slice((*float32)(unsafe.Pointer(&slot(z)[0])), plane), raw, s.BitsAllocated, s.Signed, fm.Slope, fm.Intercept)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if dt == nifti.Uint16 {
		fits := true
		for _, v := range unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), len(dst)/2) {
			if v > 32767 {
				fits = false
				break
			}
		}
		if fits {
			dt = nifti.Int16
		}
	}
	return dt, nil
}

// readUnit is a piece of ReadRaw's work: a file, or one frame of a multi-frame file whose
// frames are compressed (decoded on every core).
type readUnit struct {
	f     *File
	frame int // -1: every frame of f
}

// readUnits splits the files' reading into units, and groups the fragments of the
// multi-frame encapsulated files by frame once for all their units.
func readUnits(order []*File, targets map[*File]map[int]int) ([]readUnit, map[*File][][]fragment, error) {
	var units []readUnit
	frames := map[*File][][]fragment{}
	for _, f := range order {
		if !f.pixels.encapsulated || len(targets[f]) < 2 || f.checkPixels() != nil {
			units = append(units, readUnit{f, -1}) // its error, if any, comes from the read
			continue
		}
		err := withFile(f, func(r io.ReaderAt) (err error) {
			frames[f], err = f.frameFragments(r)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		for fr := range targets[f] {
			units = append(units, readUnit{f, fr})
		}
	}
	return units, frames, nil
}

// readFile reads the frames of f, frame i into to(i) (nil: not wanted); frames are its
// fragments grouped by frame (nil: grouped as it is read), buf the scratch for a compressed
// frame.
func readFile(f *File, frames [][]fragment, to func(frame int) []byte, buf *[]byte) error {
	return withFile(f, func(r io.ReaderAt) error { return f.readFramesWith(r, frames, to, buf) })
}

// withFile calls fn with f's bytes: its own source, or the file opened (regular files only).
func withFile(f *File, fn func(r io.ReaderAt) error) error {
	if f.src != nil {
		return fn(f.src)
	}
	fh, _, err := regular.Open(f.Path)
	if err != nil {
		return err
	}
	defer fh.Close()
	return fn(fh)
}

// DecodeScratch is what ReadRaw on workers goroutines (0: GOMAXPROCS) holds besides the
// volume: at most one compressed frame per goroutine, each at most maxCompressed bytes; 0 for
// series without compressed frames.
func (s *Series) DecodeScratch(workers int) int64 {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var most int64
	for _, sl := range s.Slices {
		most = max(most, sl.File.compressedBound())
	}
	return int64(min(workers, len(s.Slices))) * most
}

// maskBits keeps the BitsStored low bits of each sample (PS3.5 8.1.1), sign-extended when
// signed: the bits above may hold overlays or garbage.
func (s *Series) maskBits(raw []byte) {
	bs, ba := s.BitsStored, s.BitsAllocated
	if bs >= ba || len(raw) == 0 {
		return
	}
	shift := uint(ba - bs)
	switch ba {
	case 8:
		maskWords[uint8, int8](raw, shift, s.Signed)
	case 16:
		maskWords[uint16, int16](unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), len(raw)/2), shift, s.Signed)
	case 32:
		maskWords[uint32, int32](unsafe.Slice((*uint32)(unsafe.Pointer(&raw[0])), len(raw)/4), shift, s.Signed)
	}
}

// maskWords clears the top shift bits of each word, or copies the sign bit into them.
func maskWords[U uint8 | uint16 | uint32, I int8 | int16 | int32](v []U, shift uint, signed bool) {
	keep := ^U(0) >> shift
	for i, x := range v {
		if signed {
			v[i] = U(I(x<<shift) >> shift)
		} else {
			v[i] = x & keep
		}
	}
}

// flipRows reverses the order of the rows (rowBytes each) of a plane, in place.
func flipRows(p []byte, rowBytes, rows int) {
	tmp := make([]byte, rowBytes)
	for a, b := 0, rows-1; a < b; a, b = a+1, b-1 {
		ra, rb := p[a*rowBytes:(a+1)*rowBytes], p[b*rowBytes:(b+1)*rowBytes]
		copy(tmp, ra)
		copy(ra, rb)
		copy(rb, tmp)
	}
}

// toFloat32 rescales host-order integer samples into dst. raw may be the start of dst's own
// bytes: samples are converted from the last, whose float32 lies at or after every sample not
// yet read.
func toFloat32(dst []float32, raw []byte, bits int, signed bool, slope, inter float64) {
	for i := len(dst) - 1; i >= 0; i-- {
		var v float64
		switch {
		case bits == 8 && signed:
			v = float64(int8(raw[i]))
		case bits == 8:
			v = float64(raw[i])
		case bits == 16 && signed:
			v = float64(int16(hostOrder.Uint16(raw[2*i:])))
		case bits == 16:
			v = float64(hostOrder.Uint16(raw[2*i:]))
		case signed:
			v = float64(int32(hostOrder.Uint32(raw[4*i:])))
		default:
			v = float64(hostOrder.Uint32(raw[4*i:]))
		}
		dst[i] = float32(v*slope + inter)
	}
}

// Header is the NIfTI-1 header of the volume stored as dt (ReadRaw's result): dims, the
// dcm2niix affine in sform and qform (code 1, scanner), mm, and the rescale as scl_slope and
// scl_inter unless the values were rescaled already (ScaleVaries).
func (s *Series) Header(dt nifti.DataType) *nifti.Header {
	h := &nifti.Header{
		Version:   1,
		ByteOrder: nativeOrder(),
		Dim:       [8]int64{3, int64(s.Columns), int64(s.Rows), int64(len(s.Slices)), 1, 1, 1, 1},
		Datatype:  dt,
		BitPix:    int16(8 * dt.Size()),
		VoxOffset: 352,
		SclSlope:  s.Slope,
		SclInter:  s.Intercept,
		XYZTUnits: 2 | 8, // mm, s
		Magic:     "n+1",
	}
	if s.ScaleVaries {
		h.SclSlope, h.SclInter = 1, 0
	}
	h.SetAffine(s.Affine, 1)
	// As a NIfTI-1 file stores them (float32): the pipeline then normalises and places a series
	// exactly as it does dcm2niix's file of it.
	for _, v := range []*float64{&h.SclSlope, &h.SclInter, &h.QuaternB, &h.QuaternC, &h.QuaternD, &h.QoffsetX, &h.QoffsetY, &h.QoffsetZ} {
		*v = float64(float32(*v))
	}
	for i := range 4 {
		h.SrowX[i], h.SrowY[i], h.SrowZ[i] = float64(float32(h.SrowX[i])), float64(float32(h.SrowY[i])), float64(float32(h.SrowZ[i]))
		h.PixDim[i] = float64(float32(h.PixDim[i]))
	}
	return h
}

// nativeOrder is this machine's byte order as one of the two values io/nifti compares with.
func nativeOrder() binary.ByteOrder {
	if hostBigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Volume reads the series whole: its NIfTI header and voxels (host byte order).
func (s *Series) Volume(workers int) (*nifti.Header, []byte, error) {
	if s.Err != nil {
		return nil, nil, s.Err
	}
	data := make([]byte, s.Voxels()*int64(s.StoredType().Size()))
	dt, err := s.ReadRaw(data, workers)
	if err != nil {
		return nil, nil, err
	}
	return s.Header(dt), data, nil
}
