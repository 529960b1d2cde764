// Package nifti reads and writes NIfTI-1 and NIfTI-2 volumes (.nii, .nii.gz, .hdr/.img and
// gzipped pairs, either byte order), streaming the voxel data by z-slabs into caller-provided
// buffers.
//
// Reading: Open checks the header (magic, datatype, dims against MaxDim and MaxVoxels,
// vox_offset, the data's size against the file's) before anything is sized by it, then
// Reader.ReadSlicesRaw, ReadSlicesInt16 and ReadSlicesFloat32 decode the next slices straight
// into the caller's memory (pinned host buffers in the GPU pipeline). Compressed files are
// inflated by a read-ahead goroutine, so decoding and the caller's work on slab k overlap with
// inflating slab k+1. Uncompressed data can also be read by z-range from several goroutines at
// once (ReadSlicesRawAt, ReadSlicesInt16At, ReadSlicesFloat32At; ErrNotSeekable for gzip). ReadFloat32 and ReadUint8 read whole volumes. Whatever is wrong with a file
// comes back as an error wrapping one of the Err* sentinels and naming the file.
//
// Writing: Create/Writer and Write write any supported datatype atomically (temporary file in
// the destination folder, fsync, rename, fsync of the folder), gzipped in parallel for .gz paths
// (one standard gzip member whose 1 MiB deflate blocks are compressed and CRC'd by a pool of
// goroutines: blockGzip). MaskHeader derives a uint8 label-mask header that keeps the
// geometry, version and byte order of the image it segments.
//
// Header extensions (Header.Extensions: NIfTI ecode and edata, e.g. ExtCodeComment text) are
// read by Open and ReadHeader from the bytes between the extender and vox_offset, or the rest
// of a pair's .hdr, and written after the header when set, each padded with zeros to a
// multiple of 16 bytes. edata is returned as stored, padding included (Extension.Text trims
// it). Malformed extensions (an esize below 16, not a multiple of 16, or running past the
// area) end the parse without failing the file: those before them are kept, as niftilib does.
// At most 16 MiB of extensions are parsed or written. ReadHeader reads no voxels.
//
// Inspecting broken files: ReadHeaderRaw decodes whatever the header holds (all of it, or the
// fields before the point where a file or gzip stream cut inside the header ends), unchecked,
// and returns it with the error ReadHeader gives the same file; RawHeader.Has tells which
// fields were read. Errors about files that end early count what was actually read, or
// inflated and whether the gzip stream itself ended early ("the gzip stream ends early (the
// 60-byte file is cut short), after 0 inflated bytes; a NIfTI header needs 348 (NIfTI-1) or
// 540 (NIfTI-2)").
package nifti
