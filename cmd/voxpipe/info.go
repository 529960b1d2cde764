package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

// infoMaxLabels is the most distinct values an integer volume may hold for info to list each
// voxel count (label maps: voxpipe's uint8 masks, atlases).
const infoMaxLabels = 256

func init() {
	commandMakers = append(commandMakers, func() *cli.Command {
		return &cli.Command{
			Name:      "info",
			Usage:     "print a volume's header, geometry, extensions and value range, also of broken files",
			ArgsUsage: "FILE|DICOMFILE|FOLDER...",
			Description: "For each file, prints every header field it could decode, even when the file fails\n" +
				"validation (unsupported datatype, bad dims or vox_offset, a file or gzip stream cut short):\n" +
				"then the reason goes to stderr and the exit status is 1. A header cut short shows the\n" +
				"fields it holds. An absent qform or sform (code 0) is printed as such. Header extensions are\n" +
				"listed (code, size, text ones' text shortened to one line), and the provenance record of a\n" +
				"voxpipe mask field by field. A 4D file lists its volumes (count, dims 4..7).\n" +
				"Of a valid file it reads one volume, --volume N (0-based, default 0), and prints its value\n" +
				"range (scaled); an integer volume with at most 256 distinct values (a label map) also gets\n" +
				"each value's voxel count and share.\n" +
				"A folder: each NIfTI volume in it (and its sub-folders) as above, then the DICOM series\n" +
				"its other files make, with their geometry (see convert). A DICOM file: its series; a\n" +
				"DICOM SEG: its UIDs, frames, segments (labels, codes, algorithm) and referenced series.\n" +
				"Exit status: 0 all files valid, 1 a file failed validation or could not be read, 2 usage\n" +
				"(no file, a negative --volume, or one past a file's last volume).",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "volume", Usage: "volume of a 4D file whose values are read, 0-based (see the file's volumes line)"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() == 0 {
					return usageError{errors.New("info: give at least one NIfTI file, DICOM file or folder")}
				}
				volume := c.Int("volume")
				if volume < 0 {
					return usageError{fmt.Errorf("info: --volume %d: volumes count from 0", volume)}
				}
				failed, misused := 0, 0
				for _, path := range c.Args().Slice() {
					err := printInfoOrSeries(c.App.Writer, path, volume)
					if err == nil {
						continue
					}
					fmt.Fprintln(c.App.ErrWriter, "voxpipe:", err)
					var ue usageError
					if errors.As(err, &ue) {
						misused++
					} else {
						failed++
					}
				}
				switch {
				case misused > 0:
					return cli.Exit("", exitUsage)
				case failed > 0:
					return cli.Exit("", exitFailed)
				}
				return nil
			},
		}
	})
}

// printInfo prints what info shows of the file at path: its header as far as it decodes, and
// when the file is valid, the value range of the volume asked for. It returns the file's
// validation or read error, or a usageError when the file has no such volume.
func printInfo(w io.Writer, path string, volume int) error {
	raw, rerr := nifti.ReadHeaderRaw(path)
	fmt.Fprintf(w, "%s\n", path)
	if raw == nil {
		return rerr
	}
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", name, fmt.Sprintf(format, args...))
	}
	more := func(format string, args ...any) {
		fmt.Fprintf(w, "  %-11s %s\n", "", fmt.Sprintf(format, args...))
	}
	printInfoFiles(field, path, raw)
	if raw.Version == 0 {
		field("header", "no NIfTI header identified (%d bytes read)", raw.Read)
		return rerr
	}
	size := nifti.HeaderSize(raw.Version)
	if raw.Read < size {
		field("header", "cut short: %d of the %d bytes of a NIfTI-%d header; fields past byte %d are not shown", raw.Read, size, raw.Version, raw.Read)
	}
	h := &raw.Header
	printInfoFields(field, more, raw)
	printInfoExtensions(field, more, h)
	if rerr != nil {
		return rerr
	}

	if n := h.Volumes(); int64(volume) >= n {
		return usageError{fmt.Errorf("info: --volume %d: %s has %d volume(s) (0..%d)", volume, path, n, n-1)}
	}
	return printInfoValues(field, more, path, volume)
}

