package dicom

import "fmt"

// Tag is a data element tag, group in the high 16 bits.
type Tag uint32

func (t Tag) Group() uint16   { return uint16(t >> 16) }
func (t Tag) Element() uint16 { return uint16(t) }
func (t Tag) String() string  { return fmt.Sprintf("(%04X,%04X)", t.Group(), t.Element()) }

// The attributes this package reads (PS3.6). Everything else is skipped by its length.
const (
	tagMediaStorageSOPClass Tag = 0x00020002
	tagTransferSyntax       Tag = 0x00020010

	tagCharacterSet      Tag = 0x00080005
	tagImageType         Tag = 0x00080008
	tagSOPClassUID       Tag = 0x00080016
	tagSOPInstanceUID    Tag = 0x00080018
	tagStudyDate         Tag = 0x00080020
	tagStudyTime         Tag = 0x00080030
	tagAccessionNumber   Tag = 0x00080050
	tagModality          Tag = 0x00080060
	tagReferringName     Tag = 0x00080090
	tagStudyDescription  Tag = 0x00081030
	tagSeriesDescription Tag = 0x0008103E
	tagPatientName       Tag = 0x00100010
	tagPatientID         Tag = 0x00100020
	tagPatientBirthDate  Tag = 0x00100030
	tagPatientSex        Tag = 0x00100040

	tagSliceThickness        Tag = 0x00180050
	tagEchoTime              Tag = 0x00180081
	tagEchoNumbers           Tag = 0x00180086
	tagSpacingBetweenSlices  Tag = 0x00180088
	tagProtocolName          Tag = 0x00181030
	tagGantryTilt            Tag = 0x00181120
	tagMREchoSequence        Tag = 0x00189114
	tagEffectiveEchoTime     Tag = 0x00189082
	tagStudyInstanceUID      Tag = 0x0020000D
	tagSeriesInstanceUID     Tag = 0x0020000E
	tagStudyID               Tag = 0x00200010
	tagSeriesNumber          Tag = 0x00200011
	tagInstanceNumber        Tag = 0x00200013
	tagImagePosition         Tag = 0x00200032
	tagImageOrientation      Tag = 0x00200037
	tagFrameOfReferenceUID   Tag = 0x00200052
	tagFrameContentSequence  Tag = 0x00209111
	tagPlanePositionSequence Tag = 0x00209113
	tagPlaneOrientationSeq   Tag = 0x00209116
	tagInStackPosition       Tag = 0x00209057

	tagSamplesPerPixel      Tag = 0x00280002
	tagPhotometric          Tag = 0x00280004
	tagNumberOfFrames       Tag = 0x00280008
	tagRows                 Tag = 0x00280010
	tagColumns              Tag = 0x00280011
	tagPixelSpacing         Tag = 0x00280030
	tagBitsAllocated        Tag = 0x00280100
	tagBitsStored           Tag = 0x00280101
	tagHighBit              Tag = 0x00280102
	tagPixelRepresentation  Tag = 0x00280103
	tagRescaleIntercept     Tag = 0x00281052
	tagRescaleSlope         Tag = 0x00281053
	tagPixelMeasuresSeq     Tag = 0x00289110
	tagPixelValueTransform  Tag = 0x00289145
	tagSharedFunctionalSeq  Tag = 0x52009229
	tagPerFrameFunctionalSq Tag = 0x52009230
	tagExtendedOffsets      Tag = 0x7FE00001
	tagPixelData            Tag = 0x7FE00010

	tagItem          Tag = 0xFFFEE000
	tagItemDelim     Tag = 0xFFFEE00D
	tagSequenceDelim Tag = 0xFFFEE0DD
)

