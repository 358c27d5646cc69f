#!/usr/bin/env bash
# Tuning the int8 decode GEMVs (matmul_<type>_q8x, codegen/kernels/gemv_q8x.mlir) on the
# GPU: variants of gen_quant_kernels.py's Q8X parameters (units a block, units in flight a
# thread, workgroups an SM the registers allow, rows a warp), each checked against the
# float64 references and timed on the real decode shapes of Qwen2.5-Coder-7B (Q4_K; Q8_0
# at its FFN shapes) and Qwen3-0.6B (Q8_0) with the buffers rotated (launches back to back
# over copies adding up to 512 MB: weights from HBM, as in a decode step), by the case
# runner swz-ptx-check; then the shipped GEMVs of every decode type (the f32-activation
# ones of Q4_1, Q5_0, Q6_K, Q8_0, F16 beside the int8 ones) at the 7B FFN shapes and the
# Q6_K LM head, the same way. F16's tensor-core GEMV (matmul_f16_mma, gemv_f16_mma.mlir:
# 16-row m-tiles a warp, mt, chunks in flight, unroll, warps a workgroup splitting K,
# warps) is tuned the same way.
#
#   bench/tune_q8x.sh prepare [build-dir]   # here: variant PTX + a static swz-ptx-check
#                                           # into <build-dir>/gpu-tune (carry it)
#   bench/tune_q8x.sh run [build-dir]       # there: $OUT/tune-q8x.md and .json, the
#                                           # per-variant logs in $OUT/tune-logs.tgz
#   bench/tune_q8x.sh ncu [build-dir] NAME...   # there: ncu's speed-of-light, warp-state
#                                           # (stall reasons), memory and occupancy sections
#                                           # for variants NAME at the 7B gate/up shape, and
#                                           # their SASS (cuobjdump), into $OUT/ncu-NAME.txt
#
# A variant is "name|type|gen_quant_kernels.py --variant parameters|rows a workgroup"
# (rows = 4 x rows a warp; the case runner launches that grid: SWZ_CHECK_Q8X_ROWS). The
# first variant of each type is what the repository ships (Q4_K's units are 32-weight
# sub-blocks, 8 a block; Q8_0's 16 weights, 2 a block). Type q4k_mma is Q4_K's
# tensor-core GEMV (matmul_q4_k_mma_q8x: MMA_Q4K's warps splitting K, rows "16x<warps>").
# SWZ_TUNE_ONLY=REGEX prepares only the variants whose names match.
set -euo pipefail
mode=${1:?usage: $0 prepare|run [build-dir]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-tune
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
# shellcheck source=bench/ptx_tune_lib.sh
. "$src/bench/ptx_tune_lib.sh"
VARIANTS=(
  "q4k-ship|q4_k|rpw=2|8"
  "q80-ship|q8_0|rpw=1|4"
  "q6k-ship|q6_k|rpw=1|4"
  "q6k-r2m5|q6_k|rpw=2,minctasm=5|8"
  "q6k-u2m6|q6_k|unroll=2,minctasm=6|4"
  "q41-ship|q4_1|rpw=1|4"
  "q41-u1m8|q4_1|unroll=1,minctasm=8|4"
  "q41-u3m6|q4_1|unroll=3,minctasm=6|4"
  "q50-ship|q5_0|rpw=1|4"
  "q50-u2m7|q5_0|unroll=2,minctasm=7|4"
  "f16m-ship|f16|warps=4|16x4"
  "f16m-w8|f16|warps=8|16x8"
  "f16m-w16|f16|warps=16|16x16"
  "f16m-w16u2|f16|warps=16,unroll=2|16x16"
  "f16m-w8u8|f16|warps=8,unroll=8|16x8"
  "q4k-mma-w4|q4k_mma|warps=4|16x4"
  "q4k-mma-w4v4|q4k_mma|warps=4,v2=0|16x4"
  "q4k-mma-w2|q4k_mma|warps=2|16x2"
  "q4k-mma-w8|q4k_mma|warps=8|16x8"
  "q4k-mma-w16|q4k_mma|warps=16|16x16"
  "q4k-mma-w4m6|q4k_mma|warps=4,minctasm=6|16x4"
  "q4k-mma-w4m8|q4k_mma|warps=4,minctasm=8|16x4"
  "q4k-mma-w8m3|q4k_mma|warps=8,minctasm=3|16x8"
  "q4k-mma-w8m4|q4k_mma|warps=8,minctasm=4|16x8"
  "q4k-mma-w4pf|q4k_mma|warps=4,pf=1|16x4"
  "q4k-mma-w8pf|q4k_mma|warps=8,pf=1|16x8"
  "q4k-mma-w4pfm6|q4k_mma|warps=4,pf=1,minctasm=6|16x4"
  "q4k-mma-w4r|q4k_mma|warps=4,rolled=1|16x4"
  "q4k-mma-w8r|q4k_mma|warps=8,rolled=1|16x8"
)
# The kernel a variant of `type` tunes, and the PTX file it lands in: the int8 GEMVs
# (gemv_q8x.mlir), and F16's tensor-core GEMV (gemv_f16_mma.mlir; rows = (16 mt)x(warps)).
entry_of() { case $1 in f16) echo matmul_f16_mma ;; q4k_mma) echo matmul_q4_k_mma_q8x ;; *) echo "matmul_$1_q8x" ;; esac; }
ptx_of() { [ "$1" = f16 ] && echo swz_gemv_f16_mma.ptx || echo swz_gemv_q8x.ptx; }
case $mode in
prepare)
  rm -rf "$dir" && mkdir -p "$dir/bin"
  build_ptx_check "$dir/bin/swz-ptx-check"
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name type params rows <<< "$v"
    [[ $name =~ ${SWZ_TUNE_ONLY:-.} ]] || continue
    mkdir -p "$dir/$name"
    python3 "$src/codegen/kernels/gen_quant_kernels.py" --variant "$type:$params" --out "$dir/$name/v.mlir"
    compile_ptx "$dir/$name/v.mlir" "$dir/$name"
    rm "$dir/$name/v.mlir"
    regs=$(ptx_regs "$dir/$name/$(ptx_of "$type")" "$(entry_of "$type")")
    echo "$name|$type|$params|$rows|$regs" >> "$dir/variants.txt"
    printf '%-16s %s\n' "$name" "$regs"
  done
  # The shipped GEMVs (f32-activation ones and the int8 path), for the all-types table.
  mkdir -p "$dir/ship-f32"
  cp "$dir/$(ls "$dir" | grep -m1 -E '^q4k-')/swz_gemv_q8x.ptx" "$dir/ship-f32/"  # (any variant's: the other kernels as shipped)
  for t in q4_1 q4_k q5_0 q6_k q8_0 f16 f16_mma; do  # (f16_mma: both shipped shapes)
    compile_ptx "$src/codegen/kernels/gemv_$t.mlir" "$dir/ship-f32"
  done
  du -sh "$dir" ;;
