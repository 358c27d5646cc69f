// The paged-KV attention kernels (codegen/kernels/attention_f16kv.mlir: kv_store_f16,
// rope_kv_store_f16, flash_attention_f16kv, attention_split_reduce) to PTX, assembled by ptxas for
// sm_90 and sm_80 with no spills and 42,208 bytes of shared memory for the flash
// kernel (Q, K (padded), V, S, O tiles and row statistics, f32), and from the same
// source to SPIR-V (f16 storage buffers, Workgroup variables; spirv-val, Vulkan 1.1).
// REQUIRES: ptxas, spirv-val
// RUN: rm -rf %t && mkdir -p %t/sm_90 %t/sm_80 %t/spirv
// RUN: swizzle-opt %kernels/attention_f16kv.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_90 -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/sm_90/swz_attention_f16kv.ptx
// RUN: %ptxas -arch=sm_90 -v %t/sm_90/swz_attention_f16kv.ptx -o %t/sm_90/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/attention_f16kv.mlir -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/sm_80 -o /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/sm_80/swz_attention_f16kv.ptx -o %t/sm_80/k.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: swizzle-opt %kernels/attention_f16kv.mlir -swz-spirv-workgroup-memory -convert-math-to-spirv \
// RUN:   -convert-gpu-to-spirv -spirv-lower-abi-attrs -spirv-update-vce | FileCheck %s --check-prefix=SPV
// RUN: swizzle-opt %kernels/attention_f16kv.mlir -swz-spirv-workgroup-memory -convert-math-to-spirv \
// RUN:   -convert-gpu-to-spirv -spirv-lower-abi-attrs -spirv-update-vce \
// RUN:   -swz-extract-kernels=output-dir=%t/spirv -o /dev/null
// RUN: %spirv-val --target-env vulkan1.1 %t/spirv/swz_attention_f16kv.spv

// libdevice (expf, logf) is linked and inlined: no .extern left.
// PTX-NOT: .extern
// kv_store_f16: f32 -> f16 with round to nearest even, 16-bit global stores.
// PTX-LABEL: .visible .entry kv_store_f16(
// PTX: .maxntid 64, 1, 1
// PTX: ld.global.s32
// PTX: cvt.rn.f16.f32
// PTX: st.global.b16
// rope_kv_store_f16: the same store with k rotated (RoPE fused into the KV write).
// PTX-LABEL: .visible .entry rope_kv_store_f16(
// PTX: .maxntid 64, 1, 1
// PTX: cvt.rn.f16.f32
// PTX: st.global.b16
// kv_move_rope_f16 (graph.kv_move): f16 K/V read, K rotated in f32 and rounded back.
// PTX-LABEL: .visible .entry kv_move_rope_f16(
// PTX: .maxntid 64, 1, 1
// PTX: ld.global.b16
// PTX: cvt.f32.f16
// PTX: cvt.rn.f16.f32
// PTX: st.global.b16
// PTX-LABEL: .visible .entry flash_attention_f16kv(
// PTX: .maxntid 128, 1, 1
// PTX-DAG: .shared .align 4 .b8 attn_qs[4096];
// PTX-DAG: .shared .align 4 .b8 attn_ks[16512];
// PTX-DAG: .shared .align 4 .b8 attn_vs[16384];
// PTX-DAG: .shared .align 4 .b8 attn_ss[1024];
// PTX-DAG: .shared .align 4 .b8 attn_os[4096];
// PTX-DAG: .shared .align 4 .b8 attn_stat[96];
// Q tile (f32, times scale), then per 32-key tile: block-table lookup, f16 K/V
// loads widened to f32 into shared memory; scores (fma over head_dim from shared
// memory); online softmax (exp); P.V; the epilogue picks out or o_part by the
// grid's z size (the split count).
// PTX: ld.global.f32
// PTX: bar.sync 0;
// PTX: ld.global.s32
// PTX: ld.global.b16
// PTX: cvt.f32.f16
// PTX: st.shared.f32
// PTX: bar.sync 0;
// PTX: fma.rn.f32
// PTX: ex2.approx
// PTX: fma.rn.f32
// PTX: %nctaid.z
// PTX: st.global.f32
// PTX-LABEL: .visible .entry attention_split_reduce(
// PTX: .maxntid 64, 1, 1
// PTX: ex2.approx
// PTX-NOT: .extern

// No function spills; only rope_kv_store_f16 and kv_move_rope_f16 have a stack frame (32
// bytes: libdevice's sinf/cosf slow path for large angles, as in rope_f32); the flash
// kernel's shared memory is exact. ptxas reports the entries last to first.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes {{spill|stack}}
// PTXAS: Compiling entry function 'flash_attention_f16kv'
// PTXAS-NEXT: Function properties for flash_attention_f16kv
// PTXAS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 1 barriers, 42208 bytes smem
// PTXAS-NOT: {{[1-9][0-9]*}} bytes {{spill|stack}}
// PTXAS: Function properties for kv_move_rope_f16
// PTXAS-NEXT: 32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NEXT: Used {{[0-9]+}} registers, used 0 barriers
// PTXAS-NOT: {{[1-9][0-9]*}} bytes {{spill|stack}}
// PTXAS: Function properties for rope_kv_store_f16
// PTXAS-NEXT: 32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT: {{[1-9][0-9]*}} bytes {{spill|stack}}

// SPV: spirv.module @__spv__swz_attention_f16kv Logical GLSL450 requires #spirv.vce<v1.0, [Shader, StorageBuffer16BitAccess, Float16], [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<4128 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<4096 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<256 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<24 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @kv_store_f16_arg_2 bind(0, 2) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<f16, stride=2> [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @flash_attention_f16kv_arg_1 bind(0, 1) : !spirv.ptr<!spirv.struct<(!spirv.rtarray<f16, stride=2> [0])>, StorageBuffer>
// SPV-DAG: spirv.GlobalVariable @flash_attention_f16kv_arg_12 bind(0, 12) : !spirv.ptr<!spirv.struct<(f32 [0])>, StorageBuffer>
// SPV-DAG: spirv.FConvert %{{.*}} : f32 to f16
// SPV-DAG: spirv.FConvert %{{.*}} : f16 to f32
// SPV-DAG: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV-DAG: spirv.GL.Exp
// SPV-DAG: spirv.GL.Log
// SPV-DAG: spirv.ExecutionMode @kv_store_f16 "LocalSize", 64, 1, 1
// SPV-DAG: spirv.ExecutionMode @flash_attention_f16kv "LocalSize", 128, 1, 1
// SPV-DAG: spirv.ExecutionMode @attention_split_reduce "LocalSize", 64, 1, 1
