// Package dicomseg writes and reads DICOM Segmentation objects (SEG, SOP Class
// 1.2.840.10008.5.1.4.1.1.66.4, PS3.3 A.51): a label mask on the grid of a source series,
// stored as a BINARY multi-frame image that every PACS and viewer shows over that series.
//
// Written by hand, in pure Go, as io/dicom is: no Go DICOM library is available to the
// project, and a SEG needs only a small, fixed set of modules. The writer streams: it scans
// the mask once to find the frames to write (one per source slice and segment, those with
// no foreground left out unless asked), then writes the header, the functional groups and
// the pixel data frame by frame, packing bits contiguously across frame boundaries (PS3.5
// 8.1.1). It holds the mask and one frame, never the object.
//
// The mask is in the layout io/dicom gives a series (Series.ReadRaw, Series.Header): x along
// the columns, y along the rows reversed (dcm2niix's flip), z along the series' slices
// (Series.Slices, ascending along the slice normal). Align brings a NIfTI mask in any
// orientation onto that grid, when it lies on it.
//
// The reader (ReadFile, Read) parses a BINARY SEG in explicit or implicit VR little endian with
// a small, bounded element-tree parser of its own: io/dicom keeps only the attributes of
// images, and a SEG's are all in nested sequences. Every length is checked against the bytes
// left before anything is read or sized, so a damaged or hostile file fails with ErrNotSEG.
// SEG.Mask places the frames back on a series' grid, by source instance or position.
package dicomseg
