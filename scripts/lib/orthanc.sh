# Sourced by the scripts that need a real Orthanc with DICOMweb (seg-pacs-test.sh, pacs-perf.sh).
# orthanc_start DIR NAME AET STABLE_AGE LIMIT: starts Debian's Orthanc with its DICOMweb plugin
#   on two free loopback ports, its storage and log in DIR, user voxpipe:secret, under
#   `timeout LIMIT`; sets hport, dport, opid (stop it by that PID in the caller's trap), auth,
#   base (the REST root) and dw (the DICOMweb root); waits until it answers, else returns 1.
# orthanc_stow DW AUTH OUT FILE...: the files in one STOW-RS request; the answer goes to OUT, the
#   HTTP status is printed.

orthanc_start() {
	local dir=$1 name=$2 aet=$3 stable=$4 limit=$5
	read -r hport dport < <(timeout 30 /usr/bin/python3 -c '
import socket
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
	mkdir -p "$dir/db"
	cat >"$dir/orthanc.json" <<CONFIG
{
  "Name": "$name", "HttpPort": $hport, "DicomPort": $dport, "DicomAet": "$aet",
  "StorageDirectory": "$dir/db", "IndexDirectory": "$dir/db",
  "RemoteAccessAllowed": false,
  "AuthenticationEnabled": true, "RegisteredUsers": { "voxpipe": "secret" },
  "StableAge": $stable, "OverwriteInstances": true, "SaveJobs": false,
  "OrthancExplorerEnabled": false, "WebDavEnabled": false,
  "Plugins": [ "/usr/share/orthanc/plugins/libOrthancDicomWeb.so" ],
  "DicomWeb": { "Enable": true, "Root": "/dicom-web/" }
}
CONFIG
	setsid timeout "$limit" Orthanc "$dir/orthanc.json" >"$dir/orthanc.log" 2>&1 </dev/null &
	opid=$!
	auth=voxpipe:secret
	base=http://127.0.0.1:$hport
	dw=$base/dicom-web
	for _ in $(seq 200); do
		timeout 5 curl -sf -u "$auth" "$base/system" >/dev/null && return 0
		kill -0 "$opid" 2>/dev/null || return 1
		sleep 0.1
	done
	timeout 5 curl -sf -u "$auth" "$base/system" >/dev/null
}

orthanc_stow() {
	local dw=$1 auth=$2 out=$3 b="vp$RANDOM$RANDOM" f
	shift 3
	{
		for f in "$@"; do
			printf -- '--%s\r\nContent-Type: application/dicom\r\n\r\n' "$b"
			cat "$f"
			printf '\r\n'
		done
		printf -- '--%s--\r\n' "$b"
	} | timeout 300 curl -sS -o "$out" -w '%{http_code}' -u "$auth" --data-binary @- \
		-H 'Accept: application/dicom+json' \
		-H "Content-Type: multipart/related; type=\"application/dicom\"; boundary=$b" "$dw/studies"
}
