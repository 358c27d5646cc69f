#!/usr/bin/env bash
# Tuning the int8 decode GEMVs (matmul_<type>_q8x, codegen/kernels/gemv_q8x.mlir) on the
# GPU: variants of gen_quant_kernels.py's Q8X parameters (units a block, units in flight a
# thread, workgroups an SM the registers allow, warps a row), each checked against the
# float64 references and timed on the real decode shapes of Qwen2.5-Coder-7B (Q4_K) and
# Qwen3-0.6B (Q8_0) with the L2 flushed before every launch (weights from HBM, as in a
# decode step), by the case runner swz-ptx-check.
#
#   bench/tune_q8x.sh prepare [build-dir]   # here: variant PTX + a static swz-ptx-check
#                                           # into <build-dir>/gpu-tune (carry it)
#   bench/tune_q8x.sh run [build-dir]       # there: $OUT/tune-q8x.md and .json, the
#                                           # per-variant logs in $OUT/tune-logs.tgz
#
# A variant is "name|type|gen_quant_kernels.py --variant parameters|rows a workgroup"
# (rows = 4 / warps a row; the case runner launches that grid: SWZ_CHECK_Q8X_ROWS). The
# first variant of each type is what the repository ships (Q4_K's units are 32-weight
# sub-blocks, 8 a block; Q8_0's 16 weights, 2 a block).
set -euo pipefail
mode=${1:?usage: $0 prepare|run [build-dir]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-tune
VARIANTS=(
  "q4k-p8r1m8|q4_k|units=8,unroll=1,minctasm=8,wpr=1|4"
  "q4k-p8r1m8w2|q4_k|units=8,unroll=1,minctasm=8,wpr=2|2"
  "q4k-p8r2m8|q4_k|units=8,unroll=2,minctasm=8,wpr=1|4"
  "q4k-p8r2m8w2|q4_k|units=8,unroll=2,minctasm=8,wpr=2|2"
  "q4k-p8r2m6w2|q4_k|units=8,unroll=2,minctasm=6,wpr=2|2"
  "q4k-p8r3m5|q4_k|units=8,unroll=3,minctasm=5,wpr=1|4"
  "q80-u2r3m8|q8_0|units=2,unroll=3,minctasm=8,wpr=1|4"
  "q80-u2r3m8w2|q8_0|units=2,unroll=3,minctasm=8,wpr=2|2"
  "q80-u2r1m8w4|q8_0|units=2,unroll=1,minctasm=8,wpr=4|1"
)
case $mode in
prepare)
  export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
  rm -rf "$dir" && mkdir -p "$dir/bin"
  g++ -std=c++20 -O2 -I"$CUDA_ROOT/include" -I"$src/test/gpu" -I"$src" "$src"/test/gpu/ptx_check.cpp \
    "$src"/test/gpu/cases*.cpp -o "$dir/bin/swz-ptx-check" -L"$CUDA_ROOT/lib64/stubs" -lcuda \
    -static-libstdc++ -static-libgcc
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name type params rows <<< "$v"
    mkdir -p "$dir/$name"
    python3 "$src/codegen/kernels/gen_quant_kernels.py" --variant "$type:$params" --out "$dir/$name/v.mlir"
    "$build/compiler/tools/swizzle-opt" "$dir/$name/v.mlir" -swz-materialize-swizzle \
      -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
      -swz-extract-kernels=output-dir="$dir/$name" -o /dev/null 2> /dev/null
    rm "$dir/$name/v.mlir"
    regs=$("$CUDA_ROOT/bin/ptxas" -arch=sm_90 -v "$dir/$name/swz_gemv_q8x.ptx" -o /dev/null 2>&1 |
           grep -A3 "entry function 'matmul_${type}_q8x'" | tr '\n' ' ' |
           sed -E 's/.* ([0-9]+) bytes spill stores.* Used ([0-9]+) registers.*/\2 registers, \1 B spilled/')
    echo "$name|$type|$params|$rows|$regs" >> "$dir/variants.txt"
    printf '%-16s %s\n' "$name" "$regs"
  done
  du -sh "$dir" ;;
run)
  res=${OUT:-$dir/out}
  out=/tmp/swz-tune  # per-variant logs and JSON (a call returns 8 files): packed at the end
  mkdir -p "$res" "$out"
  trap 'tar -czf "$res/tune-logs.tgz" -C "$out" . ; cp "$out"/tune-q8x.* "$res/" 2>/dev/null' EXIT
  while IFS='|' read -r name type params rows regs; do
    SWZ_CHECK_Q8X_ROWS="$type:$rows" "$dir/bin/swz-ptx-check" --ptx-dir "$dir/$name" --filter "matmul_${type}_q8x T=" \
      --reps 30 --flush-l2 256 --peak-gbps 4250 --json "$out/$name.json" > "$out/$name.log" 2>&1 || true
    echo "== $name ($params, $regs)"; grep -E "^(ok|FAIL)" "$out/$name.log" | sed -E 's/: max \|err\|.*\); / /' | cut -c1-140
  done < "$dir/variants.txt"
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
        key = (typ, c["label"])
        if key not in shapes: shapes.append(key)
        table[(name, key)] = (c["time_us"], c["gb_per_s"], c["ok"])
json.dump({f"{n}|{k[1]}": v for (n, k), v in table.items()}, open(os.path.join(out, "tune-q8x.json"), "w"), indent=1)
for typ in ("q4_k", "q8_0"):
    cols = [k for k in shapes if k[0] == typ]
    if not cols: continue
    print(f"\n{typ}: us (GB/s) per launch, L2 flushed, mean of 30")
    print("| variant | params | regs | " + " | ".join(k[1] for k in cols) + " | sum us |")
    print("|---|---|---|" + "---|" * len(cols) + "---|")
    for name, t, params, r, regs in rows:
        if t != typ: continue
        cells, tot = [], 0.0
        for k in cols:
            v = table.get((name, k))
            if v: tot += v[0]
            cells.append(f"{v[0]:.1f} ({v[1]:.0f}){'' if v[2] else ' FAIL'}" if v else "-")
        print(f"| {name} | {params} | {regs} | " + " | ".join(cells) + f" | {tot:.1f} |")
PY
  ;;
*) echo "usage: $0 prepare|run [build-dir]" >&2; exit 2 ;;
esac
