#!/usr/bin/env bash
# Tuning the prefill GEMM's tile schedule on the GPU: gemm_f16.mlir is a tile spec, so
# each candidate is an edit of compiler/schedules/sm_90.json's "gemm" entry (tile_m /
# tile_n / tile_k, warps, stages, swizzle, mma: mma.sync or wgmma) and swz-lower-tiles
# generates its kernel (compiler/mlir/LowerTiles.cpp). Every candidate is checked against
# the float64 references of test/gpu/cases_gemm.cpp, compared bitwise with the shipped
# kernel's outputs (the runner's output_fnv1a digests) and timed (buffers rotated over 512
# MB, mean of 20) by the case runner swz-ptx-check at Qwen2.5-Coder-7B's pp512 shapes
# (SWZ_GEMM_TIMING_CASES=1: q/o 3584 x 3584, gate/up 18944 x 3584, down 3584 x 18944),
# with SWZ_GEMM_TILE giving the runner each candidate's launch shape. Beside them, in the
# same call: the shipped sm_90 prefill attention (flash_attention_f16kv_mma_hd128, an 8k
# prompt in one pass at the 7B and Qwen3-0.6B head shapes, SWZ_CHECK_ATTN_PREFILL_TIMING=1)
# and PyTorch's cuBLAS GEMM and SDPA flash attention at the same shapes with the dense f16
# peak (an 8192^3 matmul), when torch is installed.
#
#   bench/tune_gemm.sh prepare [build-dir]   # here: candidate schedules and PTX into
#                                            # <build-dir>/gpu-gemm (carry it)
#   bench/tune_gemm.sh run [build-dir]       # there: $OUT/tune-gemm.md, .json
#   bench/tune_gemm.sh write NAME [build-dir] # here: NAME's gemm entry into sm_90.json
#   bench/tune_gemm.sh write-class NAME CLASS BOUNDS [build-dir]
#                                            # here: NAME's fields as gemm.classes' CLASS
#                                            # (BOUNDS: JSON of n_min/n_max/k_min/k_max)
set -euo pipefail
mode=${1:?usage: $0 prepare|run [build-dir] | write NAME [build-dir]}
if [ "$mode" = write ]; then
  name=${2:?usage: $0 write NAME [build-dir]}
  build=${3:-build}
elif [ "$mode" = write-class ]; then
  name=${2:?usage: $0 write-class NAME CLASS BOUNDS [build-dir]}
  class=${3:?usage: $0 write-class NAME CLASS BOUNDS [build-dir]}
  bounds=${4:?usage: $0 write-class NAME CLASS BOUNDS [build-dir]}
  build=${5:-build}
else
  build=${2:-build}
fi
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-gemm
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
# shellcheck source=bench/ptx_tune_lib.sh
. "$src/bench/ptx_tune_lib.sh"
# name | gemm fields replacing sm_90.json's (JSON; the first: what ships, one warpgroup of
# wgmma.m64n64k16 on 64x64x64 tiles, 3 stages). "wf": one wgmma group in flight
# (mma_in_flight 1). Tiles over the
# static 48 KiB get dynamic shared memory (swz-dynamic-smem).
MS='"mma": "mma.sync.m16n8k16"'
VARIANTS=(
  "ship|{}"
  "mma64x64x64w4s3|{$MS}"
  "wf64x64s3|{\"mma_in_flight\": 1}"
  "wf64x64s4|{\"stages\": 4, \"mma_in_flight\": 1}"
  "wf128x64s4|{\"tile_m\": 128, \"warps\": 8, \"stages\": 4, \"mma_in_flight\": 1}"
  "wf64x128s4|{\"tile_n\": 128, \"stages\": 4, \"mma\": \"wgmma.m64n128k16\", \"mma_in_flight\": 1}"
  "wg128x128s3|{\"tile_m\": 128, \"tile_n\": 128, \"warps\": 8, \"stages\": 3, \"mma\": \"wgmma.m64n128k16\"}"
  "wf128x128s4|{\"tile_m\": 128, \"tile_n\": 128, \"warps\": 8, \"stages\": 4, \"mma\": \"wgmma.m64n128k16\", \"mma_in_flight\": 1}"
  "wf128x256s3|{\"tile_m\": 128, \"tile_n\": 256, \"warps\": 8, \"stages\": 3, \"mma\": \"wgmma.m64n256k16\", \"mma_in_flight\": 1}"
  "wf256x128s3|{\"tile_m\": 256, \"tile_n\": 128, \"warps\": 16, \"stages\": 3, \"mma\": \"wgmma.m64n128k16\", \"mma_in_flight\": 1}"
)
# (The twenty-second session also timed mma.sync 128x128x32 on 8 and 4 warps, 3 and 2
# stages, 64x128x32, 128x256x32, 256x128x32, 64x64x32, 128x64x64 and 128x64x32, and wgmma
# 128x64 / 64x128 on 2 stages and 64x32 on 4, all within 48 KiB: bench/RESULTS.md.)
# schedule_for PATCH OUT: sm_90.json with PATCH merged into its "gemm" entry.
schedule_for() {
  python3 - "$src/compiler/schedules/sm_90.json" "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["gemm"].update(json.loads(sys.argv[2]))
# wgmma needs the architecture-specific target sm_90a; mma.sync runs on any sm_90 and up.
s["device"]["arch"] = "sm_90a" if s["gemm"]["mma"].startswith("wgmma") else "sm_90"
json.dump(s, open(sys.argv[3], "w"), indent=2)
PY
}
case $mode in
prepare)
  rm -rf "$dir" && mkdir -p "$dir/bin"
  build_ptx_check "$dir/bin/swz-ptx-check"
  mkdir -p "$dir/attn"
  compile_ptx "$src/codegen/kernels/attention_f16kv_mma.mlir" "$dir/attn" "$src/compiler/schedules/sm_90.json" sm_90a
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name patch <<< "$v"
    mkdir -p "$dir/$name"
    schedule_for "$patch" "$dir/$name/sm_90.json"
    chip=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['arch'])" "$dir/$name/sm_90.json")
    compile_ptx "$src/codegen/kernels/gemm_f16.mlir" "$dir/$name" "$dir/$name/sm_90.json" "$chip"
    tile=$(python3 -c "import json,sys; g=json.load(open(sys.argv[1]))['gemm']; print(f\"{g['tile_m']}x{g['tile_n']}x{32 * g['warps']}\")" "$dir/$name/sm_90.json")
    # The kernel's dynamic shared memory (swz.dynamic_smem), the runner's fourth field.
    dyn=$("$build/compiler/tools/swizzle-opt" "$src/codegen/kernels/gemm_f16.mlir" \
      -swz-apply-schedule=schedule="$dir/$name/sm_90.json" -swz-lower-tiles |
      sed -n 's/.*swz.dynamic_smem = "\([0-9]*\)".*/\1/p')
    [ -n "$dyn" ] && tile="${tile}x$dyn"
    regs=$(ptx_regs "$dir/$name/swz_gemm_f16.ptx" gemm_f16)
    echo "$name|$tile|$regs" >> "$dir/variants.txt"
    printf '%-16s %-12s %s\n' "$name" "$tile" "$regs"
  done
  du -sh "$dir" ;;