// printInfoFields prints the header's fields that were read: format, dims, datatype, spacing
// and scaling, then the transforms and the rest (printInfoXforms).
func printInfoFields(field func(string, string, ...any), more func(string, ...any), raw *nifti.RawHeader) {
	has := func(names ...string) bool {
		for _, n := range names {
			if !raw.Has(n) {
				return false
			}
		}
		return true
	}
	h := &raw.Header
	order := "little-endian"
	if h.ByteOrder == binary.BigEndian {
		order = "big-endian"
	}
	magic := "magic not read"
	if has("magic") {
		magic = fmt.Sprintf("magic %q", h.Magic)
	}
	field("format", "NIfTI-%d (%s, %s)", h.Version, order, magic)
	if has("dim") {
		field("dims", "%s", infoDims(h))
		if h.Dim[0] >= 4 && h.Dim[0] <= 7 {
			field("volumes", "%s", infoVolumes(h))
		}
	}
	if has("datatype", "bitpix") {
		note := ""
		if !h.Datatype.Supported() {
			note = ", not supported"
		}
		field("datatype", "%s (code %d, %d bits%s)", h.Datatype, int16(h.Datatype), h.BitPix, note)
	}
	if has("pixdim", "xyzt_units") {
		t := ""
		if h.Dim[0] >= 4 && h.Dim[0] <= 7 {
			t = fmt.Sprintf(", t %g", h.PixDim[4])
		}
		field("pixdim", "%g x %g x %g%s (xyzt_units %d: %s)", h.PixDim[1], h.PixDim[2], h.PixDim[3], t, h.XYZTUnits, infoUnits(h.XYZTUnits))
	}
	if has("scl_slope", "scl_inter") {
		slope, inter := h.EffectiveScaling()
		field("scaling", "slope %g, inter %g (header: %g, %g)", slope, inter, h.SclSlope, h.SclInter)
	}
	printInfoXforms(field, more, raw, has)
}

// printInfoXforms prints the qform and sform, the intent, descrip and vox_offset, as far as
// they were read (has).
func printInfoXforms(field func(string, string, ...any), more func(string, ...any), raw *nifti.RawHeader, has func(...string) bool) {
	h := &raw.Header
	if has("qform_code") {
		switch {
		case h.QformCode == 0:
			field("qform", "no qform (code 0)")
		case has("quatern_b", "quatern_c", "quatern_d", "qoffset_x", "qoffset_y", "qoffset_z", "pixdim"):
			field("qform", "code %s, quatern (%g, %g, %g), offset (%g, %g, %g), qfac %g", infoXform(h.QformCode),
				h.QuaternB, h.QuaternC, h.QuaternD, h.QoffsetX, h.QoffsetY, h.QoffsetZ, h.PixDim[0])
		default:
			field("qform", "code %s", infoXform(h.QformCode))
		}
	}
	if has("sform_code") {
		if h.SformCode == 0 {
			field("sform", "no sform (code 0)")
		} else {
			field("sform", "code %s", infoXform(h.SformCode))
			if has("srow_x", "srow_y", "srow_z") {
				for _, row := range [][4]float64{h.SrowX, h.SrowY, h.SrowZ} {
					more("[% .6g % .6g % .6g % .6g]", row[0], row[1], row[2], row[3])
				}
			}
		}
	}
	if has("intent_code", "intent_name") {
		name := ""
		if h.IntentCode == nifti.IntentLabel {
			name = " (label)"
		}
		field("intent", "code %d%s %q", h.IntentCode, name, h.IntentName)
	}
	if has("descrip") {
		field("descrip", "%q", h.Descrip)
	}
	if has("vox_offset") {
		field("vox_offset", "%s", strconv.FormatFloat(raw.StoredVoxOffset, 'f', -1, 64))
	}
}

