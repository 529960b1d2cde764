#!/usr/bin/env bash
# DICOM SEG in a PACS (issue 33): voxpipe run on a DICOM series writes <mask>.seg.dcm; the SEG
# must match the mask (scripts/segcheck.py, pydicom), pass dciodvfy, and be taken by Orthanc
# (Debian's, with its DICOMweb plugin, started here on free loopback ports in a temporary folder)
# into the study of its source series:
#   1. STOW-RS of the series, then of the SEG: 200, the SEG in ReferencedSOPSequence, no
#      FailedSOPSequence;
#   2. QIDO-RS: in the source's study, one series of Modality SEG holding the SEG instance
#      (SOP class 1.2.840.10008.5.1.4.1.1.66.4), the source series whole beside it;
#   3. WADO-RS of the SEG: the same SOPInstanceUID and pixel data, and segcheck passes on the
#      retrieved copy.
# `voxpipe export-seg` of the same mask is checked with segcheck and dciodvfy as well.
# Usage: scripts/seg-pacs-test.sh. VOXPIPE=/path/to/voxpipe uses that binary instead of building
# ./cmd/voxpipe. SEG_WRITER=segmake makes the SEG with scripts/tests/segmake.py (pydicom) instead
# of voxpipe: only to test this script where voxpipe cannot write SEGs.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel

# shellcheck source=lib/debian.sh
. scripts/lib/debian.sh
# shellcheck source=lib/orthanc.sh
. scripts/lib/orthanc.sh
apt_need orthanc orthanc-dicomweb dicom3tools curl python3-pydicom python3-nibabel python3-numpy

work=$(mktemp -d)
opid=""
cleanup() {
	if [ -n "$opid" ]; then
		kill -TERM "$opid" 2>/dev/null || true
		wait "$opid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "seg-pacs-test: FAIL: $*" >&2
	if [ -f "$work/orthanc.log" ]; then tail -5 "$work/orthanc.log" >&2; fi
	exit 1
}

bin=${VOXPIPE:-}
if [ -z "$bin" ]; then
	timeout 600 go build -o "$work/voxpipe" ./cmd/voxpipe
	bin="$work/voxpipe"
fi

