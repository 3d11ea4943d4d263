#!/usr/bin/env bash
# Installs kverify's build dependencies from Debian packages. Idempotent: a second run
# installs nothing when every package is present.
set -euo pipefail
PKGS=(cmake ninja-build g++ ccache pkg-config
      libmpfr-dev libgmp-dev libmpfi-dev libqd-dev libeigen3-dev libboost-dev
      libgtest-dev librapidcheck-dev nlohmann-json3-dev libcli11-dev libfmt-dev
      libxxhash-dev libtbb-dev librandom123-dev qemu-user python3 libjs-chart.js
      python3-numpy python3-pytest python3-venv python3-setuptools python3-pip
      slurm-wlm munge)  # tests/slurm: a one-node Slurm cluster on this machine
# The tests also open the HTML report in a real browser (tests/reports/report_in_browser.py).
[ "${1:-}" = "--with-browser" ] && PKGS+=(chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