// keptVR is the value representation of every attribute the parser keeps: it decodes their
// values in implicit VR files (which do not carry the VR) and tells which are sequences to
// descend into. Other elements are skipped, their VR not needed.
var keptVR = map[Tag]string{
	tagMediaStorageSOPClass: "UI", tagTransferSyntax: "UI",
	tagImageType: "CS", tagSOPClassUID: "UI", tagSOPInstanceUID: "UI", tagStudyDate: "DA", tagModality: "CS",
	tagSeriesDescription: "LO", tagPatientID: "LO",
	tagCharacterSet: "CS", tagStudyTime: "TM", tagAccessionNumber: "SH", tagReferringName: "PN",
	tagStudyDescription: "LO", tagPatientName: "PN", tagPatientBirthDate: "DA", tagPatientSex: "CS",
	tagStudyID: "SH", tagFrameOfReferenceUID: "UI",
	tagSliceThickness: "DS", tagEchoTime: "DS", tagEchoNumbers: "IS", tagSpacingBetweenSlices: "DS",
	tagProtocolName: "LO", tagGantryTilt: "DS", tagMREchoSequence: "SQ", tagEffectiveEchoTime: "FD",
	tagStudyInstanceUID: "UI", tagSeriesInstanceUID: "UI", tagSeriesNumber: "IS",
	tagInstanceNumber: "IS", tagImagePosition: "DS", tagImageOrientation: "DS",
	tagFrameContentSequence: "SQ", tagPlanePositionSequence: "SQ", tagPlaneOrientationSeq: "SQ",
	tagInStackPosition: "UL",
	tagSamplesPerPixel: "US", tagPhotometric: "CS", tagNumberOfFrames: "IS", tagRows: "US",
	tagColumns: "US", tagPixelSpacing: "DS", tagBitsAllocated: "US", tagBitsStored: "US",
	tagHighBit: "US", tagPixelRepresentation: "US", tagRescaleIntercept: "DS", tagRescaleSlope: "DS",
	tagPixelMeasuresSeq: "SQ", tagPixelValueTransform: "SQ", tagSharedFunctionalSeq: "SQ",
	tagPerFrameFunctionalSq: "SQ", tagExtendedOffsets: "OV",
}

// longLengthVR are the explicit VRs with two reserved bytes and a 32-bit length (PS3.5 7.1.2).
func longLengthVR(vr string) bool {
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		return true
	}
	return false
}

// TransferSyntax is a transfer syntax UID (PS3.5 section 10 and annex A).
type TransferSyntax string

// The transfer syntaxes this package decodes.
const (
	ImplicitVRLittleEndian TransferSyntax = "1.2.840.10008.1.2"
	ExplicitVRLittleEndian TransferSyntax = "1.2.840.10008.1.2.1"
	DeflatedExplicitVRLE   TransferSyntax = "1.2.840.10008.1.2.1.99"
	ExplicitVRBigEndian    TransferSyntax = "1.2.840.10008.1.2.2"
	RLELossless            TransferSyntax = "1.2.840.10008.1.2.5"
	// EncapsulatedUncompressed holds native frames, one per fragment.
	EncapsulatedUncompressed TransferSyntax = "1.2.840.10008.1.2.1.98"
	JPEGBaseline             TransferSyntax = "1.2.840.10008.1.2.4.50"
	JPEGExtended             TransferSyntax = "1.2.840.10008.1.2.4.51"
	JPEGLossless             TransferSyntax = "1.2.840.10008.1.2.4.57"
	JPEGLosslessSV1          TransferSyntax = "1.2.840.10008.1.2.4.70"
	JPEGLSLossless           TransferSyntax = "1.2.840.10008.1.2.4.80"
	JPEGLSNearLossless       TransferSyntax = "1.2.840.10008.1.2.4.81"
)

