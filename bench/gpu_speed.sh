#!/usr/bin/env bash
# Speed on an NVIDIA GPU (the lent H200) against llama.cpp, same GGUF files, same run:
# the benchmark of the speed issue (#13), in two calls on the GPU machine.
#
#   bench/gpu_speed.sh prepare [build-dir]        # here (swizzlec compile needs MLIR)
#   bench/gpu_speed.sh run [build-dir] check      # there: starts llama.cpp's CUDA build
#                                                 # (in the background), writes the GGUFs,
#                                                 # checks correctness, waits for the build
#   bench/gpu_speed.sh run [build-dir] time [MODEL[,MODEL]]  # there, while warm: times
#                                                 # both engines (one model a call: a call
#                                                 # runs 10 minutes at most;
#                                                 # SWZ_SPEED_QUICK=1: pp512, tg128,
#                                                 # decode x1 and x8 only;
#                                                 # SWZ_SPEED_SEQS="1 8 32": those
#                                                 # aggregate decode rows;
#                                                 # with SWZ_SPEED_AB=1 or
#                                                 # SWZ_SPEED_AB_FROM=DIR at prepare:
#                                                 # A/B rows against a second package,
#                                                 # see prepare and SWZ_SPEED_AB_ARGS)
#   bench/gpu_speed.sh run [build-dir] ncu [MODEL[,MODEL]]  # there, while warm: profiles
#                                                 # the decode step (SWZ_NCU_DEPTH=D: at a
#                                                 # D-token context)
#   bench/gpu_speed.sh run [build-dir] ncu-prefill  # there, while warm: our 7B pp512 pass
#   bench/gpu_speed.sh run [build-dir] chunks [MODEL]  # there, while warm: chunked prefill
#                                                 # pass by pass (swz-bench --ubatch, the server)
#   bench/gpu_speed.sh run [build-dir] approx     # there, after check: the approx cache
#                                                 # mode on each model's sm_90 package
#                                                 # (engine test, both wire formats)
#   bench/gpu_speed.sh run [build-dir] concurrency [MODEL]  # there, while warm: the
#                                                 # servers side by side (swizzle-rt serve
#                                                 # against llama-server --parallel; issue 14)
#
# (several calls because a call may run 10 minutes; the machine keeps /tmp and the GGUFs
# while it stays warm between them. Carry <build-dir>/gpu-speed in the first call only:
# a carried path replaces the machine's copy, GGUFs and verdicts included.)
# prepare writes <build-dir>/gpu-speed/ (carry it): the MLIR-free binaries of
# bench/gpu_e2e.sh (swizzle-rt, swizzlec for synth, swz-bench, swz-backend-compare), the cpu
# and sm_90 packages of each model (compiled here from GGUFs synthesised here and deleted
# again), llama.cpp's source from the newest llama-cpp-python sdist on PyPI, trimmed to
# what a CUDA build of llama-bench, llama-batched-bench and llama-server needs (no models/, docs/,
# other backends, tests, examples but lookup, web UI), and the `gguf` wheel (weight bytes and FLOPs
# for the roofline).
#
# Our runtime is built here, not there: its Debian build dependencies (nlohmann-json,
# CLI11, Boost, libsodium, BLAKE3) are not on the GPU machine, which has no network;
# its binaries are static in libstdc++ and open libcuda at run time.
#
# check (first call): the GGUFs are written again at the paths the packages recorded
# (fixed seeds: the same bytes), then each model's greedy tokens on the sm_90 package are
# compared with the cpu backend's (swz-backend-compare: tokens equal up to a near-tie,
# logits within the stated bound). A model that fails is never timed: `time` reads the
# verdicts and skips it.
#
# time (second call, same machine): measures the H200's copy bandwidth and f16
# tensor-core peak (PyTorch), then per model, medians of 5 repetitions: pp512, tg128,
# warm TTFT of a 32k prompt edited at its end (the Qwen shapes),
# pp8192 (swz-bench; llama-bench -fa 1 -ngl 99), edit256 with prompt lookup on and off
# (swizzle-rt run; llama-lookup), tg128 with launch graphs off
# (SWZ_GRAPHS=0, ours only), aggregate decode of 1..32 sequences of 512+128 tokens
# (swz-bench --seqs; llama-batched-bench run as many times; medians of SWZ_SPEED_BATCH_REPS,
# default 5). Writes $OUT/speed.json
# ({"machine", "commit", "rows": [{"model", "test", "swizzle", "llama_cpp", ...}]}),
# every log, and prints the table (bench/gpu_speed_table.py).
#
# ncu (third call): decode launch by launch under Nsight Compute, ours and llama.cpp's,
# 7B and 0.6B shapes: per kernel and grid, per token: time, DRAM throughput, registers,
# occupancy (tables in logs.tgz as ncu-<engine>-<model>.md).
set -uo pipefail
mode=${1:?usage: $0 prepare|run [build-dir] [check|time|ncu]}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$build/gpu-speed
# name | synth arguments | compare prompts
# (synth arguments "real": the embedded default model, a real GGUF; see prepare). The 7B
# is llama.cpp's Q4_K_M mix (Q6_K LM head, attn_v and ffn_down in 14 of 28 layers), as
# the Q4_K_M files users run; until 2026-12-02 it was Q4_K throughout (bench/RESULTS.md's
# qwen2.5-coder-7b-q4_k rows). The F16 0.6B runs F16's tensor-core decode GEMV.
MODELS=(
  "smollm2-135m-q4_1|--preset smollm2-135m --type q4_1 --seed 3|4"
  "qwen3-0.6b-q8_0|--preset qwen3-0.6b --type q8_0 --seed 1|4"
  "qwen2.5-coder-7b-q4_k_m|--preset qwen2.5-coder-7b --type q4_k_m --seed 4|1"
  "smollm2-135m-instruct-q4_1|real|4"
  "qwen3-0.6b-f16|--preset qwen3-0.6b --type f16 --seed 1|4"
)
real_parts=$build/gpu-speed-real
synth() {  # synth SWIZZLEC MODEL-LINE OUT-DIR: writes (or for the real model, reassembles) the GGUF
  local rest=${2#*|} out=$3/${2%%|*}.gguf
  if [ "${rest%|*}" = real ]; then
    # The real model's parts, carried one a call (see prepare); complete or nothing.
    cat "$real_parts"/part-* > "$out.tmp" 2>/dev/null &&
      [ "$(sha256sum < "$out.tmp" | cut -d' ' -f1)" = "$(cat "$3/../REAL_SHA256" 2>/dev/null)" ] &&
      mv "$out.tmp" "$out" || { rm -f "$out.tmp"; return 1; }
    return 0
  fi
  # shellcheck disable=SC2086
  "$1" synth ${rest%|*} -o "$out" >/dev/null
}
# SWZ_SPEED_ONLY=NAME[,NAME]: prepare and check only these models (a shorter call).
only_model() { [ -z "${SWZ_SPEED_ONLY:-}" ] || [[ ",$SWZ_SPEED_ONLY," == *",$1,"* ]]; }
case $mode in
prepare)
  set -e
  lite=$build-lite
  [ -f "$lite/build.ninja" ] || cmake -S "$src" -B "$lite" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSWZ_BUILD_COMPILER=OFF >/dev/null
  cmake --build "$lite" --target swizzlec swizzle-rt swz-bench swz-backend-compare approx_test
  cmake --build "$build" --target swizzlec
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/models" "$dir/wheels"
  cp -a "$lite/server/swizzle-rt" "$lite/server/lib" "$lite/compiler/swizzlec" "$lite/bench/swz-bench" \
        "$lite/test/tools/swz-backend-compare" "$lite/test/unit/engine/approx_test" "$dir/bin/"
  # The real default model (98 MB) is over one call's carry (64 MiB with the rest): it
  # travels in three parts, <build-dir>/gpu-speed-real/part-0{0,1,2}, one carried a call
  # (the check call and the next two), reassembled on the machine and checked by sha256.
  real=$(bash "$src/scripts/default-model-path.sh")
  sha256sum < "$real" | cut -d' ' -f1 > "$dir/REAL_SHA256"
  rm -rf "$real_parts" && mkdir -p "$real_parts"
  split -d -a 2 -b 8M "$real" "$real_parts/part-tmp"
  # 8 MiB first (it rides with gpu-speed/ in the check call), then 48 MiB and the rest
  mv "$real_parts/part-tmp00" "$real_parts/part-00"
  cat "$real_parts"/part-tmp0[1-6] > "$real_parts/part-01" && rm "$real_parts"/part-tmp0[1-6]
  cat "$real_parts"/part-tmp* > "$real_parts/part-02"
  rm "$real_parts"/part-tmp*
  for m in "${MODELS[@]}"; do
    name=${m%%|*}
    only_model "$name" || continue
    synth "$build/compiler/swizzlec" "$m" "$dir/models"  # (the real model: from its parts, as there)
    for t in cpu sm_90; do "$build/compiler/swizzlec" compile "$dir/models/$name.gguf" --target $t -o "$dir/models/$name-$t.swz" >/dev/null; done
    # SWZ_SPEED_EXTRA_TARGETS="sm_86 sm_89": packages for older CUDA targets too (all but
    # the 7B shape), which `check` runs on this GPU through the driver's PTX JIT against
    # the cpu backend (the targets' code paths, not their hardware).
    [ "$name" = "${MODELS[2]%%|*}" ] || for t in ${SWZ_SPEED_EXTRA_TARGETS:-}; do
      "$build/compiler/swizzlec" compile "$dir/models/$name.gguf" --target "$t" -o "$dir/models/$name-$t.swz" >/dev/null
    done
    # The other side of `time`'s A/B rows, <name>-sm_90-ab.swz: SWZ_SPEED_AB_FROM=DIR
    # copies DIR/<name>-sm_90.swz (e.g. an earlier commit's packages: same GGUF paths);
    # SWZ_SPEED_AB=1 compiles this commit with the compile-time switch in
    # SWZ_SPEED_AB_ENV (default SWZ_FOLD_QUANTIZE=0: no folded quantize launches;
    # SWZ_FUSE_QK=0: RoPE on q and the head norms as their own launches;
    # SWZ_FUSE_RESIDUAL=0: residual adds as add_f32 launches), or with the
    # tile schedules of SWZ_SPEED_AB_SCHEDULE_DIR (swizzlec --schedule-dir: e.g. an
    # sm_90.json with gemv.q4_k_mma false, the dp4a Q4_K GEMV).
    if [ -n "${SWZ_SPEED_AB_FROM:-}" ]; then
      cp -a "$SWZ_SPEED_AB_FROM/$name-sm_90.swz" "$dir/models/$name-sm_90-ab.swz"
    elif [ "${SWZ_SPEED_AB:-0}" = 1 ]; then
      env "${SWZ_SPEED_AB_ENV:-SWZ_FOLD_QUANTIZE=0}" "$build/compiler/swizzlec" compile "$dir/models/$name.gguf" \
        --target sm_90 -o "$dir/models/$name-sm_90-ab.swz" \
        ${SWZ_SPEED_AB_SCHEDULE_DIR:+--schedule-dir "$SWZ_SPEED_AB_SCHEDULE_DIR"} >/dev/null
    fi
    rm "$dir/models/$name.gguf"
  done
  # llama.cpp: the sdist of the newest llama-cpp-python vendors it.
  tmp=$(mktemp -d)
  "$src/.venv/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$tmp" llama-cpp-python
  tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  lc=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
  basename "$tmp"/llama_cpp_python-*.tar.gz > "$dir/LLAMA_CPP_SOURCE"
  # (scripts/: only ui-assets.cmake, which llama-server's ui target runs even without the web UI)
  mv "$lc/scripts/ui-assets.cmake" "$tmp/"
  rm -rf "$lc"/{models,docs,media,tests,benches,conversion,gguf-py,scripts,pocs,skills,ci,grammars,requirements}
  mkdir "$lc/scripts" && mv "$tmp/ui-assets.cmake" "$lc/scripts/"
  # examples: only lookup (llama-lookup, its prompt-lookup decoding: edit256's peer)
  (cd "$lc/examples" && for e in *; do [ "$e" = lookup ] || rm -rf "$e"; done)
  printf 'llama_add_compile_flags()\nadd_subdirectory(lookup)\n' > "$lc/examples/CMakeLists.txt"
  mkdir "$lc/pocs" && : > "$lc/pocs/CMakeLists.txt"  # added beside examples/
  (cd "$lc/ggml/src" && for b in ggml-*/; do case $b in ggml-cpu/|ggml-cuda/) ;; *) rm -rf "$b" ;; esac; done)
  # tools: the two benches and llama-server (with the libraries it links: ui, built
  # without its web assets, and mtmd), the peer of `concurrency`
  (cd "$lc/tools" && for t in */; do case $t in llama-bench/|batched-bench/|server/|ui/|mtmd/) ;; *) rm -rf "$t" ;; esac; done)
  printf 'llama_add_compile_flags()\nadd_subdirectory(batched-bench)\nadd_subdirectory(llama-bench)\nadd_subdirectory(ui)\nadd_subdirectory(mtmd)\nadd_subdirectory(server)\n' \
    > "$lc/tools/CMakeLists.txt"
  tar -czf "$dir/llama.cpp.tar.gz" -C "$(dirname "$lc")" llama.cpp
  rm -rf "$tmp"
  "$src/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels" \
    "$(grep -E '^gguf==' "$src/requirements.txt" || echo gguf)"
  # requests and its dependencies (pure Python) for bench_concurrency.py, in case the
  # machine's Python lacks them
  "$src/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels/http" requests urllib3 idna certifi
  "$src/.venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --platform any --python-version 3.8 \
    --implementation py --abi none -d "$dir/wheels/http" charset-normalizer
  git -C "$src" rev-parse --short HEAD > "$dir/COMMIT"
  realpath "$dir" > "$dir/ORIGIN"
  du -sh "$dir" ;;
