// Package loop is the hospital loop's bookkeeping around a DICOMweb PACS (pacs/dicomweb):
// which series of a QIDO search are new, their exactly-once claims, their retrieval into the
// work folder, the SEGs stored back, and the ledger that records a series as done only once
// its SEGs are stored. Segmenting the retrieved series is the caller's (cmd/voxpipe runs the
// pipeline over them), so that the loop never imports the pipeline.
//
// The work folder (WORKDIR) holds, besides what `voxpipe run` writes there (masks named by
// the series ID, their SEGs, runs/, volumes.csv):
//
//	pacs/incoming/<key>/   a series' files while it is worked on (removed once done or failed)
//	pacs/done/<key>.json   the ledger: a series whose SEGs the PACS has stored
//	pacs/series/.<key>.claim   the claim of a sync working on it (store/claim)
//	pacs/state.json        when the last search that completed started (for "new since")
//
// <key> is the series' ID (io/dicom.SeriesID of its SeriesInstanceUID, part 0): 12 hex digits
// of a SHA-256, no patient data, the name of its mask too.
//
// Exactly once: a series is claimed before it is retrieved, and the ledger is read again under
// the claim, so of any number of concurrent syncs one works on it and the others see it busy
// or done. A sync that dies leaves a claim that store/claim takes over, no ledger record, and
// whatever it retrieved: the next sync retrieves again and stores the SEG (the PACS replaces
// an instance stored twice: the SEG's UIDs are derived from its content, io/dicomseg).
package loop
