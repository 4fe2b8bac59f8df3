#!/usr/bin/env bash
# Packs a gpuscout binary built here with the shared libraries the GPU machine's image lacks
# (fmt, spdlog, toml++ from Debian; cudart from the toolkit), so it runs there unchanged.
#   scripts/make-device-dist.sh BUILD_DIR DIST_DIR     e.g. build .devdist
set -euo pipefail
build=$1
dist=$2
rm -rf "$dist"
mkdir -p "$dist/lib"
cp "$build/gpuscout" "$dist/"
ldd "$build/gpuscout" | awk '/=>/ {print $3}' | grep -E 'libfmt|libspdlog|libtomlplusplus|libcudart' |
  while read -r lib; do cp -L "$lib" "$dist/lib/"; done
ls -l "$dist" "$dist/lib"
