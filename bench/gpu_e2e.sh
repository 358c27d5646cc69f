#!/usr/bin/env bash
# GPU packages end to end on an NVIDIA GPU (the lent H200): the checks of the
# GPU-execution issue, in one call on the GPU machine.
#
#   bench/gpu_e2e.sh prepare [build-dir]   # here (swizzlec compile --target sm_90 needs MLIR)
#   bench/gpu_e2e.sh run [build-dir] [smoke|models|pytest|racecheck|all]   # on the GPU machine (no MLIR, no network)
#
# (run's last argument splits the work over calls of the 10-minute limit: smoke = one
# model, 2 prompts x 8 tokens; models = every model's checks (racecheck on the first);
# pytest = the engine's tests against swizzle-rt serve; racecheck = racecheck of the
# other models (minutes each); all, the default, = models then pytest.)
#
# Models: random-weight GGUFs of the real shapes (`swizzlec synth`, fixed seeds: weights
# are a pure function of the seed), SmolLM2-135M with the real SmolLM2 tokenizer and chat
# template (copied from the default model into a tensor-less GGUF, so chat requests
# work), Qwen2.5-Coder-0.5B (Q4_K with the Q5_0 fallback of the real Q4_K_M for widths
# that are not a multiple of 256) and Qwen3-0.6B. The real weights are too large to carry
# (64 MiB a call); a random-weight model of the same shape runs the same kernels.
#
# prepare writes <build-dir>/gpu-e2e/: portable binaries from an MLIR-free build in
# <build-dir>-lite (swizzle-rt with its lib/, swizzlec for synth, swz-backend-compare,
# swz-spec-check, swz-backend-check: static libstdc++, libcuda dlopen'ed), each model's
# cpu and sm_90 packages (compiled here from GGUFs it synthesises and deletes again), the
# tokenizer GGUF, and wheels of the SDK tests' clients. Carry <build-dir>/gpu-e2e.
#
# run writes the same GGUFs again at the path the packages recorded (this checkout's
# path, linked to the copy on the GPU machine), then per model: swz-backend-compare
# (greedy tokens of 8 prompts x 64 against the cpu backend, logits within the stated
# bound; device argmax against the host's; batch invariance, reported), swz-backend-check
# (kernels through the backend, offset arguments), compute-sanitizer memcheck (racecheck
# on the first model) on one prefill and one decode step, swz-bench pp512/tg128; on the
# SmolLM2-shaped model also the prefix-cache exactness, speculative identity and openai /
# anthropic SDK tests against `swizzle-rt serve` of its sm_90 package. Logs and JSON go to
# $OUT (or <build-dir>/gpu-e2e/out); a summary table is printed last.
set -uo pipefail
mode=${1:?usage: $0 prepare|run [build-dir]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-e2e
# name | synth arguments (VOCAB: the SmolLM2 tokenizer GGUF)
MODELS=(
  "smollm2-135m-q4_1|--preset smollm2-135m --type q4_1 --seed 3 --vocab-from VOCAB"
  "qwen2.5-coder-0.5b-q4_k|--preset qwen2.5-coder-0.5b --type q4_k --seed 2"
  "qwen3-0.6b-q8_0|--preset qwen3-0.6b --type q8_0 --seed 1"
)
synth() {  # synth SWIZZLEC MODEL-LINE OUT-DIR: writes OUT-DIR/<name>.gguf
  local args=${2#*|}
  # shellcheck disable=SC2086
  "$1" synth ${args//VOCAB/$3/vocab-smollm2.gguf} -o "$3/${2%%|*}.gguf" >/dev/null
}
case $mode in
prepare)
  set -e
  lite=$build-lite
  [ -f "$lite/build.ninja" ] || cmake -S "$src" -B "$lite" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSWZ_BUILD_COMPILER=OFF >/dev/null
  cmake --build "$lite" --target swizzlec swizzle-rt swz-bench swz-backend-compare swz-spec-check swz-backend-check
  cmake --build "$build" --target swizzlec
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/models" "$dir/wheels" "$dir/test/tools"
  cp -a "$lite/server/swizzle-rt" "$lite/server/lib" "$lite/compiler/swizzlec" "$lite/bench/swz-bench" "$lite/test/tools/swz-backend-compare" \
        "$lite/runtime/backend/swz-backend-check" "$dir/bin/"
  cp -a "$lite/test/tools/swz-spec-check" "$dir/test/tools/"  # where test_speculative.py looks (SWZ_BUILD_DIR)
  "$src/.venv/bin/python" - "$("$src/scripts/default-model-path.sh")" "$dir/models/vocab-smollm2.gguf" <<'PY'
import sys, gguf
src, dst = gguf.GGUFReader(sys.argv[1]), sys.argv[2]
w = gguf.GGUFWriter(dst, arch=None)
for name, f in src.fields.items():
    if name.startswith("tokenizer."):
        v = f.contents()
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            w.add_array(name, v)
        else:
            w.add_key_value(name, v, t)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
  for m in "${MODELS[@]}"; do
    name=${m%%|*}
    synth "$build/compiler/swizzlec" "$m" "$dir/models"
    for t in cpu sm_90; do "$build/compiler/swizzlec" compile "$dir/models/$name.gguf" --target $t -o "$dir/models/$name-$t.swz" >/dev/null; done
    rm "$dir/models/$name.gguf"
  done
  # The SDKs of requirements.txt and their dependencies, for the GPU machine's Python 3.12.
  # shellcheck disable=SC2046
  "$src/.venv/bin/python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir/wheels" \
    $(grep -E '^(openai|anthropic)==' "$src/requirements.txt")
  realpath "$dir" > "$dir/ORIGIN"
  du -sh "$dir" ;;
run)
  what=${3:-all}
  out=${OUT:-$dir/out}
  mkdir -p "$out"
  here=$(realpath "$dir")
  origin=$(cat "$dir/ORIGIN")
  if [ "$origin" != "$here" ]; then mkdir -p "$(dirname "$origin")" && ln -sfn "$here" "$origin"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
  bin=$here/bin
  for m in "${MODELS[@]}"; do [ -f "$here/models/${m%%|*}.gguf" ] || synth "$bin/swizzlec" "$m" "$here/models"; done
  declare -a summary
  step() {  # step NAME CMD...: runs CMD, logs to $out/NAME.log, records pass/FAIL
    local name=$1; shift
    local t0=$SECONDS
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-44s %s (%ds)' "$name" "$([ $rc = 0 ] && echo pass || echo "FAIL rc=$rc")" $((SECONDS - t0)))")
    tail -n 15 "$out/$name.log"
  }
  if [ "$what" = smoke ]; then
    name=${MODELS[0]%%|*}
    step "$name.smoke" "$bin/swz-backend-compare" "$here/models/$name-cpu.swz" "$here/models/$name-sm_90.swz" -n 8 --prompts 2
  fi
  if [ "$what" = models ] || [ "$what" = all ]; then
    for m in "${MODELS[@]}"; do
      name=${m%%|*}
      cpu=$here/models/$name-cpu.swz gpu=$here/models/$name-sm_90.swz
      step "$name.compare" "$bin/swz-backend-compare" "$cpu" "$gpu" -n 64 --prompts 8 --json "$out/compare-$name.json"
      step "$name.backend-check" "$bin/swz-backend-check" "$gpu"
      step "$name.memcheck" compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/swz-backend-compare" "$cpu" "$gpu" -n 2 --prompts 1
      # racecheck takes minutes a model (shared-memory instrumentation): the first model only.
      [ "$m" = "${MODELS[0]}" ] && step "$name.racecheck" compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$bin/swz-backend-compare" "$cpu" "$gpu" -n 2 --prompts 1
      # Where speed stands before the performance work (pp512 / tg128, medians of 3).
      step "$name.bench" "$bin/swz-bench" "$gpu" --pp 512 --tg 128 --reps 3
    done
  fi
  if [ "$what" = racecheck ]; then
    for m in "${MODELS[@]:1}"; do
      name=${m%%|*}
      step "$name.racecheck" compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$bin/swz-backend-compare" "$here/models/$name-cpu.swz" "$here/models/$name-sm_90.swz" -n 2 --prompts 1
    done
  fi
  if [ "$what" = pytest ] || [ "$what" = all ]; then
    # The engine's own tests against `swizzle-rt serve` of the SmolLM2-shaped sm_90 package.
    first=${MODELS[0]%%|*}
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$here"/wheels/*.whl && export PYTHONPATH=/tmp/site
    export SWZ_RT=$bin/swizzle-rt SWZ_PACKAGE=$here/models/$first-sm_90.swz SWZ_BUILD_DIR=$here SWZ_REQUIRE=1
    # test_gpu_execution.py on the sm_90 package: op-by-op conformance, greedy tokens, serve.
    export SWZ_E2E_CPU_PACKAGE=$here/models/$first-cpu.swz SWZ_E2E_GPU_PACKAGE=$SWZ_PACKAGE
    export SWZ_BACKEND_COMPARE=$bin/swz-backend-compare
    step "pytest-engine" python3 -m pytest -q -p no:cacheprovider "$src/test/python/test_prefix_cache.py" \
      "$src/test/python/test_speculative.py" -k "not batch_invariance and not fake" \
      "$src/test/python/test_openai_sdk.py" "$src/test/python/test_anthropic_sdk.py" "$src/test/python/test_gpu_execution.py"
  fi
  printf '\n== summary (%s)\n' "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  ! grep -q FAIL "$out/summary.txt" ;;
*) echo "usage: $0 prepare|run [build-dir]" >&2; exit 2 ;;
esac