echo "== series and SEG"
timeout 120 "$py" scripts/dicom_gen.py --from-nifti fixtures/volumes/phantom_000.nii.gz "$work/series"
if [ "${SEG_WRITER:-voxpipe}" = segmake ]; then
	timeout 300 "$bin" run --engine cpu --quiet "$work/series" -o "$work/out"
	mask=$(ls "$work/out"/*_mask.nii.gz)
	timeout 120 "$py" scripts/tests/segmake.py --from-mask "$mask" "$work/series" "${mask%.nii.gz}.seg.dcm"
elif timeout 30 "$bin" export-seg --help >/dev/null 2>&1; then
	timeout 300 "$bin" run --engine cpu --quiet "$work/series" -o "$work/out"
	mask=$(ls "$work/out"/*_mask.nii.gz)
	timeout 300 "$bin" export-seg "$mask" --reference "$work/series" -o "$work/export.seg.dcm"
else
	fail "$bin has no export-seg: it writes no DICOM SEG (SEG_WRITER=segmake tests this script without it)"
fi
seg=${mask%.nii.gz}.seg.dcm
[ -s "$seg" ] || fail "voxpipe run wrote no $seg beside the mask (ls: $(ls "$work/out"))"
timeout 300 "$py" scripts/segcheck.py "$seg" "$mask" "$work/series" --expect-segments 3 || fail "segcheck: the SEG of voxpipe run does not match its mask"
timeout 120 dciodvfy "$seg" >"$work/dciodvfy.log" 2>&1 || true
if grep '^Error' "$work/dciodvfy.log"; then fail "dciodvfy finds errors in $seg (above)"; fi
if [ -f "$work/export.seg.dcm" ]; then
	timeout 300 "$py" scripts/segcheck.py "$work/export.seg.dcm" "$mask" "$work/series" --expect-segments 3 || fail "segcheck: the SEG of voxpipe export-seg does not match the mask"
	timeout 120 dciodvfy "$work/export.seg.dcm" >"$work/dciodvfy-export.log" 2>&1 || true
	if grep '^Error' "$work/dciodvfy-export.log"; then fail "dciodvfy finds errors in export-seg's SEG (above)"; fi
fi
read -r study series seguid segseries < <(timeout 60 "$py" -c '
import pydicom, sys, os
d = sys.argv[1]
s = pydicom.dcmread(os.path.join(d, sorted(os.listdir(d))[0]), stop_before_pixels=True)
g = pydicom.dcmread(sys.argv[2], stop_before_pixels=True)
print(s.StudyInstanceUID, s.SeriesInstanceUID, g.SOPInstanceUID, g.SeriesInstanceUID)' "$work/series" "$seg")
nslices=$(ls "$work/series" | wc -l)

echo "== Orthanc"
orthanc_start "$work" voxpipe-seg-test VOXSEG 3 900 || fail "Orthanc did not answer"
echo "Orthanc $(timeout 5 curl -sf -u "$auth" "$base/system" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["Version"])') on 127.0.0.1:$hport"

# stow NAME FILE...: one STOW-RS request; the answer goes to $work/NAME.json, the status is printed.
stow() {
	local name=$1
	shift
	orthanc_stow "$dw" "$auth" "$work/$name.json" "$@"
}
# stowed NAME UID...: the STOW answer lists every UID as stored and nothing as failed.
stowed() {
	local name=$1
	shift
	timeout 30 "$py" -c '
import json, sys
a = json.load(open(sys.argv[1]))
a = a[0] if isinstance(a, list) else a
if a.get("00081198", {}).get("Value"):  # Orthanc sends it empty when nothing failed
    sys.exit("FailedSOPSequence: %s" % json.dumps(a["00081198"]))
got = {i["00081155"]["Value"][0] for i in a.get("00081199", {}).get("Value", [])}
missing = set(sys.argv[2:]) - got
if missing:
    sys.exit("not in ReferencedSOPSequence: %s" % sorted(missing))' "$work/$name.json" "$@"
}

echo "== STOW-RS"
code=$(stow series "$work/series"/*)
[ "$code" = 200 ] || fail "STOW of the series answered $code: $(head -c 600 "$work/series.json")"
code=$(stow seg "$seg")
[ "$code" = 200 ] || fail "STOW of the SEG answered $code: $(head -c 600 "$work/seg.json")"
stowed seg "$seguid" || fail "Orthanc did not take the SEG: $(head -c 600 "$work/seg.json")"
echo "ok: STOW-RS 200 for the $nslices slices and the SEG $seguid"

echo "== QIDO-RS"
q() { timeout 30 curl -sf -u "$auth" "$dw/$1" >"$work/$2" || fail "QIDO $1 failed"; }
q "studies/$study/series?Modality=SEG" seg-series.json
q "studies/$study/series/$segseries/instances" seg-instances.json
q "instances?SOPInstanceUID=$seguid" seg-lookup.json
q "studies/$study/series?SeriesInstanceUID=$series" source-series.json
timeout 30 "$py" -c '
import json, sys
w, study, series, seguid, segseries, n = sys.argv[1:]
def load(name):
    return json.load(open("%s/%s" % (w, name)))
def v(item, tag):
    return item.get(tag, {}).get("Value", [None])[0]
problems = []
ss = load("seg-series.json")
if [v(s, "0020000E") for s in ss] != [segseries]:
    problems.append("SEG series of the study: %s, want [%s]" % ([v(s, "0020000E") for s in ss], segseries))
for s in ss:
    if v(s, "00080060") != "SEG":
        problems.append("series %s has Modality %s" % (v(s, "0020000E"), v(s, "00080060")))
si = load("seg-instances.json")
if [(v(i, "00080018"), v(i, "00080016")) for i in si] != [(seguid, "1.2.840.10008.5.1.4.1.1.66.4")]:
    problems.append("instances of the SEG series: %s" % [(v(i, "00080018"), v(i, "00080016")) for i in si])
for i in load("seg-lookup.json"):
    if v(i, "0020000D") != study:
        problems.append("SEG instance in study %s, its source in %s" % (v(i, "0020000D"), study))
src = load("source-series.json")
if len(src) != 1 or str(v(src[0], "00201209")) != n or v(src[0], "00080060") != "MR":
    problems.append("source series as stored: %s" % json.dumps(src)[:400])
if problems:
    sys.exit("\n".join(problems))
' "$work" "$study" "$series" "$seguid" "$segseries" "$nslices" || fail "QIDO-RS answers are not what was stowed (above)"
echo "ok: QIDO-RS: study $study holds the MR series ($nslices instances) and the SEG series $segseries (Modality SEG, SOP class SEG)"

echo "== WADO-RS"
timeout 60 curl -sf -u "$auth" -D "$work/wado.head" -o "$work/wado.mime" \
	-H 'Accept: multipart/related; type="application/dicom"; transfer-syntax=1.2.840.10008.1.2.1' \
	"$dw/studies/$study/series/$segseries/instances/$seguid" || fail "WADO-RS of the SEG failed"
timeout 60 "$py" -c '
import re, sys, pydicom
head, body, orig, out = sys.argv[1:]
ctype = [l for l in open(head, encoding="latin-1") if l.lower().startswith("content-type:")][-1]
b = re.search(r"boundary=\"?([^\";\r\n]+)", ctype).group(1).encode()
parts = [p for p in open(body, "rb").read().split(b"--" + b)[1:] if not p.startswith(b"--")]
if len(parts) != 1:
    sys.exit("WADO-RS answered %d parts, want 1" % len(parts))
data = parts[0].split(b"\r\n\r\n", 1)[1]
data = data[:-2] if data.endswith(b"\r\n") else data
open(out, "wb").write(data)
a, g = pydicom.dcmread(orig), pydicom.dcmread(out)
if a.SOPInstanceUID != g.SOPInstanceUID or a.PixelData != g.PixelData:
    sys.exit("retrieved SEG %s differs from the one stowed %s" % (g.SOPInstanceUID, a.SOPInstanceUID))
' "$work/wado.head" "$work/wado.mime" "$seg" "$work/retrieved.dcm" || fail "WADO-RS did not give the SEG back"
timeout 300 "$py" scripts/segcheck.py "$work/retrieved.dcm" "$mask" "$work/series" --expect-segments 3 || fail "segcheck fails on the SEG retrieved by WADO-RS"
echo "ok: WADO-RS gives back SEG $seguid with the same pixel data"
echo "seg-pacs-test: ok"