run)
  res=${OUT:-$dir/out}
  out=/tmp/swz-tune  # per-variant logs and JSON (a call returns 8 files): packed at the end
  mkdir -p "$res" "$out"
  trap 'tar -czf "$res/tune-logs.tgz" -C "$out" . ; cp "$out"/tune-q8x.* "$res/" 2>/dev/null' EXIT
  while IFS='|' read -r name type params rows regs; do
    # The 7B-shape cases (1.7 GB to build) where they add shapes of this type: Q8_0's, Q6_K's.
    SWZ_CHECK_GEMV_7B=$([ "$type" != q4_k ] && echo 1 || true) SWZ_CHECK_Q8X_ROWS="$type:$rows" "$dir/bin/swz-ptx-check" --ptx-dir "$dir/$name" \
      --filter "$(entry_of "$type") T=" --reps 60 --rotate 512 --peak-gbps 4250 --json "$out/$name.json" \
      > "$out/$name.log" 2>&1 || true
    echo "== $name ($params, $regs)"; grep -E "^(ok|FAIL)" "$out/$name.log" | sed -E 's/: max \|err\|.*\); / /' | cut -c1-140
  done < "$dir/variants.txt"
  # SWZ_TUNE_ALL_TYPES=0 leaves the shipped kernels of every type out (a shorter call).
  [ "${SWZ_TUNE_ALL_TYPES:-1}" = 0 ] ||
  for shape in "T=1 N=18944 K=3584" "T=1 N=3584 K=18944" "T=1 N=152064 K=3584"; do
    SWZ_CHECK_GEMV_7B=1 "$dir/bin/swz-ptx-check" --ptx-dir "$dir/ship-f32" --filter "$shape" --reps 60 \
      --rotate 512 --peak-gbps 4250 --json "$out/ship-f32-${shape// /_}.json" >> "$out/ship-f32.log" 2>&1 || true
  done
  [ "${SWZ_TUNE_ALL_TYPES:-1}" = 0 ] || { echo "== shipped GEMVs, every type"; grep -E "^(ok|FAIL)" "$out/ship-f32.log" | sed -E 's/: max \|err\|.*\); / /' | cut -c1-140; }
  python3 - "$out" "$dir/variants.txt" <<'PY' | tee "$out/tune-q8x.md"
