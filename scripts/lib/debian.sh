# Sourced by the scripts that need Debian packages or Chromium (report and SEG screenshots).
# apt_need PKG...: installs those not installed yet (with sudo when not root), under timeouts.
# find_chromium: sets $chromium to a Chromium on PATH, installing Debian's package when none is.

apt_need() {
	local need=() p sudo=""
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
	[[ ${#need[@]} -gt 0 ]] || return 0
	[[ $(id -u) == 0 ]] || sudo="sudo"
	timeout 600 $sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive timeout 1200 $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}

find_chromium() {
	chromium=$(command -v chromium || command -v chromium-browser || true)
	if [[ -z "$chromium" ]]; then
		apt_need chromium
		chromium=$(command -v chromium) || { echo "chromium did not install" >&2; return 1; }
	fi
}
