// The sm_89 target: compiler/schedules/sm_89.json, Ada Lovelace (RTX 40xx, L4, L40S).
// Adding a GPU generation is its schedule file, its name in package::known_targets()
// and compiler/CMakeLists.txt, and this test (docs/compiler-guide.md, "Adding a GPU").
// The schedule fills the tile specs (tile sizes, warps, stages, copy and MMA kinds, the
// Swizzle<B,M,S> of the shared-memory tiles), the bank-conflict proof holds for them,
// and the tensor-core prefill GEMM (generated from the schedule), the tensor-core flash attention and the decode
// attention lower to PTX for sm_89 that ptxas assembles without spills.
// REQUIRES: ptxas
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_89.json | FileCheck %s --check-prefix=TILES
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_89.json -swz-check-bank-conflicts -o /dev/null
// RUN: rm -rf %t && mkdir -p %t/gemm %t/attn %t/decode
// RUN: swizzle-opt %kernels/gemm_f16.mlir -swz-apply-schedule=schedule=%schedules/sm_89.json -swz-lower-tiles -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_89 cubin-format=isa" -swz-extract-kernels=output-dir=%t/gemm -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,GEMM < %t/gemm/swz_gemm_f16.ptx
// RUN: %ptxas -arch=sm_89 -v %t/gemm/swz_gemm_f16.ptx -o %t/gemm/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/attention_f16kv_mma.mlir -swz-apply-schedule=schedule=%schedules/sm_89.json -swz-lower-tiles -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_89 cubin-format=isa" -swz-extract-kernels=output-dir=%t/attn -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,ATTN < %t/attn/swz_attention_f16kv_mma.ptx
// RUN: %ptxas -arch=sm_89 -v %t/attn/swz_attention_f16kv_mma.ptx -o %t/attn/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/attention_decode.mlir -swz-apply-schedule=schedule=%schedules/sm_89.json -swz-lower-tiles -swz-materialize-swizzle \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_89 cubin-format=isa" -swz-extract-kernels=output-dir=%t/decode -o /dev/null
// RUN: FileCheck %s --check-prefixes=PTX,DECODE < %t/decode/swz_attention_decode.ptx
// RUN: %ptxas -arch=sm_89 -v %t/decode/swz_attention_decode.ptx -o %t/decode/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// TILES: swz.gemm_tile @ffn_up : f16 tile(64, 64, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_89"}
swz.gemm_tile @ffn_up : f16
// TILES: swz.attention_tile @attn128 : f16 head_dim(128) block(64, 64) warps(4) stages(1) smem(#swz.swizzle<3, 3, 4>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_89"}
swz.attention_tile @attn128 : f16 head_dim(128)

// PTX: .version 7.8
// PTX: .target sm_89
// GEMM: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// GEMM: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// ATTN: cp.async.cg.shared.global
// ATTN: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// DECODE: .entry flash_decode_f16kv_hd128
// DECODE: shfl.sync.bfly.b32
// DECODE: atom.global.add.u32
// DECODE: fence.acq_rel.gpu
// PTXAS-NOT: bytes spill stores, {{[1-9]}}
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: bytes spill stores, {{[1-9]}}
