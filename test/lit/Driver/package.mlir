// swizzlec compile --target sm_90 / spirv writes a complete package: every kernel the
// graph needs, with ptxas resources and bank-conflict degrees in its launch record,
// and the residual adds fused into the matmuls (a small synthetic qwen2: q/k/v biases,
// Q8_0 weights, head_dim 32, so attention takes the portable kernel).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: %swizzlec synth --preset qwen2.5-coder-0.5b --type q8_0 --n-layer 1 --n-embd 128 --n-head 4 --n-head-kv 2 --head-dim 32 --n-ff 256 --n-vocab 512 -o %t/qwen2.gguf
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/qwen2.swz -v 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: %python -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True, separators=(',', ':')))" %t/qwen2.swz/manifest.json | FileCheck %s --check-prefix=MANIFEST
// RUN: %swizzlec compile %t/qwen2.gguf --target spirv -o %t/qwen2-spv.swz
// RUN: %spirv-val --target-env vulkan1.1 %t/qwen2-spv.swz/swz_gemv_q8_0.spv
// RUN: %spirv-val --target-env vulkan1.1 %t/qwen2-spv.swz/swz_attention_f16kv.spv
// RUN: %ptxas -arch=sm_90 %t/qwen2.swz/swz_gemm_f16.ptx -o /dev/null
// qwen3 (q/k head_norm, head_dim 128: the tensor-core hd128 flash kernel, Q4_K).
// RUN: %swizzlec synth --preset qwen3-0.6b --type q4_k --n-layer 1 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 128 --n-ff 512 --n-vocab 512 -o %t/qwen3.gguf
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen3.gguf --target sm_90 -o %t/qwen3.swz -v 2>&1 | FileCheck %s --check-prefix=QWEN3
// RUN: %swizzlec compile %t/qwen3.gguf --target spirv -o %t/qwen3-spv.swz
// QWEN3-DAG: kernel sm_90.rms_norm_f32: swz_rms_norm.ptx
// QWEN3-DAG: kernel sm_90.flash_attention_f16kv_mma_hd128: swz_attention_f16kv_mma.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.attention, bank conflicts: 1-way worst over 3 tile(s)
// QWEN3-DAG: kernel sm_90.matmul_q4_k: swz_gemv_q4_k.ptx
// QWEN3-DAG: kernel sm_90.dequant_q4_k_f16: swz_dequant_f16.ptx
// QWEN3: wrote {{.*}}qwen3.swz
// A schedule the GEMM kernel's tiles do not follow (tile_k 32) fails the compilation.
// RUN: mkdir -p %t/sched
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm']['tile_k']=32; json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/sched/sm_90.json
// RUN: not %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/bad.swz --schedule-dir %t/sched 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: error: target sm_90: kernel gemm_f16 does not follow the sm_90 schedule's gemm entry: tile @gemm_x is 192x64, the schedule's 3 stages of 64 or 64 rows of tile_k 32 elements

// REPORT-DAG: kernel sm_90.get_rows_q8_0: swz_gemv_q8_0.ptx, {{[0-9]+}} registers, 0 B smem, 0 B stack, spills 0/0 B, bank conflicts: no ldmatrix/cp.async tiles
// REPORT-DAG: kernel sm_90.matmul_q8_0: swz_gemv_q8_0.ptx, {{[0-9]+}} registers, 4608 B smem, 0 B stack, spills 0/0 B
// REPORT-DAG: kernel sm_90.gemm_f16: swz_gemm_f16.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.gemm, bank conflicts: 1-way worst over 2 tile(s)
// REPORT-DAG: kernel sm_90.rope_kv_store_f16: swz_attention_f16kv.ptx
// REPORT-DAG: kernel sm_90.flash_attention_f16kv: swz_attention_f16kv.ptx
// REPORT-DAG: kernel sm_90.attention_split_reduce: swz_attention_f16kv.ptx
// REPORT: wrote {{.*}}qwen2.swz: {{[0-9]+}} kernels

// Graph op 6 is rope(k): fused into the attention's KV write (op 7).
// MANIFEST: "fused_into":7,"head_dim":32,"in":["k"]
// MANIFEST: "fused":[6],"head_dim":32,"in":["q","k","v"],"kernels":{"all":["sm_90.rope_kv_store_f16"]
// Graph op 9 is `x = x + o` (attn_output): fused into op 8's epilogue.
// MANIFEST: "fused":[9],"in":["attn","blk.0.attn_output.weight"]
// MANIFEST: "fused_into":8,"in":["x","o"]
// MANIFEST: "entry":"sm_90.gemm_f16","file":"swz_gemm_f16.ptx","launch":{"abi":"mlir-memref-expanded","block":[128,1,1],"dynamic_smem":"0","function":"gemm_f16","grid":"ceil(N/64), ceil(T/64), 1","ptxas":{"arch":"sm_90","registers":{{[0-9]+}},"shared_bytes":49152,"spill_load_bytes":0,"spill_store_bytes":0,"stack_bytes":0},"smem_tiles":[{"claimed_conflict_free":true,"cp_async_16_degree":1,"layout":"{{[^"]*}}Swizzle<3,3,3>{{[^"]*}}","ldmatrix_x4_degree":1,"tile":"gemm_x"}{{.*}}"schedule":"sm_90.gemm"
