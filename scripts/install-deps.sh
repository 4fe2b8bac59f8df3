#!/usr/bin/env bash
# Installs the Debian 12 packages gpuscout builds and tests with (skips apt when all are present).
# chromium renders the HTML report in the `browser` test (skipped without it).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH (or /usr/local/cuda) the
# measurement backend is built too.
set -euo pipefail
packages=(
  build-essential cmake pkg-config git python3
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libtomlplusplus-dev
  libgtest-dev libgmock-dev clang-format libsqlite3-dev
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