// syntaxNames names the transfer syntaxes (PS3.6 annex A), for errors about the ones not
// decoded.
var syntaxNames = map[TransferSyntax]string{
	ImplicitVRLittleEndian:    "Implicit VR Little Endian",
	ExplicitVRLittleEndian:    "Explicit VR Little Endian",
	DeflatedExplicitVRLE:      "Deflated Explicit VR Little Endian",
	ExplicitVRBigEndian:       "Explicit VR Big Endian",
	RLELossless:               "RLE Lossless",
	"1.2.840.10008.1.2.1.98":  "Encapsulated Uncompressed Explicit VR Little Endian",
	"1.2.840.10008.1.2.4.50":  "JPEG Baseline (Process 1)",
	"1.2.840.10008.1.2.4.51":  "JPEG Extended (Process 2 & 4)",
	"1.2.840.10008.1.2.4.57":  "JPEG Lossless, Non-Hierarchical (Process 14)",
	"1.2.840.10008.1.2.4.70":  "JPEG Lossless, Non-Hierarchical, First-Order Prediction (Process 14, SV1)",
	"1.2.840.10008.1.2.4.80":  "JPEG-LS Lossless Image Compression",
	"1.2.840.10008.1.2.4.81":  "JPEG-LS Lossy (Near-Lossless) Image Compression",
	"1.2.840.10008.1.2.4.90":  "JPEG 2000 Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.91":  "JPEG 2000 Image Compression",
	"1.2.840.10008.1.2.4.92":  "JPEG 2000 Part 2 Multi-component Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.93":  "JPEG 2000 Part 2 Multi-component Image Compression",
	"1.2.840.10008.1.2.4.94":  "JPIP Referenced",
	"1.2.840.10008.1.2.4.95":  "JPIP Referenced Deflate",
	"1.2.840.10008.1.2.4.100": "MPEG2 Main Profile / Main Level",
	"1.2.840.10008.1.2.4.101": "MPEG2 Main Profile / High Level",
	"1.2.840.10008.1.2.4.102": "MPEG-4 AVC/H.264 High Profile / Level 4.1",
	"1.2.840.10008.1.2.4.103": "MPEG-4 AVC/H.264 BD-compatible High Profile / Level 4.1",
	"1.2.840.10008.1.2.4.104": "MPEG-4 AVC/H.264 High Profile / Level 4.2 For 2D Video",
	"1.2.840.10008.1.2.4.105": "MPEG-4 AVC/H.264 High Profile / Level 4.2 For 3D Video",
	"1.2.840.10008.1.2.4.106": "MPEG-4 AVC/H.264 Stereo High Profile / Level 4.2",
	"1.2.840.10008.1.2.4.107": "HEVC/H.265 Main Profile / Level 5.1",
	"1.2.840.10008.1.2.4.108": "HEVC/H.265 Main 10 Profile / Level 5.1",
	"1.2.840.10008.1.2.4.201": "High-Throughput JPEG 2000 Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.202": "High-Throughput JPEG 2000 with RPCL Options Image Compression (Lossless Only)",
	"1.2.840.10008.1.2.4.203": "High-Throughput JPEG 2000 Image Compression",
}

// String is the syntax's name and UID, "JPEG Baseline (Process 1) (1.2.840.10008.1.2.4.50)".
func (ts TransferSyntax) String() string {
	if n, ok := syntaxNames[ts]; ok {
		return n + " (" + string(ts) + ")"
	}
	return "unknown transfer syntax (" + string(ts) + ")"
}

// Decoded reports whether this package reads the syntax's pixel data.
func (ts TransferSyntax) Decoded() bool {
	switch ts {
	case ImplicitVRLittleEndian, ExplicitVRLittleEndian, DeflatedExplicitVRLE, ExplicitVRBigEndian:
		return true
	}
	_, ok := codecs[ts]
	return ok
}

// segmentationClass is the Segmentation Storage SOP class: a label mask over a series, not an
// image to segment.
const segmentationClass = "1.2.840.10008.5.1.4.1.1.66.4"

// dicomdirClass is the Media Storage Directory SOP class: a DICOMDIR, an index with no image.
const dicomdirClass = "1.2.840.10008.1.3.10"
