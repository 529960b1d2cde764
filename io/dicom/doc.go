// Package dicom reads DICOM Part 10 files and assembles them into volumes with the geometry
// dcm2niix gives, so that hospital exports can be segmented without a conversion step.
//
// It is written by hand: no Go DICOM library is available to the project, and what voxpipe
// needs is small: the meta group, the native syntaxes (implicit VR little endian, explicit VR
// little and big endian, deflated explicit VR little endian), the encapsulated ones it decodes
// (codec.go: RLE Lossless, encapsulated uncompressed, JPEG lossless, baseline and extended
// through io/jpeg, JPEG-LS through io/jpegls), a few dozen attributes, and the series
// geometry. Other encapsulated syntaxes (JPEG 2000, HTJ2K, video) are parsed but their pixels
// refused with ErrUnsupported, naming the syntax and the way out (Explicit VR Little Endian
// from the PACS, or a transcoder).
//
// Encapsulated frames (encap.go) are found by the Extended Offset Table, the basic offset
// table, one fragment per frame, or the SOI marker that opens each frame's first fragment;
// each frame's fragments are read into one buffer per reading goroutine (at most four times
// the frame's pixel bytes plus 1 MiB: Series.DecodeScratch is what a read holds) and decoded
// straight into the frame's place in the volume. The frames of a multi-frame file are decoded
// in parallel like the files of a series.
//
// Parsing (ParseFile, Parse) reads only the bytes it needs through a window over the file, keeps
// the attributes it uses, skips everything else (private tags, undefined-length sequences and
// items) by length or delimiter, and checks every length against the bytes left before reading
// or sizing anything, so a hostile file fails (ErrTruncated, ErrCorrupt, ErrTooLarge) instead of
// allocating what it claims. The pixel data is located, not read. Files are opened only when
// they are regular files (internal/regular: a FIFO fails at once). A deflated data set is
// parsed as it inflates, the window sliding over the stream: nothing of it is kept but the
// window and the kept attributes, and it may inflate to what its pixel data declares plus
// MaxInflated bytes of other elements, no more (ErrTooLarge, after at most that much
// inflating). It is inflated through to its end at the scan, so a stream that is cut short or
// damaged fails there; reading its pixels inflates it again, each frame straight into its
// place in the caller's buffer, and checks it ends where it did.
//
// Group and ScanPaths assemble series as dcm2niix does (see Series.assemble); Series.ReadRaw
// reads the files in parallel straight into the caller's volume, and Series.Header gives the
// NIfTI header. Errors wrap the Err* sentinels, and errors about files name them.
//
// The rule for files that cannot be read (ScanFiles): a file that is not DICOM (ErrNotDICOM),
// a DICOM file without an image (ErrNoPixels: a DICOMDIR, a report) and a file that is not
// regular are left out, listed in Scan.Skipped with the reason. Every other candidate that
// cannot be read fails a series, never silently: a DICOM file cut short (pixel data shorter
// than the image declares included: the file's size tells at the scan), one that does not
// parse, one that cannot be opened (permission denied, gone). It fails the series of the
// SeriesInstanceUID read before the damage (the UIDs precede the pixel data); when none could
// be read (damage in the meta group, a file that cannot be opened), every series with a file in
// its folder; a file that fails no series is a failed series of its own. The error names the
// file and the reason. Files with one SOPInstanceUID: byte-identical copies are left out
// (Series.Duplicates, for a note), different files fail their series naming both
// (ErrDuplicate). Series-level errors (a gap, spacing that varies, repeated positions, tilt, a
// missing position) name the files involved.
package dicom
