// Round trip of the tile-spec ops, unscheduled and scheduled.
// RUN: swizzle-opt %s | swizzle-opt | FileCheck %s

// CHECK: swz.gemm_tile @unscheduled : f16{{$}}
swz.gemm_tile @unscheduled : f16
// CHECK: swz.gemm_tile @sm80 : f16 tile(128, 128, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_80"}
swz.gemm_tile @sm80 : f16 tile(128, 128, 64) warps(4) stages(3) smem(#swz.swizzle<3, 3, 3>)
    {conflict_free, copy = "cp.async.cg.16", mma = "mma.sync.m16n8k16", target = "sm_80"}
// No smem layout = plain row-major.
// CHECK: swz.gemm_tile @rowmajor : bf16 tile(64, 64, 32) warps(2) stages(2){{$}}
swz.gemm_tile @rowmajor : bf16 tile(64, 64, 32) warps(2) stages(2)

// CHECK: swz.attention_tile @fa_unscheduled : f16 head_dim(128){{$}}
swz.attention_tile @fa_unscheduled : f16 head_dim(128)
// CHECK: swz.attention_tile @fa : f16 head_dim(64) block(64, 64) warps(4) stages(2) smem(#swz.swizzle<3, 3, 3>) {conflict_free}
swz.attention_tile @fa : f16 head_dim(64) block(64, 64) warps(4) stages(2) smem(#swz.swizzle<3, 3, 3>) {conflict_free}
