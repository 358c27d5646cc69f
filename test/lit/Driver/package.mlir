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
// RUN: %ptxas -arch=sm_90a %t/qwen2.swz/swz_gemm_f16.ptx -o /dev/null
// qwen3 (q/k head_norm, head_dim 128: the tensor-core hd128 flash kernel, Q4_K).
// RUN: %swizzlec synth --preset qwen3-0.6b --type q4_k --n-layer 1 --n-embd 256 --n-head 4 --n-head-kv 2 --head-dim 128 --n-ff 512 --n-vocab 512 -o %t/qwen3.gguf
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen3.gguf --target sm_90 -o %t/qwen3.swz -v 2>&1 | FileCheck %s --check-prefix=QWEN3
// RUN: %swizzlec compile %t/qwen3.gguf --target spirv -o %t/qwen3-spv.swz
// The qwen3 layers' rows are 256 weights: a one-row prompt pass (sm_90.json's
// gemm.skinny_max_rows 1) multiplies with the skinny GEMM, larger ones dequantize; each
// launch's grid is zero on the other passes (docs/package-format.md).
// RUN: %python -c "import json,sys; [print(l['kernel'], l['grid'][0]) for op in json.load(open(sys.argv[1]))['graph']['ops'] if op['op'] == 'matmul' for l in op.get('launches', []) if l['phase'] == 'prefill']" %t/qwen3.swz/manifest.json | FileCheck %s --check-prefix=SKINNY
// SKINNY: sm_90.gemm_skinny_q4_k max(0, min(1, 2-T))*
// SKINNY-NEXT: sm_90.convert_f32_f16 T*max(0, min(1, T-1))
// SKINNY-NEXT: sm_90.dequant_q4_k_f16 max(0, min(1, T-1))*
// SKINNY-NEXT: sm_90.gemm_f16 max(0, min(1, T-1))*
// QWEN3-DAG: kernel sm_90.rms_norm_f32: swz_rms_norm.ptx
// QWEN3-DAG: kernel sm_90.flash_attention_f16kv_mma_hd128: swz_attention_f16kv_mma.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.attention, bank conflicts: 1-way worst over 3 tile(s)
// QWEN3-DAG: kernel sm_90.matmul_q4_k_q8x: swz_gemv_q8x.ptx
// With sm_90's gemv.q4_k_mma turned on, Q4_K decodes on the int8 tensor cores (8 warps a
// workgroup below its 4096 rows: every matrix of this model), with no spill.
// RUN: mkdir -p %t/mma
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemv']['q4_k_mma']=True; json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/mma/sm_90.json
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen3.gguf --target sm_90 -o %t/qwen3-mma.swz --schedule-dir %t/mma -v 2>&1 | FileCheck %s --check-prefix=MMA
// MMA: kernel sm_90.matmul_q4_k_mma_w8_q8x: swz_gemv_q8x.ptx, {{[0-9]+}} registers, 8192 B smem, 0 B stack, spills 0/0 B
// QWEN3-DAG: kernel sm_90.dequant_q4_k_f16: swz_dequant_f16.ptx
// QWEN3: wrote {{.*}}qwen3.swz
// A schedule edit regenerates the prefill GEMM (swz-lower-tiles): one warpgroup of
// wgmma.m64n128k16 on a 64x128 tile, 2 stages x (64 + 128) rows x 64 halves = 48 KiB,
// conflict-free; tile_k 32 with the 128-byte rows' Swizzle<3,3,3> is refused, once,
// naming the mismatch.
// RUN: mkdir -p %t/sched %t/regen
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm'].update(tile_n=128, stages=2, mma='wgmma.m64n128k16'); json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/regen/sm_90.json
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/regen.swz --schedule-dir %t/regen -v 2>&1 | FileCheck %s --check-prefix=REGEN
// REGEN: kernel sm_90.gemm_f16: swz_gemm_f16.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.gemm, bank conflicts: 1-way worst over 2 tile(s)
// Tiles over the 48 KiB a block may declare statically (two warpgroups of wgmma.m64n128k16
// on 128x128, 4 stages, a wgmma group in flight: 128 KiB) go to dynamic shared memory; the
// prefill GEMM's launch records ask for the tiles plus 1008 bytes of alignment slack; no
// static shared memory (0 B: the window is `.extern`, not a static variable).
// RUN: mkdir -p %t/dyn
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm'].update(tile_m=128, tile_n=128, warps=8, stages=4, mma='wgmma.m64n128k16', mma_in_flight=1); json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/dyn/sm_90.json
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/dyn.swz --schedule-dir %t/dyn -v 2>&1 | FileCheck %s --check-prefix=DYN
// DYN: kernel sm_90.gemm_f16: swz_gemm_f16.ptx, {{[0-9]+}} registers, 0 B smem + 132080 B dynamic, 0 B stack, spills 0/0 B, schedule sm_90.gemm, bank conflicts: 1-way worst over 2 tile(s)
// RUN: %python -c "import json,sys; [print(l['kernel'], l['grid'], l['dynamic_smem']) for op in json.load(open(sys.argv[1]))['graph']['ops'] for l in op.get('launches', []) if l['kernel'] == 'sm_90.gemm_f16']" %t/dyn.swz/manifest.json | FileCheck %s --check-prefix=DYNREC
// DYNREC: sm_90.gemm_f16 ['1', 'ceil(T/128)', '1'] 132080
// DYNREC-NEXT: sm_90.gemm_f16 ['ceil(1/2)', 'ceil(T/128)', '1'] 132080
// DYNREC-NOT: '1'] 0
// Shape classes of the prefill GEMM (gemm.classes): weights of at most 64 rows (k, v)
// multiply with gemm_f16_narrow (64x32 wgmma tiles, 4 stages), weights of K >= 256
// (ffn_down) with gemm_f16_deep (4 stages in dynamic shared memory, a wgmma group in
// flight), the others with gemm_f16: three kernels in one PTX module, each checked against
// its own schedule entry.
// RUN: mkdir -p %t/cls
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm']['classes']=[{'name':'narrow','n_max':64,'tile_n':32,'stages':4,'mma':'wgmma.m64n32k16'},{'name':'deep','k_min':256,'stages':4,'mma_in_flight':1}]; json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/cls/sm_90.json
// RUN: env CUDA_ROOT=%cuda_root %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/cls.swz --schedule-dir %t/cls -v 2>&1 | FileCheck %s --check-prefix=CLS
// CLS-DAG: kernel sm_90.gemm_f16: swz_gemm_f16.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.gemm, bank conflicts: 1-way worst over 2 tile(s)
// CLS-DAG: kernel sm_90.gemm_f16_narrow: swz_gemm_f16.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.gemm.narrow, bank conflicts: 1-way worst over 2 tile(s)
// CLS-DAG: kernel sm_90.gemm_f16_deep: swz_gemm_f16.ptx, {{[0-9]+}} registers, 0 B smem + 66544 B dynamic, 0 B stack, spills 0/0 B, schedule sm_90.gemm.deep, bank conflicts: 1-way worst over 2 tile(s)
// RUN: %python -c "import json,sys; [print(op['in'][1], l['kernel'], l['grid'][0], l['dynamic_smem']) for op in json.load(open(sys.argv[1]))['graph']['ops'] if op['op'] == 'matmul' for l in op.get('launches', []) if 'gemm_f16' in l['kernel']]" %t/cls.swz/manifest.json | FileCheck %s --check-prefix=CLSREC
// CLSREC: blk.0.attn_q.weight sm_90.gemm_f16 2 0
// CLSREC-NEXT: blk.0.attn_k.weight sm_90.gemm_f16_narrow 2 0
// CLSREC-NEXT: blk.0.attn_v.weight sm_90.gemm_f16_narrow 2 0
// CLSREC-NEXT: blk.0.attn_output.weight sm_90.gemm_f16 2 0
// CLSREC-NEXT: blk.0.ffn_gate.weight sm_90.gemm_f16 4 0
// CLSREC-NEXT: blk.0.ffn_up.weight sm_90.gemm_f16 4 0
// CLSREC-NEXT: blk.0.ffn_down.weight sm_90.gemm_f16_deep max(0, min(1, T-1))*2 66544
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm']['tile_k']=32; json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/sched/sm_90.json
// RUN: not %swizzlec compile %t/qwen2.gguf --target sm_90 -o %t/bad.swz --schedule-dir %t/sched 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: error: target sm_90: swz-outline-kernels failed:
// SCHED-NEXT: 'swz.gemm_tile' op smem layout #swz.swizzle<3, 3, 3> permutes columns in blocks of 64 elements, which does not divide the row length tile K = 32
// SCHED-NOT: swz.gemm_tile

