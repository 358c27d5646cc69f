// swz-apply-schedule fills tile specs from compiler/schedules/<target>.json.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json | FileCheck %s --check-prefix=SM80
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json | FileCheck %s --check-prefix=SM90
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/spirv.json | FileCheck %s --check-prefix=SPIRV
// The result is conflict-free wherever a schedule says so:
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-check-bank-conflicts -o /dev/null
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-check-bank-conflicts -o /dev/null

// SM80: swz.gemm_tile @ffn_up : f16 tile(64, 64, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_80"}
// SM90: swz.gemm_tile @ffn_up : f16 tile(64, 64, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "wgmma.m64n64k16", target = "sm_90"}
// SPIRV: swz.gemm_tile @ffn_up : f16 tile(64, 64, 32) warps(4) stages(2) smem(#swz.swizzle<2, 3, 3>) {copy = "load.16", mma = "fma", target = "spirv"}
swz.gemm_tile @ffn_up : f16

// Attention rows are head_dim long; the schedule derives S from it ("shift": "row").
// SM80: swz.attention_tile @attn64 : f16 head_dim(64) block(64, 64) warps(4) stages(1) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_80"}
// SM90: swz.attention_tile @attn64 : f16 head_dim(64) block(64, 64) warps(4) stages(1) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_90"}
// SPIRV: swz.attention_tile @attn64 : f16 head_dim(64) block(64, 32) warps(4) stages(1) {copy = "load.16", mma = "fma", target = "spirv"}
swz.attention_tile @attn64 : f16 head_dim(64)

// SM80: swz.attention_tile @attn128 : f16 head_dim(128) block(64, 64) warps(4) stages(1) smem(#swz.swizzle<3, 3, 4>)
// SM90: swz.attention_tile @attn128 : f16 head_dim(128) block(64, 64) warps(4) stages(1) smem(#swz.swizzle<3, 3, 4>)
// SPIRV: swz.attention_tile @attn128 : f16 head_dim(128) block(64, 32) warps(4) stages(1) {
swz.attention_tile @attn128 : f16 head_dim(128)