// printInfoFiles prints the files of the volume with their sizes.
func printInfoFiles(field func(string, string, ...any), path string, raw *nifti.RawHeader) {
	gz := ""
	if raw.Gzipped {
		gz = ", gzip"
	}
	files, err := nifti.Files(path)
	if err != nil || len(files) < 2 {
		field("file", "%d bytes%s", raw.FileSize, gz)
		return
	}
	var parts []string
	for i, f := range files {
		size := "?"
		if st, err := os.Stat(f); err == nil {
			size = strconv.FormatInt(st.Size(), 10)
		}
		if i == 0 {
			size += " bytes" + gz // only the header's file was sniffed
		} else {
			size += " bytes"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", filepath.Base(f), size))
	}
	field("files", "%s", strings.Join(parts, ", "))
}

// infoDims shows the extents as stored, valid or not.
func infoDims(h *nifti.Header) string {
	d0 := h.Dim[0]
	if d0 < 1 || d0 > 7 {
		return fmt.Sprintf("dim[0] = %d is not 1..7 (dim %v)", d0, h.Dim)
	}
	ext := [3]int64{1, 1, 1}
	for i := int64(1); i <= min(d0, 3); i++ {
		ext[i-1] = h.Dim[i]
	}
	return fmt.Sprintf("%dx%dx%d (dim %v)", ext[0], ext[1], ext[2], h.Dim[:d0+1])
}

// infoVolumes shows the number of volumes of a header with dim[0] in 4..7, and dims 4..dim[0].
func infoVolumes(h *nifti.Header) string {
	d0 := int(h.Dim[0])
	dims := make([]string, 0, 4)
	n, ok := int64(1), true
	for i := 4; i <= d0; i++ {
		d := h.Dim[i]
		dims = append(dims, strconv.FormatInt(d, 10))
		if d < 1 || n > math.MaxInt64/d {
			ok = false
		} else {
			n *= d
		}
	}
	count := "invalid"
	if ok {
		count = strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("%s (dims 4..%d: %s)", count, d0, strings.Join(dims, " x "))
}

// infoXform names a qform or sform code.
func infoXform(code int32) string {
	names := []string{"unknown", "scanner_anat", "aligned_anat", "talairach", "mni_152", "template_other"}
	if code >= 0 && int(code) < len(names) {
		return fmt.Sprintf("%d (%s)", code, names[code])
	}
	return fmt.Sprintf("%d (not a NIfTI code)", code)
}

// infoUnits names the space and time units of xyzt_units.
func infoUnits(u uint8) string {
	space := map[uint8]string{0: "unknown", 1: "m", 2: "mm", 3: "um"}[u&0x07]
	if space == "" {
		space = fmt.Sprintf("space code %d", u&0x07)
	}
	time, ok := map[uint8]string{0: "unknown", 8: "s", 16: "ms", 24: "us", 32: "Hz", 40: "ppm", 48: "rad/s"}[u&0x38]
	if !ok {
		time = fmt.Sprintf("time code %d", u&0x38)
	}
	return space + ", " + time
}

// infoExtensionNames are the registered NIFTI_ECODE_* values info names.
var infoExtensionNames = map[int32]string{
	0: "ignore", 2: "dicom", 4: "afni", 6: "comment", 8: "xcede", 10: "jimdiminfo",
	12: "workflow_fwds", 14: "freesurfer", 16: "pypickle", 18: "mind_ident", 20: "b_value",
	22: "spherical_direction", 24: "dt_component", 26: "shc_degreeorder", 28: "voxbo",
	30: "caret", 32: "cifti", 34: "variable_frame_timing", 38: "eval", 40: "matlab",
	42: "quantiphyse", 44: "mrs",
}

// infoMaxText is how much of a text extension info shows, in characters.
const infoMaxText = 160

// printInfoExtensions lists the header extensions and, for a voxpipe mask, its provenance.
func printInfoExtensions(field func(string, string, ...any), more func(string, ...any), h *nifti.Header) {
	if len(h.Extensions) == 0 {
		return
	}
	field("extensions", "%d", len(h.Extensions))
	for i, e := range h.Extensions {
		name := infoExtensionNames[e.Code]
		if name == "" {
			name = "unregistered"
		}
		head := fmt.Sprintf("#%d code %d (%s), esize %d", i, e.Code, name, 8+len(e.Data))
		if text, ok := infoExtensionText(e); ok {
			more("%s, text: %s", head, text)
		} else {
			more("%s, binary: % x", head, e.Data[:min(len(e.Data), 16)])
		}
	}
	rec, err := provenance.FromHeader(h)
	if err != nil {
		return
	}
	field("provenance", "voxpipe mask, written by voxpipe %s", rec.Version)
	more("model       %s (sha256 %s)", rec.Model.Name, rec.Model.SHA256)
	more("engine      %s, %s", rec.Engine, rec.Precision)
	for _, f := range rec.Input.Files {
		more("input       %s (%d bytes, modified %s)", f.Name, f.Size, f.MTime)
	}
	if rec.Input.Volume != nil {
		more("input vol.  %d (of a 4D input)", *rec.Input.Volume)
	}
	if rec.Input.XXH3 != "" {
		more("input hash  %s (XXH3-128 of 16 MiB pieces)", rec.Input.XXH3)
	}
	if d := rec.Input.DICOM; d != nil {
		more("DICOM       study %s, series %s (part %d)", d.StudyInstanceUID, d.SeriesInstanceUID, d.Part)
	}
}

// infoExtensionText returns a text extension's text on one line, shortened to infoMaxText
// characters; ok is false for binary data (not UTF-8, or control characters other than
// whitespace).
func infoExtensionText(e nifti.Extension) (string, bool) {
	t := e.Text()
	if t == "" || !utf8.ValidString(t) {
		return "", false
	}
	for _, r := range t {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return "", false
		}
	}
	t = strings.Join(strings.Fields(t), " ")
	if n := utf8.RuneCountInString(t); n > infoMaxText {
		cut, runes := 0, 0
		for cut = range t {
			if runes == infoMaxText {
				break
			}
			runes++
		}
		t = fmt.Sprintf("%s... (%d characters)", t[:cut], n)
	}
	return t, true
}