// REPORT-DAG: kernel sm_90.get_rows_q8_0: swz_gemv_q8_0.ptx, {{[0-9]+}} registers, 0 B smem, 0 B stack, spills 0/0 B, bank conflicts: no ldmatrix/cp.async tiles
// REPORT-DAG: kernel sm_90.quantize_q8_x: swz_gemv_q8x.ptx, {{[0-9]+}} registers, 0 B smem, 0 B stack, spills 0/0 B
// REPORT-DAG: kernel sm_90.matmul_q8_0_q8x: swz_gemv_q8x.ptx, {{[0-9]+}} registers, 4608 B smem, 0 B stack, spills 0/0 B
// REPORT-DAG: kernel sm_90.gemm_f16: swz_gemm_f16.ptx, {{[0-9]+}} registers, 49152 B smem, 0 B stack, spills 0/0 B, schedule sm_90.gemm, bank conflicts: 1-way worst over 2 tile(s)
// REPORT-DAG: kernel sm_90.rope_kv_store_f16: swz_attention_f16kv.ptx
// REPORT-DAG: kernel sm_90.flash_attention_f16kv: swz_attention_f16kv.ptx
// REPORT-DAG: kernel sm_90.attention_split_reduce: swz_attention_f16kv.ptx
// REPORT: wrote {{.*}}qwen2.swz: {{[0-9]+}} kernels