run)
  res=${OUT:-$dir/out}
  out=/tmp/swz-tune-gemm
  mkdir -p "$res" "$out"
  trap 'tar -czf "$res/tune-gemm-logs.tgz" -C "$out" . ; cp "$out"/tune-gemm.* "$res/" 2>/dev/null' EXIT
  while IFS='|' read -r name tile regs; do
    SWZ_GEMM_TIMING_CASES=1 SWZ_GEMM_TILE=$tile "$dir/bin/swz-ptx-check" --ptx-dir "$dir/$name" \
      --filter "gemm_f16 " --reps 20 --rotate 512 --peak-gbps 4250 --json "$out/$name.json" > "$out/$name.log" 2>&1 || true
    echo "== $name ($tile; $regs): $(grep -c '^ok' "$out/$name.log") ok, $(grep -c '^FAIL' "$out/$name.log") failed"
  done < "$dir/variants.txt"
  SWZ_CHECK_ATTN_PREFILL_TIMING=1 "$dir/bin/swz-ptx-check" --ptx-dir "$dir/attn" \
    --filter "flash_attention_f16kv_mma_hd128 T=8192" --reps 10 --rotate 512 --peak-gbps 4250 \
    --json "$out/attention.json" > "$out/attention.log" 2>&1 || true
  echo "== prefill attention: $(grep -c '^ok' "$out/attention.log") ok, $(grep -c '^FAIL' "$out/attention.log") failed"
  python3 - > "$out/torch.json" 2> "$out/torch.log" <<'PY' || true
import json, sys, traceback, torch
import torch.nn.functional as F
def timed(f, n=20):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); [f() for _ in range(n)]; e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / n
r = {"device": torch.cuda.get_device_name()}
def section(name, f):  # one failing section (an old torch, no flash backend) loses only itself
    try:
        f()
    except Exception:
        r[name + "_error"] = traceback.format_exc(limit=2)
def peak():
    a = torch.randn(8192, 8192, dtype=torch.float16, device="cuda"); b = torch.randn_like(a)
    r["f16_tflops_8192"] = 2 * 8192**3 / timed(lambda: a @ b) / 1e12
def cublas():
    for n, k in ((3584, 3584), (18944, 3584), (3584, 18944)):
        x = torch.randn(512, k, dtype=torch.float16, device="cuda")
        w = torch.randn(n, k, dtype=torch.float16, device="cuda")
        t = timed(lambda: x @ w.t())
        r[f"cublas T=512 N={n} K={k}"] = {"us": t * 1e6, "tflops": 2 * 512 * n * k / t / 1e12}
def sdpa():
    import torch.nn.attention as A
    # K and V with every query head (no GQA): the same FLOPs, K/V traffic does not bound it.
    for h in (28, 16):
        q = torch.randn(1, h, 8192, 128, dtype=torch.float16, device="cuda")
        k_ = torch.randn_like(q); v = torch.randn_like(q)
        with A.sdpa_kernel(A.SDPBackend.FLASH_ATTENTION):
            t = timed(lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=True), 10)
        flops = 4.0 * 8192 * 8193 / 2 * h * 128
        r[f"sdpa_flash causal T=8192 heads={h} hd=128"] = {"us": t * 1e6, "tflops": flops / t / 1e12}
