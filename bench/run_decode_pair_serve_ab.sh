#!/usr/bin/env bash
# Session 30: the serve benchmark's decode cases and static batch with the pair decode attention
# kernel withheld from the engine's start-up tuning (GPUSCOUT_DECODE_PAIR_KERNEL=0) and offered to
# it (=1, the default), interleaved ROUNDS times (each run builds its own engine):
# `gpuscout bench --only serve/decode,serve/static --model llama-3.1-8b`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_decode_pair_serve_ab.sh
# Writes $OUT/decode-pair-serve-ab.txt and $OUT/decode-pair-serve-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin decode-pair-serve-ab
serve_ab_switch GPUSCOUT_DECODE_PAIR_KERNEL serve/decode,serve/static pairs >>"$log" 2>&1
ab_end decode-pair-serve-ab
