#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file is not clang-formatted (style in .clang-format).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format --dry-run --Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
