// swz-lower-tiles: the flash-attention prefill kernels generated from scheduled
// swz.attention_tile ops (compiler/mlir/LowerAttention.cpp). Tile specs inside a
// gpu.module lower into it (one kernel file for both head dims, as
// codegen/kernels/attention_f16kv_mma.mlir ships them); a top-level one gets its own
// gpu.module @swz_<name>. A schedule edit changes the generated kernel, and the
// bank-conflict proof runs on what the pass emits.
//
// The sm_80 schedule: block_q 64 on 4 warps (16 rows each), 64-key pages, stages 1.
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SM80
// The same specs with the schedule edited to 2 warps (block_q 32): the block, the grid
// rule, the Q tile, the row offset and the loop bounds follow.
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/"block_q": 64, "block_kv": 64,/"block_q": 32, "block_kv": 64,/' \
// RUN:     -e '27s/"warps": 4, "stages": 1,/"warps": 2, "stages": 1,/' %schedules/sm_80.json > %t/small.json
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SMALL
// The swizzle materialised into the shared-memory addresses: col ^ (((row * 64 + col) >> 3)
// & 56) on 128-byte rows (Swizzle<3, 3, 3>), col ^ (((row * 128 + col) >> 4) & 56) on
// 256-byte rows (Swizzle<3, 3, 4>).
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle | FileCheck %s --check-prefix=XOR
// The static proof on the tiles the pass emits: conflict-free for ldmatrix and cp.async,
// before and after materialisation.
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// RUN: swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS

gpu.module @swz_attn_small {
  swz.attention_tile @attn : f16 head_dim(64)
  swz.attention_tile @attn128 : f16 head_dim(128)
}

// SM80: module attributes {gpu.container_module}
// SM80: gpu.module @swz_attn_small
// SM80-NEXT: memref.global "private" @attn_q : memref<64x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SM80-NEXT: memref.global "private" @attn_k : memref<64x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SM80-NEXT: memref.global "private" @attn_v : memref<64x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SM80-NEXT: gpu.func @attn(%{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32) kernel
// SM80-SAME: attributes {known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(T*n_head/n_head_kv/64), n_head_kv, n_split", swz.schedule = "attention"}
// SM80: arith.muli %block_id_x, %c64 : index
// Q tile: 64 rows x 64 features over 128 threads.
// SM80: scf.for %{{.*}} = %thread_id_x to %c4096 step %c128
// head_dim 64 keeps the 4 Q fragments in registers.
// SM80-COUNT-4: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x64xf16
// Key tiles of 64 (one page); the page's 512 chunks of 16 bytes: 4 passes of 128 threads.
// SM80: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64 iter_args
// SM80: scf.for %{{.*}} = %c0 to %c4 step %c1
// SM80-COUNT-2: nvgpu.device_async_copy
// SM80: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// S = Q K^T: 4 k-steps x 8 n-tiles; O += P V: 4 k-steps x 8 n-tiles.
// SM80-COUNT-32: nvgpu.mma.sync
// SM80: gpu.shuffle xor
// SM80-COUNT-32: nvgpu.mma.sync
// SM80-NOT: nvgpu.mma.sync
// SM80: gpu.return
// SM80: memref.global "private" @attn128_q : memref<64x128xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 4>}
// SM80: gpu.func @attn128(
// SM80-SAME: known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(T*n_head/n_head_kv/64), n_head_kv, n_split"
// SM80: scf.for %{{.*}} = %thread_id_x to %c8192 step %c128
// SM80: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64 iter_args
// SM80: scf.for %{{.*}} = %c0 to %c8 step %c1
// head_dim 128 reloads its 8 Q fragments per key tile: 8 k-steps x 8 n-tiles, then 4 x 16.
// SM80-COUNT-64: nvgpu.mma.sync
// SM80: gpu.shuffle xor
// SM80-COUNT-64: nvgpu.mma.sync
// SM80-NOT: nvgpu.mma.sync
// SM80: gpu.return

// SMALL: gpu.module @swz_attn_small
// SMALL-NEXT: memref.global "private" @attn_q : memref<32x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SMALL-NEXT: memref.global "private" @attn_k : memref<64x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SMALL: gpu.func @attn(
// SMALL-SAME: attributes {known_block_size = array<i32: 64, 1, 1>, swz.grid = "ceil(T*n_head/n_head_kv/32), n_head_kv, n_split", swz.schedule = "attention"}
// SMALL: arith.muli %block_id_x, %c32 : index
// SMALL: scf.for %{{.*}} = %thread_id_x to %c2048 step %c64
// SMALL: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64 iter_args
// SMALL: scf.for %{{.*}} = %c0 to %c8 step %c1
// SMALL: gpu.func @attn128(
// SMALL-SAME: attributes {known_block_size = array<i32: 64, 1, 1>, swz.grid = "ceil(T*n_head/n_head_kv/32), n_head_kv, n_split", swz.schedule = "attention"}
// SMALL: scf.for %{{.*}} = %thread_id_x to %c4096 step %c64
// SMALL: scf.for %{{.*}} = %c0 to %c16 step %c1

