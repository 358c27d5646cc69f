// swz-lower-tiles: the GEMM kernel generated from a scheduled swz.gemm_tile. A schedule
// edit (tile sizes, warps, stages, swizzle) changes the generated kernel, and the
// bank-conflict proof runs on what the pass emits.
//
// The sm_80 schedule: 64x64x64 tiles, 4 warps (2 x 2, 32x32 each), 3 stages, mma.sync.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=SM80
// The sm_90 schedule: 64x64x64 tiles, one warpgroup of wgmma.m64n64k16, 3 stages (two k
// tiles copied ahead; each k tile's wgmma group waited for before the next barrier).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%schedules/sm_90.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=WGMMA
// mma_in_flight 1: k tile kt's wgmma group stays pending across the next wait and barrier
// (wgmma.wait_group 1; 0 after the loop), so one k tile fewer is copied ahead.
// RUN: rm -rf %t && mkdir -p %t
// RUN: sed -e 's/"stages": 3,/"stages": 3, "mma_in_flight": 1,/' %schedules/sm_90.json > %t/inflight.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/inflight.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=INFLIGHT
// 128x128x64 on two warpgroups (wgmma.m64n128k16), 4 stages, a group in flight: 128 KiB of tiles, more than a
// block may declare statically, so the kernel declares dynamic shared memory (the tiles
// plus 1008 bytes to round the window up to 1024) and swz-dynamic-smem places the tiles.
// RUN: sed -e 's/"tile_m": 64, "tile_n": 64, "tile_k": 64/"tile_m": 128, "tile_n": 128, "tile_k": 64/' \
// RUN:     -e 's/"warps": 4, "stages": 3,/"warps": 8, "stages": 4, "mma_in_flight": 1,/' \
// RUN:     -e 's/"mma": "wgmma.m64n64k16"/"mma": "wgmma.m64n128k16"/' %schedules/sm_90.json > %t/big.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/big.json -swz-lower-tiles \
// RUN:   | FileCheck %s --check-prefix=BIG
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/big.json -swz-lower-tiles \
// RUN:   -swz-materialize-swizzle -swz-dynamic-smem | FileCheck %s --check-prefix=DYN
// A shape class (gemm.classes): swz-apply-schedule adds @gemm_f16_narrow with the class's
// fields, and swz-lower-tiles writes its kernel beside @gemm_f16's in @swz_gemm_f16, with its
// own shared tiles and schedule entry.
// RUN: %python -c "import json,sys; s=json.load(open(sys.argv[1])); s['gemm']['classes']=[{'name':'narrow','n_max':1536,'tile_n':32,'stages':4,'mma':'wgmma.m64n32k16'}]; json.dump(s, open(sys.argv[2], 'w'))" %schedules/sm_90.json %t/classes.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/classes.json | FileCheck %s --check-prefix=CLASSOP
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/classes.json -swz-lower-tiles | FileCheck %s --check-prefix=CLASS
// Applied again with a schedule whose class is another: the stale copy goes, the new one
// comes (a copy is never a base).
// RUN: sed -e 's/"name": "narrow", "n_max": 1536/"name": "wide", "n_min": 8192/' %t/classes.json > %t/classes2.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/classes.json | swizzle-opt -swz-apply-schedule=schedule=%t/classes2.json \
// RUN:   | FileCheck %s --check-prefix=RECLASS
// The same kernel source with the schedule edited: 32x64x32 tiles on 2 warps (1 x 2,
// 32x32 each), 2 stages, Swizzle<2,3,3> for the 64-byte rows.
// RUN: sed -e 's/"tile_m": 64, "tile_n": 64, "tile_k": 64/"tile_m": 32, "tile_n": 64, "tile_k": 32/' \
// RUN:     -e 's/"warps": 4, "stages": 3,/"warps": 2, "stages": 2,/' \
// RUN:     -e '20s/"bits": 3, "base": 3, "shift": 3/"bits": 2, "base": 3, "shift": 3/' \
// RUN:     %schedules/sm_80.json > %t/small.json
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles | FileCheck %s --check-prefix=SMALL
// The swizzle of the edited schedule, materialised into the ldmatrix column index:
// col ^ (((row * 32 + col) >> 3) & 24).
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles -swz-materialize-swizzle \
// RUN:   | FileCheck %s --check-prefix=XOR
// Both layouts are conflict-free by the static proof, on the tiles the pass emits.
// RUN: swizzle-opt %s -swz-apply-schedule=schedule=%t/small.json -swz-lower-tiles -swz-check-bank-conflicts \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=BANKS
// Without the swizzle the 64-byte rows are 4-way conflicted for ldmatrix.x4, and the
// schedule's conflict_free claim fails.
// RUN: sed -e '20d' %t/small.json > %t/noswizzle.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/noswizzle.json -swz-lower-tiles \
// RUN:   -swz-check-bank-conflicts -o /dev/null 2>&1 | FileCheck %s --check-prefix=CONFLICT