for name, f in (("peak", peak), ("cublas", cublas), ("sdpa", sdpa)):
    section(name, f)
print(json.dumps(r, indent=1))
PY
  cat "$out/torch.json"; grep -h '^\(ok\|FAIL\)' "$out/attention.log" || tail -5 "$out/attention.log"
  python3 - "$out" "$dir/variants.txt" <<'PY' | tee "$out/tune-gemm.md"
import json, os, sys
out, vfile = sys.argv[1], sys.argv[2]
rows = [l.rstrip("\n").split("|") for l in open(vfile) if l.strip()]
table, shapes, oks, peak, digests = {}, [], {}, None, {}
for name, tile, regs in rows:
    try:
        j = json.load(open(os.path.join(out, name + ".json")))
    except (OSError, ValueError):
        continue
    peak = peak or {"device": j.get("device"), "tensor_core_tflops": j.get("peak_tensor_core_tflops")}
    oks[name] = all(c["ok"] for c in j["cases"])
    digests[name] = {c["label"]: c.get("output_fnv1a") for c in j["cases"]}
    for c in j["cases"]:
        if not c["label"].startswith("T=512 "):
            continue
        if c["label"] not in shapes: shapes.append(c["label"])
        flops = 2.0 * 512 * float(c["label"].split("N=")[1].split()[0]) * float(c["label"].split("K=")[1].split()[0])
        table[(name, c["label"])] = (c["time_us"], c["ok"], flops / c["time_us"] / 1e6)
tc = (peak or {}).get("tensor_core_tflops") or 0
# Bitwise the shipped kernel's y on every case (the first variant is what ships)?
ship = rows[0][0]
same = {n: bool(digests.get(n)) and digests.get(n) == digests.get(ship) for n, _, _ in rows}
json.dump({"peaks": peak, "rows": {f"{n}|{k}": v for (n, k), v in table.items()},
           "all_cases_ok": oks, "bitwise_shipped": same},
          open(os.path.join(out, "tune-gemm.json"), "w"), indent=1)
print("bitwise the shipped kernel's outputs on all cases: " +
      ", ".join(f"{n} {'yes' if same[n] else 'NO'}" for n, _, _ in rows))
print(f"us a launch (mean of 20, buffers rotated over 512 MB), TFLOP/s and its share of the measured "
      f"mma.sync f16 peak; {peak}")
print("| case | " + " | ".join(f"{n} ({r}){'' if oks.get(n) else ' FAIL'}" for n, _, r in rows) + " |")
print("|---|" + "---|" * len(rows))
for k in shapes:
    cells = []
    for n, _, _ in rows:
        v = table.get((n, k))
        frac = f" ({100 * v[2] / tc:.0f}%)" if tc else ""
        cells.append(f"{v[0]:.0f} us {v[2]:.0f} TF{frac}{'' if v[1] else ' FAIL'}" if v else "-")
    print(f"| {k} | " + " | ".join(cells) + " |")
PY
  ;;
write)
  # The winner's gemm fields into the shipped schedule (the file is rewritten as indented JSON).
  v=$(printf '%s\n' "${VARIANTS[@]}" | grep "^$name|") || { echo "no candidate $name" >&2; exit 2; }
  patch=${v#*|}
  python3 - "$src/compiler/schedules/sm_90.json" "$patch" <<'PY'
import json, sys
path, patch = sys.argv[1], json.loads(sys.argv[2])
s = json.load(open(path))
s["gemm"].update(patch)
s["device"]["arch"] = "sm_90a" if s["gemm"]["mma"].startswith("wgmma") else "sm_90"
json.dump(s, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
  echo "wrote $name's gemm entry into compiler/schedules/sm_90.json" ;;
write-class)
  # The candidate's fields as one shape class (replacing a class of that name).
  v=$(printf '%s\n' "${VARIANTS[@]}" | grep "^$name|") || { echo "no candidate $name" >&2; exit 2; }
  patch=${v#*|}
  python3 - "$src/compiler/schedules/sm_90.json" "$patch" "$class" "$bounds" <<'PY'
import json, sys
path, patch, name, bounds = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
s = json.load(open(path))
mma = patch.get("mma", s["gemm"]["mma"])
if mma.startswith("wgmma") != s["gemm"]["mma"].startswith("wgmma"):
    sys.exit(f"{name}: {mma} and the base entry's {s['gemm']['mma']} need different device.arch")
classes = [c for c in s["gemm"].get("classes", []) if c["name"] != name]
classes.append({"name": name, **bounds, **patch})
s["gemm"]["classes"] = classes
json.dump(s, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
  echo "wrote $name's fields as gemm class $class into compiler/schedules/sm_90.json" ;;
*) echo "usage: $0 prepare|run [build-dir] | write NAME [build-dir] | write-class NAME CLASS BOUNDS [build-dir]" >&2; exit 2 ;;
esac
