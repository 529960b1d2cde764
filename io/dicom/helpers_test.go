package dicom

import "voxpipe/internal/dicomtest"

// sliceSpec describes one synthetic image file, written by dicomtest (image says how).
type sliceSpec struct {
	syntax          TransferSyntax
	declare         TransferSyntax // the syntax the meta group names, when not syntax
	uid             string
	sop             string // SOPInstanceUID, written when set
	instance        int
	pos             [3]float64
	orient          [6]float64
	rows, cols      int
	bitsStored      int
	signed          bool
	slope, inter    float64
	pixels          []uint16 // rows*cols host values
	privateJunk     bool     // a private undefined-length sequence and a private blob first
	echo            int
	numberOfFrames  int
	framePositions  [][3]float64 // enhanced multi-frame: per-frame positions
	pixelsAllFrames []uint16
}

// image is the spec as dicomtest writes it: the attributes this package's tests do not vary
// are fixed (study date, description, patient, thickness, study UID, series number, spacing).
func (sp sliceSpec) image() dicomtest.Image {
	pixels := sp.pixels
	if sp.framePositions != nil {
		pixels = sp.pixelsAllFrames
	}
	values := make([]uint32, len(pixels))
	for i, v := range pixels {
		values[i] = uint32(v)
	}
	return dicomtest.Image{
		Syntax: string(sp.syntax), Declare: string(sp.declare), PrivateJunk: sp.privateJunk,
		IDs: dicomtest.IDs{
			StudyUID: "1.2.3", SeriesUID: sp.uid, SOPUID: sp.sop, Number: 7, Instance: sp.instance,
			StudyDate: "20240102", Description: "T1 / axial", PatientID: "PID 42", Echo: sp.echo,
		},
		Geometry: dicomtest.Geometry{
			Rows: sp.rows, Columns: sp.cols, Position: sp.pos, Orientation: sp.orient, Spacing: [2]float64{0.5, 0.75},
			Thickness: 2, Frames: sp.numberOfFrames, FramePositions: sp.framePositions,
		},
		Pixels: dicomtest.Pixels{
			BitsStored: sp.bitsStored, Signed: sp.signed, Slope: sp.slope, Intercept: sp.inter, Values: values,
		},
	}
}

// file encodes the spec as a Part 10 file.
func (sp sliceSpec) file() []byte { return sp.image().File() }

// dataset encodes the spec's data set (explicit VR little endian for the deflated syntax, not
// deflated).
func (sp sliceSpec) dataset() []byte { return sp.image().Dataset() }