swz.gemm_tile @gemm_f16 : f16

// SM80: module attributes {gpu.container_module}
// SM80: gpu.module @swz_gemm_f16
// SM80-DAG: memref.global "private" @gemm_x : memref<192x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SM80-DAG: memref.global "private" @gemm_w : memref<192x64xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// SM80: gpu.func @gemm_f16(%[[X:[^:]*]]: memref<?x?xf16>, %[[W:[^:]*]]: memref<?x?xf16>, %[[Y:[^:]*]]: memref<?x?xf32>, %[[B:[^:]*]]: memref<?xf32>, %[[RES:[^:]*]]: memref<?x?xf32>, %[[FLAGS:[^:]*]]: i32) kernel
// SM80-SAME: known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(N/64), ceil(T/64), 1", swz.schedule = "gemm"
// Prologue: k tiles 0 and 1 (stages - 1), four 16-row copy passes an operand each.
// SM80: scf.for %{{.*}} = %c0 to %c4 step %c1
// SM80: nvgpu.device_async_copy
// SM80: nvgpu.device_async_create_group
// SM80: scf.if
// SM80: nvgpu.device_async_create_group
// SM80-NOT: nvgpu.device_async_create_group
// SM80: scf.for {{.*}} -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>)
// SM80-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// SM80-NEXT: gpu.barrier
// SM80: arith.remui %{{.*}}, %{{.*}} : index
// SM80: scf.for {{.*}} -> (vector<2x2xf32>
// SM80-COUNT-4: nvgpu.ldmatrix
// SM80-COUNT-8: nvgpu.mma.sync
// SM80: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// Epilogue: flags bit 0 adds bias[n], bit 1 the residual res[t, n] (y = (acc + bias) + res,
// the residual read by the thread that then writes y, so res may be y).
// SM80: %[[C1:.*]] = arith.constant 1 : i32
// SM80-NEXT: %[[BBIT:.*]] = arith.andi %[[FLAGS]], %[[C1]] : i32
// SM80: %[[C2:.*]] = arith.constant 2 : i32
// SM80-NEXT: %[[RBIT:.*]] = arith.andi %[[FLAGS]], %[[C2]] : i32
// SM80-NEXT: %[[USERES:.*]] = arith.cmpi ne, %[[RBIT]], %{{.*}} : i32
// SM80: %[[BIAS:.*]] = scf.if %{{.*}} -> (f32) {
// SM80-NEXT: memref.load %[[B]]
// The 32 residuals of the thread's 2 x 4 fragments of 4 elements, all loaded (each under
// its bounds) before the first store: y may be res, so a store before a load would order
// them.
// SM80: %[[RV:.*]]:32 = scf.if %[[USERES]] -> (f32, f32,
// SM80-NEXT: %[[OK:.*]] = arith.andi
// SM80-NEXT: scf.if %[[OK]] -> (f32) {
// SM80-NEXT: memref.load %[[RES]][%[[ROW:.*]], %[[COL:.*]]] : memref<?x?xf32>
// SM80-COUNT-31: memref.load %[[RES]]
// SM80-NOT: memref.store
// SM80: } else {
// 32 masked stores: y = (acc + bias) + res with the flag, acc + bias without.
// SM80: scf.if
// SM80-NEXT: %[[S:.*]] = arith.addf %{{.*}}, %[[BIAS]] : f32
// SM80-NEXT: %[[SR:.*]] = arith.addf %[[S]], %[[RV]]#0 : f32
// SM80-NEXT: %[[OUT:.*]] = arith.select %[[USERES]], %[[SR]], %[[S]] : f32
// SM80-NEXT: memref.store %[[OUT]], %[[Y]][%[[ROW]], %[[COL]]] : memref<?x?xf32>
// SM80-COUNT-31: memref.store
// SM80: gpu.return