run)
  what=${3:?run needs check, time or ncu}
  # Logs accumulate in $work, which outlives a call while the machine stays warm (time
  # runs one model a call); each call ends by packing them into $OUT (8 files come back
  # from a call): logs.tgz, speed.json and the tables.
  work=/tmp/swz-speed
  out=${OUT:-$dir/out}
  mkdir -p "$work" "$out"
  trap 'tar -czf "$out/logs.tgz" -C "$work" . 2>/dev/null; cp "$work"/speed.json "$work"/concurrency.json "$work"/*.md "$out/" 2>/dev/null' EXIT
  here=$(realpath "$dir")
  origin=$(cat "$dir/ORIGIN")
  if [ "$origin" != "$here" ]; then mkdir -p "$(dirname "$origin")" && ln -sfn "$here" "$origin"; fi
  bin=$here/bin
  lcb=/tmp/llama.cpp-build
  nproc=$(nproc)
  check_models() {  # writes the GGUFs (where missing) and the verdict of each model without one
    for m in "${MODELS[@]}"; do
      name=${m%%|*} prompts=${m##*|}
      only_model "$name" || continue
      [ -f "$here/models/$name.verdict" ] && continue
      if [ ! -f "$here/models/$name.gguf" ] && ! synth "$bin/swizzlec" "$m" "$here/models"; then
        printf '%-28s not all of its parts carried yet (%s): checked in a later call\n' "$name" "$(ls "$real_parts" 2>/dev/null | xargs)"
        continue
      fi
      "$bin/swz-backend-compare" "$here/models/$name-cpu.swz" "$here/models/$name-sm_90.swz" -n 16 --prompts "$prompts" \
        --json "$work/check-$name.json" > "$work/check-$name.log" 2>&1
      echo "$?" > "$here/models/$name.verdict"
      printf '%-28s correctness vs cpu: %s\n' "$name" "$([ "$(cat "$here/models/$name.verdict")" = 0 ] && echo pass || echo FAIL)"
      tail -n 4 "$work/check-$name.log"
      for pkg in "$here/models/$name"-sm_[0-9]*.swz; do  # SWZ_SPEED_EXTRA_TARGETS's packages
        t=${pkg%.swz}; t=${t##*-}
        case $t in sm_90|ab) continue ;; esac
        "$bin/swz-backend-compare" "$here/models/$name-cpu.swz" "$pkg" -n 16 --prompts "$prompts" \
          > "$work/check-$name-$t.log" 2>&1
        rc=$?
        printf '%-28s %s package on this GPU, correctness vs cpu: %s\n' "$name" "$t" "$([ $rc = 0 ] && echo pass || echo FAIL)"
      done
    done
  }
  if [ "$what" = check ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$work/gpu.csv"
    # llama.cpp's CUDA build (sm_90 only) runs on in its own session while we check.
    # SWZ_SPEED_PEER=0: no llama.cpp build (our rows only, e.g. between two changes).
    if [ ! -f $lcb/done ] && ls "$here"/llama-bin.tgz.part-* > /dev/null 2>&1; then
      mkdir -p $lcb/b && cat "$here"/llama-bin.tgz.part-* | tar -xzf - -C $lcb/b && echo 0 > $lcb/done \
        && echo "llama.cpp: the carried binaries"
    fi
    if [ "${SWZ_SPEED_PEER:-1}" = 1 ] && [ ! -f $lcb/done ]; then
      rm -rf $lcb && mkdir -p $lcb && tar -xzf "$here/llama.cpp.tar.gz" -C $lcb
      setsid nohup bash -c "cd $lcb && cmake -S llama.cpp -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        > build.log 2>&1 && \
        nice cmake --build b --target llama-bench llama-batched-bench llama-lookup llama-server -j $nproc >> build.log 2>&1; \
        echo \$? > done" \
        > /dev/null 2>&1 < /dev/null &
    fi
    check_models
    [ "${SWZ_SPEED_PEER:-1}" = 1 ] || exit 0
    t0=$SECONDS
    for _ in $(seq 1 100); do [ -f $lcb/done ] && break; sleep 5; done
    echo "llama.cpp build: $([ "$(cat $lcb/done 2>/dev/null)" = 0 ] && echo done || echo FAILED) (waited $((SECONDS - t0)) s after the checks)"
    tail -n 3 $lcb/build.log 2>/dev/null
    cp $lcb/build.log "$work/llama-build.log" 2>/dev/null
    # SWZ_SPEED_PACK_PEER=1: llama.cpp's binaries come back in $OUT (15 MB parts,
    # llama-bin.tgz.part-*); carried in <build-dir>/gpu-speed/ they replace the build on
    # a later machine (this tree's binaries link the machine's CUDA libraries).
    if [ "${SWZ_SPEED_PACK_PEER:-0}" = 1 ] && [ "$(cat $lcb/done 2>/dev/null)" = 0 ]; then
      tar -czf /tmp/llama-bin.tgz -C $lcb/b bin && split -b 15M /tmp/llama-bin.tgz "$out/llama-bin.tgz.part-" && ls -la "$out"
    fi
    exit 0
  fi
  big=${MODELS[2]%%|*}
  if [ "$what" = ncu ]; then
    # Decode launch by launch under Nsight Compute, ours and llama.cpp's, on the 7B and
    # 0.6B shapes: about two tokens' launches, after a 16-token prompt (ours) or from the
    # middle of llama-bench's 32 generated tokens; clocks as they run (--clock-control
    # none) and caches as the previous kernel left them (--cache-control none), as in a
    # real decode step. Per-token tables: gpu_speed_table.py --ncu CSV MARKER, where
    # MARKER is a kernel that runs once a token (our argmax_reduce, llama.cpp's
    # embedding get_rows).
    prof() {  # prof CSV METRICS CMD...
      local csv=$1 metrics=$2; shift 2
      timeout 200 ncu --clock-control none --cache-control none --launch-skip 3000 --launch-count 900 \
        --csv --print-units base --metrics "$metrics" "$@" > "$work/$csv" 2> "$work/${csv%.csv}.log"
    }
    full=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
    # SWZ_NCU_DEPTH=D: decode after a D-token context (ours --depth D, llama-bench -d D);
    # a 4th argument: the models (comma-separated; default the 7B and 0.6B shapes).
    depth=${SWZ_NCU_DEPTH:-0}
    for m in $(echo "${4:-$big,${MODELS[1]%%|*}}" | tr , ' '); do
      [ "$m" = "$big" ] || full=gpu__time_duration.sum
      tag=$m$([ "$depth" = 0 ] || echo "-d$depth")
      SWZ_GRAPHS=0 prof "ncu-swz-$tag.csv" "$full" "$bin/swz-bench" "$here/models/$m-sm_90.swz" --pp 16 --tg 64 --reps 1 --depth "$depth"
      python3 "$src/bench/gpu_speed_table.py" --ncu "$work/ncu-swz-$tag.csv" argmax_reduce | tee "$work/ncu-swz-$tag.md"
      if [ -x "$lcb/b/bin/llama-bench" ]; then
        prof "ncu-llama-$tag.csv" "$full" "$lcb/b/bin/llama-bench" -m "$here/models/$m.gguf" -ngl 99 -fa 1 -p 0 -n 32 -r 1 -d "$depth"
        python3 "$src/bench/gpu_speed_table.py" --ncu "$work/ncu-llama-$tag.csv" get_rows | tee "$work/ncu-llama-$tag.md"
      fi
    done
    exit 0
  fi
  if [ "$what" = ncu-prefill ]; then
    # Prefill (pp512) kernel by kernel on the 7B shape, ours: swz-bench's pp512 passes
    # under Nsight Compute (durations only), one table a pass between argmax_reduce
    # launches (gpu_speed_table.py --ncu), clocks and caches as they run.
    # SWZ_NCU_PREFILL="ARGS|SKIP|COUNT": other swz-bench arguments and launch window, e.g.
    # the 32k TTFT row's pass: "--pp 64 --pp-depth 32704 --tg 1 --reps 1|44352|2000" (63
    # of the 64 depth passes of ~704 launches skipped).
    IFS='|' read -r pargs pskip pcount <<< "${SWZ_NCU_PREFILL:---pp 512 --tg 1 --reps 1|0|4000}"
    # shellcheck disable=SC2086
    timeout 500 ncu --clock-control none --cache-control none --launch-skip "$pskip" --launch-count "$pcount" --csv \
      --print-units base --metrics gpu__time_duration.sum "$bin/swz-bench" "$here/models/$big-sm_90.swz" $pargs \
      > "$work/ncu-prefill-swz-$big.csv" 2> "$work/ncu-prefill-swz-$big.log"
    python3 "$src/bench/gpu_speed_table.py" --ncu "$work/ncu-prefill-swz-$big.csv" argmax_reduce | tee "$work/ncu-prefill-swz-$big.md"
    exit 0
  fi
  if [ "$what" = chunks ]; then
    # Chunked prefill pass by pass (issue 14 item 6's unexplained GPU cost: a ~31k prompt
    # at --batch-tokens 64 / 256 took 25x the time of one unchunked pass): swz-bench's pp
    # at row budgets (--ubatch) and depths, with the executor opened as the server opens it
    # (--ctx 32768 --max-seqs 33) and without; then the server itself
    # (bench/prefill_probe.py): a prompt of SWZ_CHUNKS_PROMPT tokens (default 8192) alone
    # and while 32 streams decode, at --batch-tokens SWZ_CHUNKS_BT (default 64 256 32768).
    # SWZ_CHUNKS_BENCH=0: the server part only.
    pkg=$here/models/${4:-$big}-sm_90.swz
    srv="--ctx 32768 --max-seqs 33"
    [ "${SWZ_CHUNKS_BENCH:-1}" = 1 ] && while IFS= read -r a; do
      echo "swz-bench $a"
      # shellcheck disable=SC2086
      timeout 100 "$bin/swz-bench" "$pkg" $a --tg 1 --reps 1 2>&1 | tail -n 1
    done <<EOF2
--pp 512
--pp 512 --ubatch 64
--pp 512 --ubatch 64 $srv
--pp 256 --pp-depth 8192 --ubatch 256
--pp 256 --pp-depth 8192 --ubatch 256 $srv
--pp 1024 --pp-depth 8192 --ubatch 1024 $srv
--pp 8192 --ubatch 8192
EOF2
    # The server: the same prompt alone and while 32 streams decode, at each row budget.
    for bt in ${SWZ_CHUNKS_BT:-64 256 32768}; do
      port=$((18900 + bt % 97))
      "$bin/swizzle-rt" serve "$pkg" --host 127.0.0.1 --port $port -c 32768 --parallel 33 --batch-tokens "$bt" --no-spec -q \
        > "$work/chunks-server-$bt.log" 2>&1 &
      spid=$!
      for _ in $(seq 1 120); do
        python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2> /dev/null && break
        sleep 1
      done
      echo "swizzle-rt serve --batch-tokens $bt"
      timeout 200 python3 "$src/bench/prefill_probe.py" $port --tokens "${SWZ_CHUNKS_PROMPT:-8192}" --streams 0,32 \
        | tee "$work/chunks-probe-$bt.txt"
      kill $spid; wait $spid 2>/dev/null
    done
    exit 0
  fi
  if [ "$what" = concurrency ]; then
    # Issue 14 item 6 on the GPU: `swizzle-rt serve` on the sm_90 package against
    # llama-server --parallel (CUDA, -ngl 99 -fa on, one unified KV pool of the same size:
    # 4 contexts) on the same GGUF: aggregate decode and TTFT at 1..32 streams, then the
    # ITL of 32 streams while a ~31k-token prompt arrives (the model's context is 32k),
    # swizzle at --batch-tokens 64 / 256 (default) / unchunked, llama-server at its
    # defaults and at -b 64. bench/bench_concurrency.py does the work; its JSON and table
    # come back as concurrency.json / concurrency.md. MODEL (4th argument) defaults to the
    # 7B shape; SWZ_CONC_STREAMS ('' = part 2 only), SWZ_CONC_REPS, SWZ_CONC_LONG,
    # SWZ_CONC_ITL=0 (part 1 only) and SWZ_CONC_ITL_BT override the row set (the whole set
    # may not fit one 10-minute call: run the two parts as two calls). The requests carry
    # ignore_eos and swizzle runs --no-spec: a random-weight model's greedy answer repeats
    # one token, which prompt lookup would draft perfectly (llama-server does not speculate).
    m=${4:-$big}
    [ "$(cat "$here/models/$m.verdict" 2>/dev/null)" = 0 ] || { echo "$m: no passing correctness verdict here (run check first)"; exit 1; }
    [ -x "$lcb/b/bin/llama-server" ] || { echo "llama-server was not built on this machine (run check first)"; exit 1; }
    python3 -c "import requests" 2>/dev/null || {
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-http "$here"/wheels/http/*.whl &&
        export PYTHONPATH=/tmp/site-http${PYTHONPATH:+:$PYTHONPATH}; }
    python3 "$src/bench/bench_concurrency.py" --gpu --models custom --gguf "$here/models/$m.gguf" \
      --package "$here/models/$m-sm_90.swz" --llama-server "$lcb/b/bin/llama-server" --swizzle-rt "$bin/swizzle-rt" \
      --streams "${SWZ_CONC_STREAMS-1,2,4,8,16,32}" --reps "${SWZ_CONC_REPS:-3}" --threads 8 --ctx 32768 --parallel 33 \
      --max-tokens 64 --ignore-eos --swizzle-args=--no-spec --itl-models "$([ "${SWZ_CONC_ITL:-1}" = 1 ] && echo custom)" \
      --itl-streams 32 --long-tokens "${SWZ_CONC_LONG:-31000}" --itl-max-tokens 3000 \
      --itl-batch-tokens "${SWZ_CONC_ITL_BT:-64,256,32768}" --json "$work/concurrency.json" 2> "$work/concurrency.log" \
      | tee "$work/concurrency.md"
    rc=${PIPESTATUS[0]}
    tail -n 20 "$work/concurrency.log"
    exit "$rc"
  fi
  if [ "$what" = approx ]; then
    # The approx cache mode (issue 15) on the GPU, per checked model's sm_90 package: the
    # engine test (test/unit/engine/approx_test.cpp: an atom's K/V installed at new
    # positions is the earlier computation moved and re-rotated, layer 0 against a cold
    # prefill; the two namespaces apart), then both wire formats through swizzle-rt serve
    # (bench/approx_wire_check.py). Run check first (SWZ_SPEED_PEER=0 skips llama.cpp).
    rc=0
    for m in "${MODELS[@]}"; do
      name=${m%%|*}
      only_model "$name" || continue
      [ "$(cat "$here/models/$name.verdict" 2>/dev/null)" = 0 ] || { echo "$name: no passing correctness verdict (run check first)"; rc=1; continue; }
      SWZ_PACKAGE="$here/models/$name-sm_90.swz" SWZ_REQUIRE=1 "$bin/approx_test" > "$work/approx-test-$name.log" 2>&1
      t=$?
      printf '%-28s approx engine test on sm_90: %s\n' "$name" "$([ $t = 0 ] && echo pass || echo FAIL)"
      tail -n 3 "$work/approx-test-$name.log"
      port=$((18300 + RANDOM % 500))
      "$bin/swizzle-rt" serve "$here/models/$name-sm_90.swz" --host 127.0.0.1 --port $port -c 4096 -q > "$work/approx-serve-$name.log" 2>&1 &
      spid=$!
      for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.5; done
      python3 "$src/bench/approx_wire_check.py" "http://127.0.0.1:$port" | tee "$work/approx-wire-$name.json"
      w=${PIPESTATUS[0]}
      printf '%-28s approx through both wire formats on sm_90: %s\n' "$name" "$([ $w = 0 ] && echo pass || echo FAIL)"
      kill $spid; wait $spid 2>/dev/null
      [ $t = 0 ] && [ $w = 0 ] || rc=1
    done
    exit $rc
  fi
  [ "$what" = time ] || { echo "run: check, time, concurrency, approx, ncu or ncu-prefill" >&2; exit 2; }
  [ "$(cat $lcb/done 2>/dev/null)" = 0 ] || echo "llama.cpp was not built (run check first, on this machine): its columns stay empty"
  # Models without a verdict are checked now: after a call that carried
  # <build-dir>/gpu-speed again (it replaces the GGUFs and verdicts: seconds, the GGUFs
  # are the same bytes), and the real model once its last part has come. Only the models
  # this call times (its MODEL list, else SWZ_SPEED_ONLY's, else all).
  if [ -n "${4:-}" ] && [ -z "${SWZ_SPEED_ONLY:-}" ]; then SWZ_SPEED_ONLY=$4 check_models; else check_models; fi
  lbin=$lcb/b/bin
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site "$here"/wheels/*.whl && export PYTHONPATH=/tmp/site
  # The machine's measured peaks: device-to-device copy bandwidth (read + write bytes over
  # time, 2 GiB buffers) and the dense f16 tensor-core rate (8192^3 matmul, f32 accumulate).
  python3 - > "$work/peaks.json" <<'PY'
import json, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
a = torch.randn(8192, 8192, dtype=torch.float16, device="cuda"); b = torch.randn_like(a)
def timed(f, n):
    f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); [f() for _ in range(n)]; e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / n
t = timed(lambda: y.copy_(x), 20)
m = timed(lambda: a @ b, 20)
print(json.dumps({"hbm_gbs": 2 * x.numel() / t / 1e9, "f16_tflops": 2 * 8192**3 / m / 1e12,
                  "device": torch.cuda.get_device_name()}))
PY
  cat "$work/peaks.json"
  run_swz() {  # run_swz LOG ARGS...: swz-bench's JSON line, logged
    local log=$1; shift
    "$bin/swz-bench" "$@" > "$work/$log.log" 2>&1; tail -n 1 "$work/$log.log"
  }
  only=${4:-}
  # SWZ_SPEED_QUICK=1: the bars' rows only (pp512, tg128) and decode at 1 and 8 sequences
  # (a call for one model then fits well inside the 10 minutes).
  quick=${SWZ_SPEED_QUICK:-0}
  seqs="1 4 8 16 32"
  [ "$quick" = 1 ] && seqs="1 8"
  seqs=${SWZ_SPEED_SEQS:-$seqs}  # e.g. "1 8 32": the aggregate decode rows to time
  # Aggregate decode: medians of SWZ_SPEED_BATCH_REPS repetitions for both engines (issue
  # 13 asks for >= 5; 3 fits a 7B call with more room).
  batch_reps=${SWZ_SPEED_BATCH_REPS:-5}
  # SWZ_SPEED_ROWS="ttft32k pp512 ...": time only those rows, both engines (default all):
  # pp512 (pp512 and tg128), nographs, pp8192, ttft32k, batch, ab, edit256.
  want() { [ -z "${SWZ_SPEED_ROWS:-}" ] || [[ " $SWZ_SPEED_ROWS " == *" $1 "* ]]; }
  for m in "${MODELS[@]}"; do
    name=${m%%|*}
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || continue
    gguf=$here/models/$name.gguf gpu=$here/models/$name-sm_90.swz
    if [ "$(cat "$here/models/$name.verdict" 2>/dev/null)" != 0 ]; then echo "$name: not checked or failed the check: not timed"; continue; fi
    echo "== $name"
    want pp512 && run_swz "swz-$name-pp512-tg128" "$gpu" --pp 512 --tg 128 --reps 5
    [ "$quick" = 1 ] || ! want nographs || SWZ_GRAPHS=0 run_swz "swz-$name-tg128-nographs" "$gpu" --pp 16 --tg 128 --reps 5
    [ "$quick" = 1 ] || ! want pp8192 || run_swz "swz-$name-pp8192" "$gpu" --pp 8192 --tg 1 --reps 5
    # Warm TTFT of a 32k-token prompt after a one-token edit at its end: the prefix cache
    # reuses every token before the edited one (whole blocks, then 63 positions of the
    # last block: kvcache::BlockManager::match_partial), so the engine prefills 1 token on
    # top of 32,767 cached ones, as llama.cpp's prompt cache does (its row below). Until
    # 2026-12-03 the reuse stopped at the last whole block: 64 tokens on top of 32,704.
    [ "$quick" = 1 ] || [[ $name != qwen* ]] || ! want ttft32k ||
      run_swz "swz-$name-ttft32k" "$gpu" --pp 1 --pp-depth 32767 --tg 1 --reps 5
    want batch && for s in $seqs; do run_swz "swz-$name-batch$s" "$gpu" --pp 512 --tg 128 --reps "$batch_reps" --seqs $s; done
    # A/B (prepare made <name>-sm_90-ab.swz): the package as shipped and the other one,
    # interleaved three times (same machine, same call), for each swz-bench argument
    # list in SWZ_SPEED_AB_ARGS (';'-separated; default tg128: "--pp 16 --tg 128 --reps 3").
    if [ -d "${gpu%.swz}-ab.swz" ] && want ab; then
      IFS=';' read -r -a ab_args <<< "${SWZ_SPEED_AB_ARGS:---pp 16 --tg 128 --reps 3}"
      for r in 1 2 3; do
        for i in "${!ab_args[@]}"; do
          echo "AB $name round $r, swz-bench ${ab_args[$i]}: shipped / ab package ($(cat "${gpu%.swz}-ab.swz/AB_SOURCE" 2>/dev/null || echo prepared))"
          # shellcheck disable=SC2086
          run_swz "swz-$name-ab$r-v$i-shipped" "$gpu" ${ab_args[$i]}
          # shellcheck disable=SC2086
          run_swz "swz-$name-ab$r-v$i-other" "${gpu%.swz}-ab.swz" ${ab_args[$i]}
        done
      done
    fi
    # edit256: the model rewrites a ~256-token file with one edit (bench_edit256.py's
    # prompt as ChatML text, given raw to both engines: the same tokens), greedy, 320
    # tokens at most, prompt-lookup speculative decoding on and off, 5 repetitions
    # interleaved. Ours: swizzle-rt run --spec / --no-spec (drafts of 1..16); llama.cpp:
    # llama-lookup (its prompt-lookup decoding) with --spec-draft-n-max 16 and 0 (0: one
    # token a pass, plain). Meaningful on the real model; random weights fall into
    # repetition loops that prompt lookup predicts, so those rows measure the mechanism
    # on degenerate text, not an edit.
    if [ "$quick" != 1 ] && want edit256; then
      prompt=$(python3 "$src/bench/bench_edit256.py" --print-chatml)
      for r in 1 2 3 4 5; do
        for v in spec no-spec; do
          "$bin/swizzle-rt" run "$gpu" --raw -p "$prompt" -n 320 --temp 0 -c 2048 --$v \
            > "$work/swz-$name-edit256-$v-$r.out" 2> "$work/swz-$name-edit256-$v-$r.log"
        done
        if [ -x "$lbin/llama-lookup" ]; then
          for d in 16 0; do
            "$lbin/llama-lookup" -m "$gguf" -ngl 99 -fa on -c 2048 -n 320 --temp 0 --spec-draft-n-max $d -p "$prompt" \
              > "$work/llama-$name-edit256-d$d-$r.out" 2> "$work/llama-$name-edit256-d$d-$r.log"
          done
        fi
      done
      grep -h "^generated\|^speculative" "$work/swz-$name-edit256-spec-1.log"
    fi
    if [ -x "$lbin/llama-bench" ]; then
      ! want pp512 || "$lbin/llama-bench" -m "$gguf" -ngl 99 -fa 1 -p 512 -n 128 -r 5 -o json > "$work/llama-$name-pp512-tg128.json" 2> "$work/llama-$name-pp512-tg128.log"
      [ "$quick" = 1 ] || ! want pp8192 || "$lbin/llama-bench" -m "$gguf" -ngl 99 -fa 1 -p 8192 -n 0 -r 5 -o json > "$work/llama-$name-pp8192.json" 2> "$work/llama-$name-pp8192.log"
      [ "$quick" = 1 ] || [[ $name != qwen* ]] || ! want ttft32k ||
        "$lbin/llama-bench" -m "$gguf" -ngl 99 -fa 1 -p 1 -n 0 -d 32767 -r 5 -o json > "$work/llama-$name-ttft32k.json" 2> "$work/llama-$name-ttft32k.log"
      : > "$work/llama-$name-batched.jsonl"
      want batch && for _ in $(seq "$batch_reps"); do  # one line per run and sequence count; the table takes medians
        "$lbin/llama-batched-bench" -m "$gguf" -ngl 99 -fa on -c 20992 -b 2048 -ub 512 -npp 512 -ntg 128 -npl "${seqs// /,}" \
          --output-format jsonl >> "$work/llama-$name-batched.jsonl" 2>> "$work/llama-$name-batched.log"
      done
      grep -hs '"avg_ts"' "$work/llama-$name-pp512-tg128.json" | head -2
    fi
  done
  python3 "$src/bench/gpu_speed_table.py" "$work" "$here" "$(cat "$here/COMMIT")" "${MODELS[@]%%|*}" | tee "$work/table.md" ;;
*) echo "usage: $0 prepare|run [build-dir] [check|time|ncu]" >&2; exit 2 ;;
esac
