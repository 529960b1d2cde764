// Package dicomweb is the client voxpipe's PACS loop speaks to a PACS with: DICOMweb (DICOM
// PS3.18) QIDO-RS to search series, WADO-RS to retrieve a series streamed part by part into
// files, and STOW-RS to store results (a DICOM SEG) back, checking the answer's list of failed
// instances.
//
// It is written on the standard library (net/http, mime/multipart, encoding/json, crypto/tls)
// because no served Go module fits: the project's list of Go modules known to be served names no
// DICOMweb client (the DICOMweb clients listed are Python packages). The three transactions are
// plain HTTP with DICOM JSON and multipart/related bodies, a few hundred lines here.
//
// Policy, the same for every request:
//   - Timeout (default 30 s) bounds each stall, not the whole transfer: from sending the request
//     until the response headers, and any pause while a body flows in either direction. A large
//     series may take minutes to stream; a server that stops sending fails within Timeout.
//   - Retries (default 4 further attempts) on 5xx, 429, connection errors, timeouts and answers
//     that break off midway; never on other 4xx, on an untrusted certificate, on an answer that
//     does not parse, nor on a local file error. The wait is
//     exponential backoff with full jitter (a random wait up to Backoff·2^(n-1), capped at 30 s),
//     or what the server's Retry-After asks (seconds or an HTTP date, capped at 5 min).
//   - A retrieve that breaks is retried whole; the files of the failed attempt are removed, so
//     a call leaves either every instance of the series or none of them.
//   - Errors wrap sentinels for errors.Is (ErrUnauthorized, ErrNotFound, ErrUnreachable,
//     ErrMalformed, ErrStoreFailed) and carry a *StatusError when the server answered an error
//     status. Passwords and tokens never reach an error, a log or Observe; New refuses URLs with
//     userinfo or a query, so no URL in a message carries a secret.
package dicomweb
