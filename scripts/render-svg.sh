#!/usr/bin/env bash
# Renders an SVG (from bmpipe plan/simulate/compare --svg) to a PNG with headless Chromium, to
# check that it displays. Installs Debian's chromium when missing.
#
#   scripts/render-svg.sh timeline.svg [timeline.png]
set -euo pipefail
svg=$(realpath "$1")
png=${2:-${svg%.svg}.png}
if ! command -v chromium >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
width=$(grep -m1 -o 'width="[0-9]*"' "$svg" | tr -dc 0-9)
height=$(grep -m1 -o 'height="[0-9]*"' "$svg" | tr -dc 0-9)
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$width,$height" \
  --screenshot="$png" "file://$svg" 2>/dev/null
echo "wrote $png"