// SMALL-DAG: memref.global "private" @gemm_x : memref<64x32xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<2, 3, 3>}
// SMALL-DAG: memref.global "private" @gemm_w : memref<128x32xf16, #gpu.address_space<workgroup>> {alignment = 128 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<2, 3, 3>}
// SMALL: known_block_size = array<i32: 64, 1, 1>, swz.grid = "ceil(N/64), ceil(T/32), 1"
// 64 threads copy 16 rows of four 16-byte chunks a pass: 2 passes of x, 4 of W.
// SMALL: scf.for %{{.*}} = %c0 to %c2 step %c1
// SMALL: scf.for %{{.*}} = %c0 to %c4 step %c1
// SMALL: nvgpu.device_async_create_group
// SMALL-NOT: nvgpu.device_async_create_group
// SMALL: scf.for {{.*}} iter_args
// With 2 stages the tile landing next is the only group in flight.
// SMALL-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// SMALL: scf.for %{{.*}} = %{{.*}} to %c32 step %c16
// SMALL-COUNT-4: nvgpu.ldmatrix
// SMALL-COUNT-8: nvgpu.mma.sync

// XOR-LABEL: scf.for %{{.*}} = %c0 to %c32 step %c16
// XOR: %[[ROWOFF:.*]] = arith.muli %{{.*}}, %c32{{.*}} : index
// XOR-NEXT: %[[LIN:.*]] = arith.addi %[[ROWOFF]], %[[COL:.*]] : index
// XOR-NEXT: %[[C3:.*]] = arith.constant 3 : index
// XOR-NEXT: %[[SH:.*]] = arith.shrui %[[LIN]], %[[C3]] : index
// XOR-NEXT: %[[C24:.*]] = arith.constant 24 : index
// XOR-NEXT: %[[M:.*]] = arith.andi %[[SH]], %[[C24]] : index
// XOR-NEXT: %[[SC:.*]] = arith.xori %[[COL]], %[[M]] : index
// XOR-NEXT: nvgpu.ldmatrix %{{.*}}[%{{.*}}, %[[SC]]] {numTiles = 4 : i32, transpose = false} : memref<64x32xf16

// BANKS: remark: memref.global @gemm_x: tile 64x32 of 2-byte elements (64-byte rows, Swizzle<2,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way
// BANKS: remark: memref.global @gemm_w: tile 128x32 of 2-byte elements (64-byte rows, Swizzle<2,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way

// CONFLICT: error: memref.global @gemm_x claims conflict_free but ldmatrix.x4 on smem tile (64x32 of 2-byte elements (64-byte rows, row-major)) is {{[0-9]+}}-way bank-conflicted

// WGMMA-DAG: memref.global "private" @gemm_x : memref<192x64xf16, #gpu.address_space<workgroup>> {alignment = 1024 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// WGMMA-DAG: memref.global "private" @gemm_w : memref<192x64xf16, #gpu.address_space<workgroup>> {alignment = 1024 : i64, swz.conflict_free, swz.smem_layout = #swz.swizzle<3, 3, 3>}
// WGMMA: known_block_size = array<i32: 128, 1, 1>, swz.grid = "ceil(N/64), ceil(T/64), 1"
// The tiles' base addresses, for the descriptors (128-byte swizzle, stride 1024 bytes).
// WGMMA: memref.extract_aligned_pointer_as_index
// WGMMA: memref.extract_aligned_pointer_as_index
// WGMMA: scf.for {{.*}} iter_args({{.*}}) -> (!llvm.struct<(f32, f32,
// WGMMA-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// WGMMA-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WGMMA-NEXT: gpu.barrier
// Two k tiles copied ahead: after the barrier, tile kt + 2 into stage (kt + 2) % 3.
// WGMMA: arith.addi %{{.*}}, %c2{{.*}} : index
// The stage's byte offsets: A (stage * 64 + warpgroup * 64) rows of 128 bytes, B stage * 64
// rows of 128 bytes = stage * 8192.
// WGMMA: %[[ST:.*]] = arith.remui %{{.*}}, %c3 : index
// WGMMA: arith.muli %{{.*}}, %c128 : index
// WGMMA: arith.muli %[[ST]], %c8192 : index
// WGMMA: nvvm.wgmma.fence.aligned
// A descriptor: ((address & 0x3FFFF) >> 4) | 128-byte swizzle (1 << 62) | stride 1024
// bytes (64 << 32) | LBO 1 (1 << 16); the k16 steps 32 bytes apart in the 128-byte rows.
// WGMMA: arith.andi %{{.*}}, %c262143_i64 : i64
// WGMMA-NEXT: arith.shrui %{{.*}}, %c4_i64 : i64
// WGMMA: arith.constant 4611686293305360384 : i64
// WGMMA: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// WGMMA: arith.constant 32 : i64
// WGMMA: nvvm.wgmma.mma_async
// WGMMA: arith.constant 64 : i64
// WGMMA: nvvm.wgmma.mma_async
// WGMMA: arith.constant 96 : i64
// WGMMA: nvvm.wgmma.mma_async
// WGMMA-NOT: nvvm.wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-NOT: nvvm.wgmma.wait.group.sync.aligned
// WGMMA-NOT: swz.dynamic_smem
// 16 n8 tiles x 2 rows x 2 columns of D a thread, one masked store each.
// WGMMA: llvm.extractvalue
// WGMMA-COUNT-32: memref.store

