#!/usr/bin/env bash
# Tuning the PTX decode attention (flash_decode_f16kv_hd128, codegen/kernels/
# attention_decode.mlir) on the GPU: variants of gen_quant_kernels.py's DEC_* parameters
# (warps a workgroup, keys a warp in flight, workgroups an SM the registers must allow),
# each checked against the float64 references of test/gpu/cases_attention.cpp and timed
# (buffers rotated over 512 MB, mean of 60) by the case runner swz-ptx-check on a decode
# step of 1, 8 and 32 sequences at a 640-token context, at the Qwen2.5-7B (28/4 heads) and
# Qwen3-0.6B (16/8) shapes, with the decode records' 16 splits at most and with 32 and 8
# (SWZ_CHECK_ATTN_TIMING=1: the max_splits rows say what a change of kDecodeMaxSplits in
# compiler/driver/launch_bindings.cpp would do).
#
#   bench/tune_attention.sh prepare [build-dir]   # here: variant PTX into
#                                                 # <build-dir>/gpu-attn (carry it)
#   bench/tune_attention.sh run [build-dir]       # there: $OUT/tune-attention.md, .json
set -euo pipefail
mode=${1:?usage: $0 prepare|run [build-dir]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-attn
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
# shellcheck source=bench/ptx_tune_lib.sh
. "$src/bench/ptx_tune_lib.sh"
# name | gen_quant_kernels.py --variant attn: parameters (the first: what ships)
VARIANTS=(
  "ship|"
  "w4|warps=4"
  "w4u2|warps=4,unroll=2"
  "u2|unroll=2"
  "m2|minctasm=2"
  "w4m3|warps=4,minctasm=3"
)
case $mode in
prepare)
  rm -rf "$dir" && mkdir -p "$dir/bin"
  build_ptx_check "$dir/bin/swz-ptx-check"
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name params <<< "$v"
    mkdir -p "$dir/$name"
    python3 "$src/codegen/kernels/gen_quant_kernels.py" --variant "attn:$params" --out "$dir/$name/v.mlir"
    compile_ptx "$dir/$name/v.mlir" "$dir/$name"
    rm "$dir/$name/v.mlir"
    regs=$(ptx_regs "$dir/$name/swz_attention_decode.ptx" flash_decode_f16kv_hd128)
    echo "$name|$params|$regs" >> "$dir/variants.txt"
    printf '%-8s %-28s %s\n' "$name" "$params" "$regs"
  done
  du -sh "$dir" ;;
run)
  res=${OUT:-$dir/out}
  out=/tmp/swz-tune-attn
  mkdir -p "$res" "$out"
  trap 'tar -czf "$res/tune-attention-logs.tgz" -C "$out" . ; cp "$out"/tune-attention.* "$res/" 2>/dev/null' EXIT
  while IFS='|' read -r name params regs; do
    warps=$(echo "$params" | sed -nE 's/.*warps=([0-9]+).*/\1/p')
    SWZ_CHECK_DEC_WARPS=${warps:-8} SWZ_CHECK_ATTN_TIMING=1 "$dir/bin/swz-ptx-check" --ptx-dir "$dir/$name" --filter "flash_decode_f16kv_hd128 " \
      --reps 60 --rotate 512 --peak-gbps 4250 --json "$out/$name.json" > "$out/$name.log" 2>&1 || true
    echo "== $name ($params; $regs): $(grep -c '^ok' "$out/$name.log") ok, $(grep -c '^FAIL' "$out/$name.log") failed"
  done < "$dir/variants.txt"
  python3 - "$out" "$dir/variants.txt" <<'PY' | tee "$out/tune-attention.md"
import json, os, sys
out, vfile = sys.argv[1], sys.argv[2]
rows = [l.rstrip("\n").split("|") for l in open(vfile) if l.strip()]
table, shapes = {}, []
for name, params, regs in rows:
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        continue
    for c in j["cases"]:
        if "/639" not in c["label"]:  # the timing cases only
            continue
        if c["label"] not in shapes: shapes.append(c["label"])
        table[(name, c["label"])] = (c["time_us"], c["ok"])
json.dump({f"{n}|{k}": v for (n, k), v in table.items()}, open(os.path.join(out, "tune-attention.json"), "w"), indent=1)
print("us a launch (mean of 60, buffers rotated over 512 MB); rows: sequences, heads, max_splits")
print("| case | " + " | ".join(f"{n} ({p or 'shipped'}; {r})" for n, p, r in rows) + " |")
print("|---|" + "---|" * len(rows))
for k in shapes:
    short = k.split(" sequences")[0] + " seq, " + k.split("heads=")[1]
    cells = []
    for n, _, _ in rows:
        v = table.get((n, k))
        cells.append(f"{v[0]:.1f}{'' if v[1] else ' FAIL'}" if v else "-")
    print(f"| {short} | " + " | ".join(cells) + " |")
PY
  ;;
*) echo "usage: $0 prepare|run [build-dir]" >&2; exit 2 ;;
esac