// The Q tile's f16 store, then the warp's first A fragment (ldmatrix.x4), on 128-byte rows.
// XOR-LABEL: gpu.func @attn(
// XOR: arith.truncf %{{.*}} : f32 to f16
// XOR-NEXT: %[[C64:.*]] = arith.constant 64 : index
// XOR-NEXT: %[[ROWOFF:.*]] = arith.muli %[[R:.*]], %[[C64]] : index
// XOR-NEXT: %[[LIN:.*]] = arith.addi %[[ROWOFF]], %[[D:.*]] : index
// XOR-NEXT: %[[C3:.*]] = arith.constant 3 : index
// XOR-NEXT: %[[SH:.*]] = arith.shrui %[[LIN]], %[[C3]] : index
// XOR-NEXT: %[[C56:.*]] = arith.constant 56 : index
// XOR-NEXT: %[[M:.*]] = arith.andi %[[SH]], %[[C56]] : index
// XOR-NEXT: %[[SD:.*]] = arith.xori %[[D]], %[[M]] : index
// XOR-NEXT: memref.store %{{.*}}, %{{.*}}[%[[R]], %[[SD]]] : memref<32x64xf16
// XOR: %[[QC64:.*]] = arith.constant 64 : index
// XOR-NEXT: %[[QOFF:.*]] = arith.muli %[[QR:.*]], %[[QC64]] : index
// XOR-NEXT: %[[QLIN:.*]] = arith.addi %[[QOFF]], %[[QC:.*]] : index
// XOR-NEXT: %[[QC3:.*]] = arith.constant 3 : index
// XOR-NEXT: %[[QSH:.*]] = arith.shrui %[[QLIN]], %[[QC3]] : index
// XOR-NEXT: %[[QC56:.*]] = arith.constant 56 : index
// XOR-NEXT: %[[QM:.*]] = arith.andi %[[QSH]], %[[QC56]] : index
// XOR-NEXT: %[[QSC:.*]] = arith.xori %[[QC]], %[[QM]] : index
// XOR-NEXT: nvgpu.ldmatrix %{{.*}}[%[[QR]], %[[QSC]]] {numTiles = 4 : i32, transpose = false} : memref<32x64xf16
// The Q tile's store and the K page's cp.async destination on 256-byte rows (head_dim 128).
// XOR-LABEL: gpu.func @attn128(
// XOR: arith.truncf %{{.*}} : f32 to f16
// XOR-NEXT: %[[C128:.*]] = arith.constant 128 : index
// XOR-NEXT: %[[KOFF:.*]] = arith.muli %[[KR:.*]], %[[C128]] : index
// XOR-NEXT: %[[KLIN:.*]] = arith.addi %[[KOFF]], %[[KC:.*]] : index
// XOR-NEXT: %[[C4:.*]] = arith.constant 4 : index
// XOR-NEXT: %[[KSH:.*]] = arith.shrui %[[KLIN]], %[[C4]] : index
// XOR-NEXT: %[[KC56:.*]] = arith.constant 56 : index
// XOR-NEXT: %[[KM:.*]] = arith.andi %[[KSH]], %[[KC56]] : index
// XOR-NEXT: %[[KSC:.*]] = arith.xori %[[KC]], %[[KM]] : index
// XOR-NEXT: memref.store %{{.*}}, %{{.*}}[%[[KR]], %[[KSC]]] : memref<32x128xf16
// XOR: %[[CC128:.*]] = arith.constant 128 : index
// XOR-NEXT: %[[COFF:.*]] = arith.muli %[[CR:.*]], %[[CC128]] : index
// XOR-NEXT: %[[CLIN:.*]] = arith.addi %[[COFF]], %[[CC:.*]] : index
// XOR-NEXT: %[[CC4:.*]] = arith.constant 4 : index
// XOR-NEXT: %[[CSH:.*]] = arith.shrui %[[CLIN]], %[[CC4]] : index
// XOR-NEXT: %[[CC56:.*]] = arith.constant 56 : index
// XOR-NEXT: %[[CM:.*]] = arith.andi %[[CSH]], %[[CC56]] : index
// XOR-NEXT: %[[CSC:.*]] = arith.xori %[[CC]], %[[CM]] : index
// XOR-NEXT: nvgpu.device_async_copy %{{.*}}[%{{.*}}], %{{.*}}[%[[CR]], %[[CSC]]], 8, %{{.*}} {bypassL1} : memref<?xf16> to memref<64x128xf16

// BANKS-DAG: remark: memref.global @attn_q: tile 32x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS-DAG: remark: memref.global @attn_k: tile 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS-DAG: remark: memref.global @attn_v: tile 64x64 of 2-byte elements (128-byte rows, Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS-DAG: remark: memref.global @attn128_q: tile 32x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS-DAG: remark: memref.global @attn128_k: tile 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS-DAG: remark: memref.global @attn128_v: tile 64x128 of 2-byte elements (256-byte rows, Swizzle<3,3,4>): ldmatrix.x4 1-way, cp.async.16 1-way

// -----

// A top-level tile spec gets its own gpu.module.
swz.attention_tile @attn_top : f16 head_dim(64)

// SM80: gpu.module @swz_attn_top
// SM80-NEXT: memref.global "private" @attn_top_q : memref<64x64xf16
// SM80: gpu.func @attn_top(
// SMALL: gpu.module @swz_attn_top
// SMALL-NEXT: memref.global "private" @attn_top_q : memref<32x64xf16
// SMALL: known_block_size = array<i32: 64, 1, 1>
// BANKS: remark: memref.global @attn_top_q: tile 32x64
