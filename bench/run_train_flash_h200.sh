#!/usr/bin/env bash
# Flash vs materialized attention in the train step on the H200 machine, in one device call: the GPU
# correctness test (flash in every shape, materialized in the BF16 ones; plain and under
# compute-sanitizer memcheck), then `gpuscout bench --only train-step` on Llama-3.1-8B layers with
# GPUSCOUT_TRAIN_ATTENTION=flash and =materialized, and a table of the two.
# Made here (build machine), then run with `run` carrying .devdist-train:
#   cmake --build build-report3-cuda -j2 --target gpuscout train_step_test
#   bash scripts/make-device-dist.sh build-report3-cuda .devdist-train
#   cp build-report3-cuda/tests/gpu/train_step_test .devdist-train/ && strip .devdist-train/gpuscout .devdist-train/train_step_test
#   run: DIST=.devdist-train bash bench/run_train_flash_h200.sh   (carry [".devdist-train"])
# Writes under $OUT: summary.txt (environment and the table), test.txt, sanitizer.txt,
# flash.json/.txt, materialized.json/.txt.
set -u
DIST=${DIST:-.devdist-train}
. bench/dist_env.sh
out=${OUT:-out}
mkdir -p "$out"
LAYERS=${LAYERS:-4}
BATCHES=${BATCHES:-1,4}
SEQS=${SEQS:-2048,4096}
MAX_TIME=${MAX_TIME:-3}
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv
  "$bin" --version
} >"$out/summary.txt" 2>&1

s=$(date +%s)
timeout 120 "$DIST/train_step_test" >"$out/test.txt" 2>&1
echo "test exit $? ($(($(date +%s) - s)) s)" | tee -a "$out/test.txt" "$out/summary.txt"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
s=$(date +%s)
timeout 150 "$sanitizer" --tool memcheck --error-exitcode 3 "$DIST/train_step_test" >"$out/sanitizer.txt" 2>&1
echo "compute-sanitizer memcheck exit $? ($(($(date +%s) - s)) s)" | tee -a "$out/sanitizer.txt" "$out/summary.txt"
grep -E "ERROR SUMMARY|PASS|FAIL" "$out/sanitizer.txt" | tail -3 | tee -a "$out/summary.txt"

for attention in flash materialized; do
  s=$(date +%s)
  GPUSCOUT_TRAIN_ATTENTION=$attention timeout 200 "$bin" bench --only train-step --model llama-3.1-8b \
    --train-layers "$LAYERS" --micro-batch "$BATCHES" --seq "$SEQS" --max-time-per-case "$MAX_TIME" -v \
    --out "$out/$attention.json" >"$out/$attention.txt" 2>&1
  echo "bench $attention exit $? ($(($(date +%s) - s)) s)" | tee -a "$out/$attention.txt" "$out/summary.txt"
done

python3 - "$out" >>"$out/summary.txt" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for attention in ("flash", "materialized"):
    try:
        d = json.load(open(f"{out}/{attention}.json"))
    except Exception as e:
        print(attention, "no results:", e)
        continue
    for r in d["records"]:
        m = {x["name"]: x for x in r.get("metrics", [])}
        if "/verify/" in r["key"] or "/gemm/" in r["key"]:
            what = m.get("worst_error_ratio", m.get("throughput", {})).get("value")
            print(f"{attention:12s} {r['key']}: {r.get('outcome', 'passed')} {what}")
            continue
        rows.setdefault(r["key"], {})[attention] = (r, m)
print("| case | attention | step ms (fwd / bwd) | p10-p90 ms | tokens/s | TFLOP/s | MFU % | memory model GiB | device used GiB |")
print("|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows, key=lambda k: (len(k), k)):
    for attention in ("materialized", "flash"):
        if attention not in rows[key]:
            continue
        r, m = rows[key][attention]
        p = r["params"]
        if "step_time" not in m:
            print(f"| {key} | {attention} | {r.get('outcome')}: {r.get('reason')} |")
            continue
        st = m["step_time"]
        sp = st.get("spread", {})
        spread = f"{sp.get('p10', float('nan')):.2f}-{sp.get('p90', float('nan')):.2f}"
        print(f"| {key.split('/')[-1]} | {attention} | {st['value']:.2f} ({m['forward_time']['value']:.2f} / "
              f"{m['backward_time']['value']:.2f}) | {spread} n={st.get('samples', '?')} | {m['throughput']['value']:.0f} | "
              f"{m['model_flops_rate']['value']:.0f} | {m['mfu']['value']:.1f} | "
              f"{p['memory_bytes']['total'] / 2**30:.2f} | {p.get('device_memory_used_bytes', 0) / 2**30:.2f} |")
    if len(rows[key]) == 2 and all("step_time" in rows[key][a][1] for a in rows[key]):
        f, mat = rows[key]["flash"][1]["step_time"]["value"], rows[key]["materialized"][1]["step_time"]["value"]
        print(f"| {key.split('/')[-1]} | speed-up | {mat / f:.3f}x |")
PY
tail -22 "$out/summary.txt"
