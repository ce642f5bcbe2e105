#!/usr/bin/env bash
# Screenshot an HTML report in headless Chromium (installs Debian's chromium if it is missing).
# usage: bash scripts/screenshot_report.sh runs/bench/index.html [out.png] [WIDTHxHEIGHT]
set -euo pipefail
html=${1:?usage: screenshot_report.sh REPORT.html [OUT.png] [WxH]}
out=${2:-${html%.html}.png}
size=${3:-1280x1400}
[ -f "$html" ] || { echo "screenshot_report.sh: no such file: $html" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
  browser=$(command -v chromium)
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --hide-scrollbars --window-size="${size/x/,}" --screenshot="$(realpath -m "$out")" \
  "file://$(realpath "$html")" 2>/dev/null
[ -s "$out" ] || { echo "screenshot_report.sh: chromium wrote no screenshot" >&2; exit 1; }
echo "screenshot: $out"
