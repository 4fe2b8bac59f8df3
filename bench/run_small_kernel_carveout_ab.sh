#!/usr/bin/env bash
# Session 29: the small elementwise kernels of a step asked for the GEMMs' shared-memory carveout
# (GPUSCOUT_SMALL_KERNEL_CARVEOUT=1, the default since session 29; kernels.hpp
# prefer_shared_carveout_in_small_kernels) against the driver's choice (=0), on whatever card the
# call gets: `infer_engine_test --bench llama-3.1-8b` with the switch 0 and 1, interleaved ROUNDS
# times (each run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_small_kernel_carveout_ab.sh
# Writes $OUT/small-kernel-carveout-ab.txt.
set -u
source bench/dist_env.sh
ab_begin small-kernel-carveout-ab
engine_ab_switch GPUSCOUT_SMALL_KERNEL_CARVEOUT "${ROUNDS:-2}" "start-up|decode batch|prefill 1 x" >>"$log" 2>&1
ab_end small-kernel-carveout-ab
