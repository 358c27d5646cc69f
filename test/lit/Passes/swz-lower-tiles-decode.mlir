// swz-lower-tiles: the split-K decode attention generated from a swz.attention_tile with
// `decode` and the schedule's attention.decode (LowerAttentionDecode.cpp). The kernel goes
// into the enclosing gpu.module with its workgroup globals (the launch contract of
// codegen/kernels/attention_decode.mlir: module, entry, arguments, grid, block).
//
// The sm_80 schedule: 8 warps (256 threads) share a split's keys, 4 keys in flight a
// warp, 8 query rows a workgroup, splits in units of 32 keys.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SM80
// A schedule edit changes the kernel: 4 warps (128 threads, half the workgroup memory),
// 2 keys in flight (a warp's keys lo + warp + 4 (2 it + u): 8 a loop iteration), and
// nvvm.minctasm 2.
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/"decode": { "warps": 8, "keys_in_flight": 4, "min_ctas_per_sm": 0 }/"decode": { "warps": 4, "keys_in_flight": 2, "min_ctas_per_sm": 2 }/' \
// RUN:     %schedules/sm_80.json > %t/small.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SMALL
// The scheduled op itself (swz-apply-schedule alone), and the bank-conflict check: the
// decode tile stages nothing through ldmatrix or cp.async, so there is nothing to report.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json | FileCheck %s --check-prefix=APPLY
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS --allow-empty

module {
  gpu.module @swz_attention_decode {
    swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) {decode}
  }
}

// APPLY: swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) block(8, 32) warps(8) stages(1) {decode, keys_in_flight = 4 : i32, target = "sm_90"}

// BANKS-NOT: remark
// BANKS-NOT: error

