// Package orthanctest starts a real Orthanc PACS with its DICOMweb plugin for a test: Debian's
// orthanc and orthanc-dicomweb, run as a plain process on free loopback ports, with its own
// configuration, storage and log in the test's temporary folder, and stopped when the test
// ends. It is for tests only: of the DICOMweb client, of `voxpipe pacs sync` and `pacs watch`.
//
// Why a real Orthanc rather than a fake server: what a PACS loop must survive is what real
// servers do, and a fake only does what its author expected. Orthanc's QIDO-RS answers, its
// multipart WADO-RS, its STOW-RS failure lists, its /changes feed and its StableSeries timing
// are checked here as Debian's Orthanc 1.10.1 and its plugin 1.7 have them (the recipe this
// follows is the project's shared notes on PACS for tests, pacs.md, and
// scripts/seg-pacs-test.sh does the same in shell). Small fake servers remain the right tool
// for what Orthanc will not do on demand: a slow answer, a malformed multipart body.
//
// Start skips the test where Orthanc or the plugin is not installed, and fails it instead where
// VOXPIPE_REQUIRE_TOOLS=1 (CI), as internal/testexec does for any tool. What it handles so that
// tests need not:
//   - Ports: two free loopback ports are picked (bind 127.0.0.1:0, read, close); another process
//     may take one before Orthanc binds it, which makes Orthanc exit at once with "already in
//     use" in its log: Start then tries again on other ports. Several Orthancs may run at once.
//   - Readiness: Orthanc answers GET /system 0.3-1 s after it starts; Start waits for that, and
//     fails the test with the tail of Orthanc's log if the process ends first or 30 s pass.
//   - Shutdown: Orthanc takes 2-6 s to exit on SIGTERM. Stop sends it to the process group
//     (Orthanc runs in its own), waits, sends SIGKILL after 15 s, and checks that nothing of the
//     group is left. A t.Cleanup does the same for a server the test did not stop, so no Orthanc
//     outlives its test; the test's deadline (internal/testexec) kills it as a last resort.
//   - Loopback only: Orthanc listens on every interface but, with RemoteAccessAllowed false,
//     answers loopback clients only; every URL here is 127.0.0.1.
//   - Authentication: HTTP Basic only (Orthanc's RegisteredUsers), voxpipe/secret unless the
//     Options say otherwise; a wrong or missing password, and a Bearer token, get 401. DIMSE
//     (StoreSCU) has no authentication.
//   - StableSeries: Options.StableAge (1 s by default here, 60 s in Orthanc) sets how long a
//     series goes without a new instance before Orthanc marks it stable. The event can fire more
//     than once for one series (an instance that arrives after it, or one re-sent with
//     Options.Overwrite): tests of exactly-once must expect that.
//   - JPEG 2000: no decoder plugin is loaded, so WADO-RS of a JPEG 2000 series that asks for
//     explicit VR little endian answers 500; that is Orthanc's behaviour, kept on purpose.
//
// Only the DICOMweb plugin is loaded (by path, not the plugin folder), with its root at
// /dicom-web/. Nothing is global: each Server is its own process, folder and ports.
package orthanctest
