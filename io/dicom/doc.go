// Package dicom reads DICOM Part 10 files and assembles them into volumes with the geometry
// dcm2niix gives, so that hospital exports can be segmented without a conversion step.
//
// It is written by hand: no Go DICOM library is available to the project, and what voxpipe
// needs is small: the meta group, five transfer syntaxes (implicit VR little endian, explicit VR
// little and big endian, deflated explicit VR little endian, RLE Lossless), a few dozen
// attributes, and the series geometry. Other encapsulated syntaxes (JPEG, JPEG-LS, JPEG 2000,
// video) are parsed but their pixels refused with ErrUnsupported, naming the syntax.
//
// Parsing (ParseFile, Parse) reads only the bytes it needs through a window over the file, keeps
// the attributes it uses, skips everything else (private tags, undefined-length sequences and
// items) by length or delimiter, and checks every length against the bytes left before reading
// or sizing anything, so a hostile file fails (ErrTruncated, ErrCorrupt, ErrTooLarge) instead of
// allocating what it claims. The pixel data is located, not read.
//
// Group and ScanPaths assemble series as dcm2niix does (see Series.assemble); Series.ReadRaw
// reads the files in parallel straight into the caller's volume, and Series.Header gives the
// NIfTI header. Errors wrap the Err* sentinels.
package dicom