// Format version 3: every op that runs kernels carries its launch records
// (docs/package-format.md, "The launch contract").
// MANIFEST: "format":"swizzle-package","format_version":3,"graph"
// Graph op 1 is h = RMSNorm(x): prefill runs rms_norm_f32; decode runs rms_norm_q8x, which
// writes h and also its int8 form (x_q8: T*128 bytes as words, x_q8_ds: a vec4 per 32
// elements) that the q/k/v GEMV reads, so no quantize_q8_x launch of its own.
// MANIFEST: "in":["x","blk.0.attn_norm.weight"],"launches":[{"args":[{"buffer":"x","shape":["T*128"]},{"shape":["128"],"weight":"blk.0.attn_norm.weight"},{"buffer":"h","shape":["T*128"]},{"i32":"128"},{"f32":9.999999974752427e-07}],"dynamic_smem":"0","grid":["T","1","1"],"kernel":"sm_90.rms_norm_f32","phase":"prefill","scope":"batch"},{"args":[{"buffer":"x","shape":["T*128"]},{"shape":["128"],"weight":"blk.0.attn_norm.weight"},{"buffer":"h","shape":["T*128"]},{"bytes":"max_T*128","scratch":"x_q8","shape":["T*32"]},{"bytes":"max_T*64","scratch":"x_q8_ds","shape":["T*4"]},{"i32":"128"},{"f32":9.999999974752427e-07}],"dynamic_smem":"0","grid":["T","1","1"],"kernel":"sm_90.rms_norm_q8x","phase":"decode","scope":"batch"}]
// Graph op 2 is q = h Wq^T + bq: one dp4a GEMV launch computes q, k and v (ops 2-4 read
// the same h: three weights, outputs and biases, N = 128 + 64 + 64 rows, flags 1|4|8 = a
// bias each); Wq (128 x 128 Q8_0, 17408 bytes) as 32-bit words, x_q8 as vec4s.
// MANIFEST: "in":["h","blk.0.attn_q.weight","blk.0.attn_q.bias"],"launches":[{"args":[{"shape":["4352"],"weight":"blk.0.attn_q.weight"},{"shape":["2176"],"weight":"blk.0.attn_k.weight"},{"shape":["2176"],"weight":"blk.0.attn_v.weight"},{"bytes":"max_T*128","scratch":"x_q8","shape":["T*8"]},{"bytes":"max_T*64","scratch":"x_q8_ds","shape":["T*4"]},{"buffer":"q","shape":["T*128"]},{"buffer":"k","shape":["T*64"]},{"buffer":"v","shape":["T*64"]},{"shape":["128"],"weight":"blk.0.attn_q.bias"},{"shape":["64"],"weight":"blk.0.attn_k.bias"},{"shape":["64"],"weight":"blk.0.attn_v.bias"},{"absent":true,"shape":["1"]},{"i32":"128"},{"i32":"64"},{"i32":"64"},{"i32":"128"},{"i32":"T"},{"i32":"13"}],"dynamic_smem":"0","grid":["64","ceil(T/8)","1"],"kernel":"sm_90.matmul_q8_0_q8x","phase":"decode","scope":"batch"}
// Graph op 3 (k = h Wk^T + bk) has only its prefill launches: its decode is op 2's launch,
// and its f16 input is op 2's convert_f32_f16 of h (x_f16), not converted again. (No
// skinny GEMM for one-row passes here: its stages are 256 weights, these rows 128.)
// MANIFEST: "decode_into":2,"in":["h","blk.0.attn_k.weight","blk.0.attn_k.bias"],"launches":[{"args":[{"shape":["8704"],"weight":"blk.0.attn_k.weight"},{"bytes":"16384","scratch":"w_f16","shape":["8192"]},{"i32":"64"},{"i32":"128"}],"dynamic_smem":"0","grid":["64","1","1"],"kernel":"sm_90.dequant_q8_0_f16","phase":"prefill","scope":"batch"}
// Graph ops 5 and 6 are rope(q) and rope(k): fused into the attention's KV write (op 7),
// which takes their n_rot, theta and mode (neox = 1) and the positions, rotates q in
// place (n_q = 4 heads: grid (T, 4 + 2)) and k into the cache; one launch for the rows of
// every sequence (each row's position and block table offset: positions, row_tables).
// MANIFEST: "fused_into":7,"head_dim":32,"in":["q"]
// MANIFEST: "fused_into":7,"head_dim":32,"in":["k"]
// MANIFEST: "fused":[6,5],"head_dim":32,"in":["q","k","v"],"launches":[{"args":[{"buffer":"q","shape":["T*128"]},{"buffer":"k","shape":["T*64"]},{"buffer":"v","shape":["T*64"]},{"kv":"k","layer":0,"shape":["kv_pages*4096"]},{"kv":"v","layer":0,"shape":["kv_pages*4096"]},{"block_table":true,"shape":["n_seq*table_stride"]},{"row_tables":true,"shape":["T"]},{"i32":"32"},{"positions":true,"shape":["T"]},{"i32":"32"},{"f32":1000000.0},{"i32":"1"},{"absent":true,"shape":["1"]},{"absent":true,"shape":["1"]},{"f32":0.0},{"i32":"0"},{"i32":"4"}],"dynamic_smem":"0","grid":["T","6","1"],"kernel":"sm_90.rope_kv_store_f16","phase":"all","scope":"batch"}
// Decode attention: one split per 32 keys (16 at most, then longer splits; only those with keys
// launched) into the o_part / lse_part scratches (sized for max_T rows of max_ctx), then the
// reduction, skipped (grid 0) with one split.
// MANIFEST-SAME: {"args":[{"buffer":"q","shape":["T*128"]},{"kv":"k","layer":0,"shape":["kv_pages*4096"]},{"kv":"v","layer":0,"shape":["kv_pages*4096"]},{"block_table":true,"shape":["ceil(ctx/64)"]},{"buffer":"attn","shape":["T*128"]},{"bytes":"min(ceil(max_ctx/32), 16)*max_T*512","scratch":"attn_o_part","shape":["n_split*T*128"]},{"bytes":"min(ceil(max_ctx/32), 16)*max_T*16","scratch":"attn_lse_part","shape":["n_split*T*4"]},{"i32":"T"},{"i32":"pos0"},{"i32":"4"},{"i32":"32"},{"i32":"split_len"},{"f32":0.1767766952966{{[0-9]*}}}],"dynamic_smem":"0","grid":["ceil(T/4)","2","n_split"],"kernel":"sm_90.flash_attention_f16kv","let":{"n_split":"ceil(ctx/split_len)","n_split_max":"min(ceil(ctx/32), 16)","split_len":"ceil(ctx/n_split_max/32)*32"},"phase":"decode","scope":"sequence"}
// MANIFEST-SAME: "grid":["min(n_split-1, 1)*T","4","1"],"kernel":"sm_90.attention_split_reduce","let":{"n_split":"ceil(ctx/split_len)","n_split_max":"min(ceil(ctx/32), 16)","split_len":"ceil(ctx/n_split_max/32)*32"},"phase":"decode","scope":"sequence"}
// Graph op 9 is `x = x + o` (attn_output): fused into op 8. Decode: the GEMV adds the
// residual in place (flags 2, y = res = x); so does the prefill GEMM's epilogue (no add_f32).
// MANIFEST: "fused":[9],"in":["attn","blk.0.attn_output.weight"],"launches":[{"args":[{"buffer":"attn","shape":["T*32"]},{"bytes":"max_T*128","scratch":"x_q8","shape":["T*32"]},{"bytes":"max_T*64","scratch":"x_q8_ds","shape":["T*4"]},{"i32":"T*4"}],"dynamic_smem":"0","grid":["ceil(T/4)","1","1"],"kernel":"sm_90.quantize_q8_x","phase":"decode","scope":"batch"},{"args":[{"shape":["4352"],"weight":"blk.0.attn_output.weight"},{"shape":["4352"],"weight":"blk.0.attn_output.weight"},{"shape":["4352"],"weight":"blk.0.attn_output.weight"},{"bytes":"max_T*128","scratch":"x_q8","shape":["T*8"]},{"bytes":"max_T*64","scratch":"x_q8_ds","shape":["T*4"]},{"buffer":"x","shape":["T*128"]},{"buffer":"x","shape":["T*128"]},{"buffer":"x","shape":["T*128"]},{"absent":true,"shape":["1"]},{"absent":true,"shape":["1"]},{"absent":true,"shape":["1"]},{"buffer":"x","shape":["T*128"]},{"i32":"128"},{"i32":"0"},{"i32":"0"},{"i32":"128"},{"i32":"T"},{"i32":"2"}]
// MANIFEST-SAME: {"args":[{"bytes":"max_T*256","scratch":"x_f16","shape":["T","128"]},{"bytes":"32768","scratch":"w_f16","shape":["128","128"]},{"buffer":"x","shape":["T","128"]},{"absent":true,"shape":["1"]},{"buffer":"x","shape":["T","128"]},{"i32":"2"}],"dynamic_smem":"0","grid":["2","ceil(T/64)","1"],"kernel":"sm_90.gemm_f16","phase":"prefill","scope":"batch"}],"op":"matmul","out":"o"}
// MANIFEST-SAME: "fused_into":8,"in":["x","o"]
// Greedy sampling on the device: argmax of the logits' output rows (docs/package-format.md),
// on PTX in two passes: each part of 4096 logits (here one) to argmax_part_v / _i, then
// their first maximum into argmax_ids.
// MANIFEST-SAME: "sampling":{"argmax":{"in":["logits"],"launches":[{"args":[{"buffer":"logits","shape":["T*512"]},{"bytes":"max_T*4","scratch":"argmax_part_v","shape":["T"]},{"bytes":"max_T*4","scratch":"argmax_part_i","shape":["T"]},{"i32":"512"},{"i32":"4096"}],"dynamic_smem":"0","grid":["T","1","1"],"kernel":"sm_90.argmax_split_f32","phase":"all","rows":"output","scope":"batch"},{"args":[{"bytes":"max_T*4","scratch":"argmax_part_v","shape":["T"]},{"bytes":"max_T*4","scratch":"argmax_part_i","shape":["T"]},{"bytes":"max_T*4","scratch":"argmax_ids","shape":["T"]},{"i32":"1"},{"i32":"512"}],"dynamic_smem":"0","grid":["T","1","1"],"kernel":"sm_90.argmax_reduce_f32","phase":"all","rows":"output","scope":"batch"}],"op":"argmax","out":"argmax_ids","rows":"output"}}
// MANIFEST-SAME: "entry":"sm_90.gemm_f16","file":"swz_gemm_f16.ptx","launch":{"abi":"mlir-memref-expanded","block":[128,1,1],"dynamic_smem":"0","function":"gemm_f16","grid":"ceil(N/64), ceil(T/64), 1","ptxas":{"arch":"sm_90a","registers":{{[0-9]+}},"shared_bytes":49152,"spill_load_bytes":0,"spill_store_bytes":0,"stack_bytes":0},"smem_tiles":[{"claimed_conflict_free":true,"cp_async_16_degree":1,"layout":"{{[^"]*}}Swizzle<3,3,3>{{[^"]*}}","ldmatrix_x4_degree":1,"tile":"gemm_x"}{{.*}}"schedule":"sm_90.gemm"