// INFLIGHT: scf.for {{.*}} iter_args({{.*}}) -> (!llvm.struct<(f32, f32,
// INFLIGHT-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// INFLIGHT-NEXT: nvvm.fence.proxy
// INFLIGHT-NEXT: gpu.barrier
// INFLIGHT-NEXT: arith.addi %{{.*}}, %c1 : index
// INFLIGHT: nvvm.wgmma.commit.group.sync.aligned
// INFLIGHT-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// INFLIGHT-NEXT: scf.yield
// INFLIGHT: nvvm.wgmma.wait.group.sync.aligned 0
// INFLIGHT-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}

// BIG-DAG: memref.global "private" @gemm_x : memref<512x64xf16, #gpu.address_space<workgroup>> {alignment = 1024 : i64
// BIG-DAG: memref.global "private" @gemm_w : memref<512x64xf16, #gpu.address_space<workgroup>> {alignment = 1024 : i64
// BIG: known_block_size = array<i32: 256, 1, 1>, swz.dynamic_smem = "132080", swz.grid = "ceil(N/128), ceil(T/128), 1"
// BIG: scf.for {{.*}} iter_args({{.*}}) -> (!llvm.struct<(f32, f32,
// BIG-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// BIG: gpu.barrier
// BIG: arith.addi %{{.*}}, %c2{{.*}} : index
// BIG: arith.muli %{{.*}}, %c16384 : index
// BIG: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// BIG: nvvm.wgmma.wait.group.sync.aligned 1
// 64 D registers of f32 a thread: 32 n8 tiles x 2 rows x 2 columns.
// BIG-COUNT-64: memref.store

// The tiles as views of the dynamic window, whose base the kernel rounds up to 1024.
// The window's symbol, external (CUDA's `extern __shared__`): the NVVM lowering takes it
// rather than making an internal 0-byte one, which NVPTX turns into a static variable.
// DYN-NOT: memref.global
// DYN: llvm.mlir.global external @swz_dynamic_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// DYN-NOT: memref.global
// DYN: swz.dynamic_smem = "132080"
// DYN: %[[WIN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// DYN: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[WIN]]
// DYN: %[[R:.*]] = arith.remui %[[P]], %c1024
// DYN: %[[U:.*]] = arith.subi %c1024{{.*}}, %[[R]]
// DYN: %[[SHIFT:.*]] = arith.remui %[[U]], %c1024
// DYN: memref.view %[[WIN]][%[[SHIFT]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<512x64xf16, #gpu.address_space<workgroup>>
// DYN: %[[OFF:.*]] = arith.addi %[[SHIFT]], %c65536
// DYN: memref.view %[[WIN]][%[[OFF]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<512x64xf16, #gpu.address_space<workgroup>>
// DYN-NOT: memref.get_global

// CLASSOP: swz.gemm_tile @gemm_f16 : f16 tile(64, 64, 64) warps(4) stages(3)
// CLASSOP-NOT: shape_class
// CLASSOP-NEXT: swz.gemm_tile @gemm_f16_narrow : f16 tile(64, 32, 64) warps(4) stages(4) {{.*}}mma = "wgmma.m64n32k16", shape_class = "narrow"

// CLASS: gpu.module @swz_gemm_f16 {
// CLASS-DAG: memref.global "private" @gemm_narrow_x : memref<256x64xf16
// CLASS-DAG: memref.global "private" @gemm_narrow_w : memref<128x64xf16
// CLASS-DAG: gpu.func @gemm_f16_narrow({{.*}} swz.grid = "ceil(N/32), ceil(T/64), 1", swz.schedule = "gemm.narrow"
// CLASS-DAG: memref.global "private" @gemm_x : memref<192x64xf16
// CLASS-DAG: gpu.func @gemm_f16({{.*}} swz.grid = "ceil(N/64), ceil(T/64), 1", swz.schedule = "gemm"}
// CLASS-NOT: gpu.module

// RECLASS-NOT: narrow
// RECLASS: swz.gemm_tile @gemm_f16 : f16 tile(64, 64, 64)
// RECLASS-NEXT: swz.gemm_tile @gemm_f16_wide : f16 tile(64, 32, 64) {{.*}}shape_class = "wide"
// RECLASS-NOT: gemm_tile
