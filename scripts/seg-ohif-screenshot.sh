#!/usr/bin/env bash
# A screenshot of voxpipe's DICOM SEG in OHIF (issue 33): the fixture phantom
# (fixtures/volumes/phantom_000.nii.gz) written as a DICOM series with pydicom
# (scripts/dicom_gen.py --from-nifti) and segmented by `voxpipe run --engine cpu`; series and SEG go
# into a local Orthanc (DICOMweb plugin) by STOW-RS; OHIF's prebuilt viewer (npm @ohif/app, its dist/
# served as static files) reads them back over DICOMweb from the same origin (a small python proxy
# serves dist/ and forwards /dicom-web/ to Orthanc with its credentials, so no CORS); headless
# Chromium, driven over the DevTools protocol by a small node script, opens
# /viewer?StudyInstanceUIDs=...&initialSeriesInstanceUID=<SEG series>, waits until OHIF has loaded
# the SEG (disableConfirmationPrompts: no "load SEG?" prompt), moves to the source slice where the SEG
# has the most segments, opens the segmentation panel and takes the screenshot.
# Fails unless OHIF read as many segments as the SEG has, with the SEG's segment labels, and drew each
# segment's colour in the viewport (python3-pil counts the pixels), and scripts/pngcheck passes.
# Offline apart from the npm registry (once: the tarball is cached, sha512-checked, under
# ${XDG_CACHE_HOME:-$HOME/.cache}/voxpipe). Needs: orthanc, orthanc-dicomweb, chromium, python3-pydicom,
# python3-pil (Debian; installed with apt-get when missing), curl, openssl, npm, node >= 20 (WebSocket).
# Usage: scripts/seg-ohif-screenshot.sh [OUT.png]   (default $TMPDIR/voxpipe-seg-ohif.png)
#   VOXPIPE=/path/to/voxpipe uses that binary instead of building ./cmd/voxpipe.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shot=${1:-${TMPDIR:-/tmp}/voxpipe-seg-ohif.png}
case "$shot" in /*) ;; *) shot="$root/$shot" ;; esac
py=/usr/bin/python3 # Debian's, which has pydicom and PIL
ohif_version=3.13.2
ohif_integrity=sha512-WZdxmpmG7rqFgW9ZJLcbgr3XCtLi1KDNPoMaeY5PPe6j4G4fjEjjkycZM6C6Zk2F87BKxFfpq+jd5xXZB9E8EA==
cache=${XDG_CACHE_HOME:-$HOME/.cache}/voxpipe

fail() {
	echo "seg-ohif-screenshot: $*" >&2
	exit 1
}

# shellcheck source=lib/debian.sh
. scripts/lib/debian.sh
apt_need orthanc orthanc-dicomweb python3-pydicom python3-pil python3-numpy curl
find_chromium || fail "no chromium"
plugin=/usr/share/orthanc/plugins/libOrthancDicomWeb.so
[[ -f "$plugin" ]] || fail "no DICOMweb plugin at $plugin"
command -v npm >/dev/null || fail "npm is missing (the OHIF bundle comes from the npm registry)"
node=(node)
if ! timeout 30 node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
	node=(node --experimental-websocket --no-warnings)
	timeout 30 "${node[@]}" -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' ||
		fail "node has no WebSocket client (needs node >= 20): $(node --version 2>&1)"
fi

work=$(mktemp -d)
pids=()
fgpid=""
cleanup() {
	local p
	if [[ -n "$fgpid" ]]; then kill -TERM "$fgpid" 2>/dev/null || true; fi
	for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
	for p in $fgpid "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# waited CMD...: CMD in the background and waited for, so that a signal stops the script (and CMD) at once
waited() {
	"$@" &
	fgpid=$!
	local rc=0
	wait "$fgpid" || rc=$?
	fgpid=""
	return "$rc"
}
# start NAME CMD...: in its own process group (killed as a group by cleanup), output in $work/NAME.log
start() {
	local name=$1
	shift
	setsid "$@" >"$work/$name.log" 2>&1 </dev/null &
	pids+=($!)
}

echo "== OHIF $ohif_version (npm @ohif/app)"
tgz="$cache/ohif-app-$ohif_version.tgz"
sri() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }
if [[ ! -f "$tgz" || "$(sri "$tgz")" != "$ohif_integrity" ]]; then
	mkdir -p "$cache" "$work/npm"
	waited timeout 600 npm pack --silent --pack-destination "$work/npm" "@ohif/app@$ohif_version" >/dev/null || fail "npm pack @ohif/app@$ohif_version failed"
	[[ "$(sri "$work/npm/ohif-app-$ohif_version.tgz")" == "$ohif_integrity" ]] || fail "@ohif/app@$ohif_version: integrity mismatch"
	mv "$work/npm/ohif-app-$ohif_version.tgz" "$tgz.tmp$$" && mv "$tgz.tmp$$" "$tgz"
fi
mkdir -p "$work/ohif"
timeout 300 tar -xzf "$tgz" -C "$work/ohif" package/dist
dist="$work/ohif/package/dist"
[[ -f "$dist/index.html" && -f "$dist/app-config.js" ]] || fail "no prebuilt dist/ in $tgz"

bin=${VOXPIPE:-}
if [[ -z "$bin" ]]; then
	echo "== build voxpipe"
	waited timeout 600 go build -o "$work/voxpipe" ./cmd/voxpipe
	bin="$work/voxpipe"
fi

echo "== series, mask and SEG"
timeout 120 "$py" scripts/dicom_gen.py --from-nifti fixtures/volumes/phantom_000.nii.gz "$work/series"
timeout 300 "$bin" run --engine cpu --quiet "$work/series" -o "$work/out"
mask=$(ls "$work/out"/*_mask.nii.gz)
seg=${mask%.nii.gz}.seg.dcm
[[ -s "$seg" ]] || fail "voxpipe run wrote no $seg beside the mask"
# study UID, SEG series UID, source SOP Instance UID of the slice with the most segments (then voxels),
# segment labels as JSON
cat >"$work/seginfo.py" <<'EOF'
import collections, json, sys
import pydicom
d = pydicom.dcmread(sys.argv[1])
px = d.pixel_array.reshape(int(d.NumberOfFrames), d.Rows, d.Columns)
segs, vox = collections.defaultdict(set), collections.Counter()
for i, g in enumerate(d.PerFrameFunctionalGroupsSequence):
    sop = g.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
    n = int(px[i].sum())
    if n:
        segs[sop].add(int(g.SegmentIdentificationSequence[0].ReferencedSegmentNumber))
        vox[sop] += n
best = max(segs, key=lambda s: (len(segs[s]), vox[s]))
labels = [str(s.SegmentLabel) for s in d.SegmentSequence]
print(d.StudyInstanceUID, d.SeriesInstanceUID, best, json.dumps(labels, separators=(",", ":")), sep="\t")
EOF
IFS=$'\t' read -r study segseries slice labels < <(timeout 120 "$py" "$work/seginfo.py" "$seg")
echo "SEG series $segseries, segments $labels, shown on source slice $slice"

free_ports() {
	"$py" -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])'
}
read -r hport dport wport < <(free_ports)

echo "== Orthanc (DICOMweb) on 127.0.0.1:$hport"
mkdir -p "$work/db"
cat >"$work/orthanc.json" <<EOF
{
  "Name": "voxpipe-ohif", "HttpPort": $hport, "DicomPort": $dport, "DicomAet": "VOXOHIF",
  "StorageDirectory": "$work/db", "IndexDirectory": "$work/db",
  "RemoteAccessAllowed": false,
  "AuthenticationEnabled": true, "RegisteredUsers": { "voxpipe": "secret" },
  "StableAge": 3, "SaveJobs": false, "OrthancExplorerEnabled": false, "WebDavEnabled": false,
  "Plugins": [ "$plugin" ],
  "DicomWeb": { "Enable": true, "Root": "/dicom-web/" }
}
EOF
auth=voxpipe:secret
start orthanc timeout 900 Orthanc "$work/orthanc.json"
for _ in $(seq 100); do
	curl -sf -u "$auth" "http://127.0.0.1:$hport/system" >/dev/null && break
	sleep 0.1
done
curl -sf -u "$auth" "http://127.0.0.1:$hport/system" >/dev/null || {
	tail -5 "$work/orthanc.log" >&2
	fail "Orthanc did not start"
}
b="vp$RANDOM$RANDOM"
code=$({
	for f in "$work/series"/* "$seg"; do
		printf -- '--%s\r\nContent-Type: application/dicom\r\n\r\n' "$b"
		cat "$f"
		printf '\r\n'
	done
	printf -- '--%s--\r\n' "$b"
} | timeout 300 curl -sS -o "$work/stow.json" -w '%{http_code}' -u "$auth" --data-binary @- \
	-H 'Accept: application/dicom+json' \
	-H "Content-Type: multipart/related; type=\"application/dicom\"; boundary=$b" \
	"http://127.0.0.1:$hport/dicom-web/studies")
[[ "$code" == 200 ]] || fail "STOW-RS answered $code"

echo "== OHIF at http://127.0.0.1:$wport (dist/ and /dicom-web/ of one origin)"
cat >"$work/serve.py" <<'EOF'
"""Static files from ROOT (index.html for unknown paths: OHIF routes), /dicom-web/ forwarded to Orthanc."""
import base64, http.client, http.server, os, sys, urllib.parse

root, port, upstream, auth = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
up = urllib.parse.urlsplit(upstream)
basic = "Basic " + base64.b64encode(auth.encode()).decode()


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        h = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "content-type")}
        h["Authorization"] = basic
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        try:
            c.request(self.command, self.path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() == "content-type":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/dicom-web/"):
            return self.forward()
        p = urllib.parse.urlsplit(self.path).path
        if not os.path.isfile(os.path.join(root, p.lstrip("/"))):
            self.path = "/index.html"
        return super().do_GET()

    def do_POST(self):
        if self.path.startswith("/dicom-web/"):
            return self.forward()
        self.send_error(405)


Handler.extensions_map.update({".wasm": "application/wasm", ".js": "text/javascript"})
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
server.serve_forever()
EOF
# OHIF's configuration: one DICOMweb source at this origin; SEGs load without the prompt; the
# onboarding tour marked as seen (OHIF keeps that in localStorage)
cat >"$dist/app-config.js" <<'EOF'
window.config = {
  routerBasename: '/',
  extensions: [],
  modes: [],
  customizationService: {},
  showStudyList: true,
  maxNumberOfWebWorkers: 1,
  showWarningMessageForCrossOrigin: false,
  showCPUFallbackMessage: false,
  showLoadingIndicator: false,
  disableConfirmationPrompts: true,
  investigationalUseDialog: { option: 'never' },
  defaultDataSourceName: 'orthanc',
  dataSources: [{
    namespace: '@ohif/extension-default.dataSourcesModule.dicomweb',
    sourceName: 'orthanc',
    configuration: {
      friendlyName: 'local Orthanc', name: 'orthanc',
      wadoUriRoot: '/dicom-web', qidoRoot: '/dicom-web', wadoRoot: '/dicom-web',
      qidoSupportsIncludeField: false, imageRendering: 'wadors', thumbnailRendering: 'wadors',
      enableStudyLazyLoad: true, supportsFuzzyMatching: false, supportsWildcard: true,
      staticWado: false, singlepart: 'bulkdata,video', bulkDataURI: { enabled: true },
      omitQuotationForMultipartRequest: true,
    },
  }],
};
try { localStorage.setItem('shownTours', JSON.stringify(['basicViewerTour'])); } catch (e) {}
EOF
start serve timeout 900 "$py" "$work/serve.py" "$dist" "$wport" "http://127.0.0.1:$hport" "$auth"
for _ in $(seq 100); do
	curl -sf -o /dev/null "http://127.0.0.1:$wport/app-config.js" && break
	sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$wport/dicom-web/studies/$study/series" || {
	tail -5 "$work/serve.log" >&2
	fail "the OHIF origin does not answer DICOMweb"
}

echo "== headless Chromium"
timeout 60 "$chromium" --version 2>/dev/null || true
start chromium timeout 600 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$work/profile" --window-size=1400,900 --remote-debugging-port=0 about:blank
for _ in $(seq 300); do
	[[ -s "$work/profile/DevToolsActivePort" ]] && break
	sleep 0.1
done
[[ -s "$work/profile/DevToolsActivePort" ]] || {
	tail -5 "$work/chromium.log" >&2
	fail "Chromium did not open its DevTools port"
}
devtools=$(head -1 "$work/profile/DevToolsActivePort")
cat >"$work/shot.mjs" <<'EOF'
// node shot.mjs DEVTOOLS_PORT URL OUT.png TIMEOUT_S SLICE_SOP_UID LABELS_JSON STATE.json
import { writeFileSync } from 'node:fs';
const [port, url, out, tmo, sop, labels, stateFile] = process.argv.slice(2);
const deadline = Date.now() + Number(tmo) * 1000;
const sleep = ms => new Promise(r => setTimeout(r, ms));
const t = await (await fetch(`http://127.0.0.1:${port}/json/new?about:blank`, { method: 'PUT' })).json();
const ws = new WebSocket(t.webSocketDebuggerUrl);
await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
let id = 0;
const pending = new Map();
ws.onmessage = m => {
  const d = JSON.parse(m.data);
  if (d.id && pending.has(d.id)) {
    const [res, rej] = pending.get(d.id);
    pending.delete(d.id);
    d.error ? rej(new Error(JSON.stringify(d.error))) : res(d.result);
  } else if (d.method === 'Runtime.exceptionThrown') {
    console.error('page exception:', JSON.stringify(d.params.exceptionDetails).slice(0, 400));
  }
};
const send = (method, params = {}) => new Promise((res, rej) => {
  const i = ++id;
  pending.set(i, [res, rej]);
  ws.send(JSON.stringify({ id: i, method, params }));
});
const evaluate = async expr => (await send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true })).result.value;
const shot = async p => {
  const r = await send('Page.captureScreenshot', { format: 'png' });
  writeFileSync(p, Buffer.from(r.data, 'base64'));
};
await send('Runtime.enable');
await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 900, deviceScaleFactor: 1, mobile: false });
await send('Page.navigate', { url });
// the SEG as OHIF loaded it: segment labels in segment-number order, the viewport's representation
const probe = `(() => { const s = window.services; if (!s) return null;
  const vid = s.viewportGridService.getActiveViewportId();
  const segs = s.segmentationService.getSegmentations().map(x => ({ id: x.segmentationId,
    labels: Object.keys(x.segments || {}).map(Number).sort((a, b) => a - b).map(k => x.segments[k].label) }));
  const reps = vid ? s.segmentationService.getSegmentationRepresentations(vid).map(r => ({ type: r.type, visible: r.visible })) : [];
  return JSON.stringify({ vid, segs, reps, loading: document.body.innerText.includes('Loading SEG') }); })()`;
let state = null;
for (;;) {
  if (Date.now() > deadline) {
    console.error('OHIF did not show the SEG in time; last state:', JSON.stringify(state));
    await shot(out.replace(/\.png$/, '.failed.png'));
    process.exit(1);
  }
  await sleep(1000);
  try { state = JSON.parse(await evaluate(probe)); } catch { continue; }
  if (state && state.segs.length === 1 && state.reps.some(r => r.visible) && !state.loading) break;
}
if (JSON.stringify(state.segs[0].labels) !== labels) {
  console.error(`OHIF read segment labels ${JSON.stringify(state.segs[0].labels)}, the SEG has ${labels}`);
  process.exit(1);
}
await sleep(1500);
// to the slice with the most segments; the segmentation panel open; each segment's colour and the
// viewport's place on the page, for the pixel check
const prep = `(async () => { const s = window.services; const vid = s.viewportGridService.getActiveViewportId();
  const vp = s.cornerstoneViewportService.getCornerstoneViewport(vid); const ids = vp.getImageIds();
  const i = ids.findIndex(x => x.includes(${JSON.stringify(sop)}));
  if (i >= 0) await vp.setImageIdIndex(i);
  s.panelService.activatePanel('@ohif/extension-cornerstone.panelModule.panelSegmentation', true);
  const sid = s.segmentationService.getSegmentations()[0].segmentationId;
  const n = Object.keys(s.segmentationService.getSegmentations()[0].segments).length;
  const colors = []; for (let k = 1; k <= n; k++) colors.push(Array.from(s.segmentationService.getSegmentColor(vid, sid, k)).slice(0, 3));
  const r = vp.element.getBoundingClientRect();
  return JSON.stringify({ index: i, images: ids.length, colors, rect: [r.left, r.top, r.right, r.bottom].map(Math.round) }); })()`;
const info = JSON.parse(await evaluate(prep));
if (info.index < 0) {
  console.error('the slice', sop, 'is not among the viewport images');
  process.exit(1);
}
await sleep(3000);
await shot(out);
writeFileSync(stateFile, JSON.stringify({ ...state, ...info }));
console.log(`OHIF: segments ${JSON.stringify(state.segs[0].labels)}, image ${info.index + 1} of ${info.images}`);
ws.close();
process.exit(0);
EOF
url="http://127.0.0.1:$wport/viewer?StudyInstanceUIDs=$study&initialSeriesInstanceUID=$segseries"
mkdir -p "$(dirname "$shot")"
rm -f "$shot"
waited timeout 240 "${node[@]}" "$work/shot.mjs" "$devtools" "$url" "$shot" 180 "$slice" "$labels" "$work/state.json" || {
	tail -5 "$work/serve.log" >&2
	fail "OHIF did not show the SEG (see ${shot%.png}.failed.png if written)"
}

echo "== check"
# each segment's colour must be drawn in the viewport (the outline is the colour itself)
cat >"$work/colours.py" <<'EOF'
import json, sys
import numpy as np
from PIL import Image
st = json.load(open(sys.argv[2]))
l, t, r, b = st["rect"]
im = np.asarray(Image.open(sys.argv[1]).convert("RGB"), dtype=np.int32)[t:b, l:r]
bad = []
for label, c in zip(st["segs"][0]["labels"], st["colors"]):
    n = int((np.abs(im - np.array(c)).max(axis=2) <= 24).sum())
    print(f"segment {label!r} colour {c}: {n} pixels in the viewport")
    if n < 20:
        bad.append(label)
sys.exit(f"segments not drawn: {bad}" if bad else 0)
EOF
timeout 120 "$py" "$work/colours.py" "$shot" "$work/state.json"
timeout 300 go run ./scripts/pngcheck "$shot"
echo "screenshot: $shot"