import json, os, sys
out, vfile = sys.argv[1], sys.argv[2]
rows = [l.strip().split("|") for l in open(vfile) if l.strip()]
table, shapes = {}, []
for name, typ, params, r, regs in rows:
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        continue
    for c in j["cases"]:
        rows_n = sum(int(x) for x in c["label"].split("N=")[1].split()[0].split("+"))
        if c["time_us"] <= 0 or rows_n < 1000:  # the full-size shapes only
            continue
        key = ("q4_k" if typ == "q4k_mma" else typ, c["label"])
        if key not in shapes: shapes.append(key)
        table[(name, key)] = (c["time_us"], c["gb_per_s"], c["ok"])
json.dump({f"{n}|{k[1]}": v for (n, k), v in table.items()}, open(os.path.join(out, "tune-q8x.json"), "w"), indent=1)
for typ in ("q4_k", "q8_0", "q6_k", "q4_1", "q5_0", "f16"):
    cols = [k for k in shapes if k[0] == typ]
    if not cols: continue
    print(f"\n{typ}: us (GB/s) per launch, buffers rotated over 512 MB, mean of 60")
    print("| variant | params | regs | " + " | ".join(k[1] for k in cols) + " | sum us |")
    print("|---|---|---|" + "---|" * len(cols) + "---|")
    for name, t, params, r, regs in rows:
        if ("q4_k" if t == "q4k_mma" else t) != typ: continue
        cells, tot = [], 0.0
        for k in cols:
            v = table.get((name, k))
            if v: tot += v[0]
            cells.append(f"{v[0]:.1f} ({v[1]:.0f}){'' if v[2] else ' FAIL'}" if v else "-")
        print(f"| {name} | {params} | {regs} | " + " | ".join(cells) + f" | {tot:.1f} |")
PY
  ;;
ncu)
  res=${OUT:-$dir/out}
  mkdir -p "$res"
  for name in "${@:3}"; do
    IFS='|' read -r _ type params rows regs < <(grep "^$name|" "$dir/variants.txt")
    SWZ_CHECK_Q8X_ROWS="$type:$rows" ncu --kernel-name "regex:$(entry_of "$type")" --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section Occupancy --section SchedulerStats --section LaunchStats \
      "$dir/bin/swz-ptx-check" --ptx-dir "$dir/$name" --filter "$([ "$type" = f16 ] && echo "T=1 N=18944 K=3584" || echo "T=1 N=18944+18944 K=3584")" --reps 1 \
      --peak-gbps 4250 --peak-tflops 60 --peak-tc-tflops 700 > "$res/ncu-$name.txt" 2>&1 || true
    ptxas -arch=sm_90 "$dir/$name/$(ptx_of "$type")" -o "/tmp/$name.cubin" &&
      cuobjdump -sass -fun "$(entry_of "$type")" "/tmp/$name.cubin" > "$res/sass-$name.txt" 2>&1 || true
    echo "== $name"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Issued Warp|No Eligible|L1/TEX Hit|Mem Busy|Max Bandwidth" "$res/ncu-$name.txt" | head -30
  done ;;
*) echo "usage: $0 prepare|run|ncu [build-dir]" >&2; exit 2 ;;
esac