// SM80: module attributes {gpu.container_module}
// SM80-NOT: swz.attention_tile
// SM80: gpu.module @swz_attention_decode {
// 8 warps x 8 rows x 128 features of acc; 8 x 8 of m and l.
// SM80-NEXT: memref.global "private" @dec_o : memref<8192xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: memref.global "private" @dec_m : memref<64xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: memref.global "private" @dec_l : memref<64xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: memref.global "private" @dec_last : memref<1xi32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// SM80-NEXT: gpu.func @flash_decode_f16kv_hd128(%{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: f32) kernel attributes {known_block_size = array<i32: 256, 1, 1>, swz.grid = "n_seq*seq_tiles, n_head_kv, n_split"}
// SM80-NOT: nvvm.minctasm
// SM80-NOT: swz.schedule
// SM80: %[[WARP:.*]] = arith.divui %thread_id_x, %c32 : index
// The split rule: nsm = min(ceil(ctx / 32), max_splits), split_len = ceil(ctx / (nsm 32)) 32.
// SM80: %[[CTX:.*]] = arith.addi %{{[0-9]+}}, %{{[0-9]+}} : index
// SM80-NEXT: %[[MS:.*]] = arith.index_cast %arg13 : i32 to index
// SM80-NEXT: %[[U1:.*]] = arith.subi %c32, %c1 : index
// SM80-NEXT: %[[U2:.*]] = arith.addi %[[CTX]], %[[U1]] : index
// SM80-NEXT: %[[U3:.*]] = arith.divui %[[U2]], %c32 : index
// SM80-NEXT: %[[NSM:.*]] = arith.minui %[[U3]], %[[MS]] : index
// SM80-NEXT: %[[NSM32:.*]] = arith.muli %[[NSM]], %c32 : index
// SM80: %[[SL0:.*]] = arith.divui %{{.*}}, %[[NSM32]] : index
// SM80-NEXT: %[[SL:.*]] = arith.muli %[[SL0]], %c32 : index
// Rows of the workgroup's tile: 8 tile + r.
// SM80: arith.muli %{{.*}}, %c8 : index
// SM80: scf.if
// SM80-NEXT: %[[LO:.*]] = arith.muli %block_id_z, %[[SL]] : index
// Iterations: ceil((hi - lo - warp) / (8 warps x 4 keys)).
// SM80: %[[START:.*]] = arith.addi %[[LO]], %[[WARP]] : index
// SM80-NEXT: arith.cmpi ugt, %{{.*}}, %[[START]] : index
// SM80-NEXT: arith.subi
// SM80-NEXT: arith.select
// SM80-NEXT: %[[REM:.*]] = arith.addi %{{.*}}, %c31 : index
// SM80-NEXT: %[[NIT:.*]] = arith.divui %[[REM]], %c32 : index
// m, l of 8 rows and 4 features of acc a row: 48 loop-carried f32.
// SM80-NEXT: %{{.*}}:48 = scf.for %[[IT:.*]] = %c0 to %[[NIT]] step %c1 iter_args(
// Key u of the iteration: start + 8 (4 it + u); its page and slot in the 64-key page.
// SM80-NEXT: %[[K0:.*]] = arith.muli %[[IT]], %c4 : index
// SM80-NEXT: %[[K1:.*]] = arith.addi %[[K0]], %c0 : index
// SM80-NEXT: %[[K2:.*]] = arith.muli %[[K1]], %c8 : index
// SM80-NEXT: %[[J:.*]] = arith.addi %[[START]], %[[K2]] : index
// SM80: %[[JC:.*]] = arith.select %{{.*}}, %[[J]], %[[START]] : index
// SM80-NEXT: arith.divui %[[JC]], %c64 : index
// SM80: arith.remui %[[JC]], %c64 : index
// K at ((page n_kv + kvh) 64 + slot) 128 + 4 lane.
// SM80: arith.muli %{{.*}}, %c128 : index
// SM80: memref.load %arg1
// Keys 1, 2, 3 of the iteration (their loads before any score), no fifth.
// SM80-COUNT-3: arith.muli %[[IT]], %c4 : index
// SM80-NOT: arith.muli %[[IT]], %c4 : index
// SM80: gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// SM80: gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
// SM80: scf.yield
// The warps' states to workgroup memory, then the combine by groups of 128 threads.
// SM80: gpu.barrier
// SM80: arith.remui %thread_id_x, %c128 : index
// SM80-NEXT: arith.divui %thread_id_x, %c128 : index
// The last split merges: an atomic count, then the loops over the splits.
// SM80: llvm.inline_asm has_side_effects "fence.acq_rel.gpu;", ""  : () -> ()
// SM80: memref.atomic_rmw addi %c1_i32
// SM80: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{.*}} = %cst) -> (f32)
// SM80: gpu.return

// SMALL: memref.global "private" @dec_o : memref<4096xf32
// SMALL-NEXT: memref.global "private" @dec_m : memref<32xf32
// SMALL: gpu.func @flash_decode_f16kv_hd128
// SMALL-SAME: known_block_size = array<i32: 128, 1, 1>, nvvm.minctasm = 2 : i32, swz.grid = "n_seq*seq_tiles, n_head_kv, n_split"
// SMALL: arith.cmpi ugt
// SMALL-NEXT: arith.subi
// SMALL-NEXT: arith.select
// SMALL-NEXT: %[[REM:.*]] = arith.addi %{{.*}}, %c7 : index
// SMALL-NEXT: %[[NIT:.*]] = arith.divui %[[REM]], %c8 : index
// SMALL-NEXT: %{{.*}}:48 = scf.for %[[IT:.*]] = %c0 to %[[NIT]] step %c1 iter_args(
// SMALL-NEXT: %[[K0:.*]] = arith.muli %[[IT]], %c2 : index
// SMALL-NEXT: %[[K1:.*]] = arith.addi %[[K0]], %c0 : index
// SMALL-NEXT: arith.muli %[[K1]], %c4 : index
// SMALL: arith.muli %[[IT]], %c2 : index
// SMALL-NEXT: arith.addi %{{.*}}, %c1 : index
// SMALL-NOT: arith.muli %[[IT]], %c2 : index
// SMALL: scf.yield
