#!/usr/bin/env bash
# Packs a gpuscout binary built here, with its NCCL profiler plugin, and the shared libraries the GPU
# machine's image lacks (fmt, spdlog, toml++ from Debian; cudart from the toolkit), so it runs there unchanged.
#   scripts/make-device-dist.sh BUILD_DIR DIST_DIR     e.g. build .devdist
set -euo pipefail
build=$1
dist=$2
rm -rf "$dist"
mkdir -p "$dist/lib"
cp "$build/gpuscout" "$dist/"
# gpuscout's NCCL profiler plugin (the algorithm/protocol NCCL chose) is looked for beside the binary.
if [ -e "$build/libgpuscout_nccl_profiler.so" ]; then cp "$build/libgpuscout_nccl_profiler.so" "$dist/"; fi
ldd "$build/gpuscout" | awk '/=>/ {print $3}' | grep -E 'libfmt|libspdlog|libtomlplusplus|libcudart' |
  while read -r lib; do cp -L "$lib" "$dist/lib/"; done
ls -l "$dist" "$dist/lib"
