// Errors of swz-lower-tiles: what the generator does not emit is refused, naming why.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not swizzle-opt %s -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// mma.sync schedules (sm_80.json edited):
// Tiles beyond the device's shared memory per block (sm_80: 166912 bytes; 196608 of tiles + 112
// of dynamic shared memory's alignment slack) are refused when
// the schedule is applied (tiles over the static 48 KiB get dynamic shared memory).
// RUN: sed -e 's/"tile_m": 64, "tile_n": 64, "tile_k": 64/"tile_m": 256, "tile_n": 128, "tile_k": 64/' \
// RUN:     -e 's/"warps": 4, "stages": 3,/"warps": 8, "stages": 4,/' %schedules/sm_80.json > %t/big.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/big.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=SMEM
// mma_in_flight is wgmma's (mma.sync is synchronous).
// RUN: sed -e 's/"stages": 3,/"stages": 3, "mma_in_flight": 1,/' %schedules/sm_80.json > %t/inflight.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/inflight.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: sed -e 's/"tile_m": 64, "tile_n": 64, "tile_k": 64/"tile_m": 16, "tile_n": 32, "tile_k": 64/' \
// RUN:     %schedules/sm_80.json > %t/thin.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/thin.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=WARPS
// wgmma schedules (sm_90.json edited): N of the instruction is tile_n, a warpgroup per 64
// rows, the 128-byte swizzle.
// RUN: sed -e 's/"mma": "wgmma.m64n64k16"/"mma": "wgmma.m64n128k16"/' %schedules/sm_90.json > %t/wgmma.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/wgmma.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: sed -e 's/"warps": 4, "stages": 3,/"warps": 8, "stages": 3,/' %schedules/sm_90.json > %t/wg-warps.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/wg-warps.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=WGWARPS
// RUN: sed -e 's/"tile_m": 64, "tile_n": 64, "tile_k": 64/"tile_m": 64, "tile_n": 64, "tile_k": 32/' \
// RUN:     -e '20s/"bits": 3/"bits": 2/' %schedules/sm_90.json > %t/wg-k32.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/wg-k32.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=WGSWIZZLE
// wgmma on a schedule whose arch is not sm_90a (here sm_89's) is refused when applied.
// RUN: sed -e 's/"mma": "mma.sync.m16n8k16",/"mma": "wgmma.m64n64k16",/' %schedules/sm_89.json > %t/wg-sm89.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/wg-sm89.json 2>&1 | FileCheck %s --check-prefix=WGARCH
// wgmma with a group in flight needs a third stage (the pending multiply's, the current
// one's, one copied ahead).
// RUN: sed -e 's/"stages": 3,/"stages": 2, "mma_in_flight": 1,/' %schedules/sm_90.json > %t/wg-inflight.json
// RUN: not swizzle-opt %s -swz-apply-schedule=schedule=%t/wg-inflight.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=WGINFLIGHT

swz.gemm_tile @gemm_f16 : f16

// UNSCHEDULED: error: swz-lower-tiles: @gemm_f16 has no schedule (run swz-apply-schedule first)
// MMA: error: swz-lower-tiles emits mma.sync.m16n8k16 or wgmma.m64n64k16 (tile_n wide) with cp.async.cg.16 copies; the schedule asks for mma "wgmma.m64n128k16" with copy "cp.async.cg.16"
// SMEM: error: the sm_80 gemm schedule needs 196720 bytes of shared memory per block, more than the 166912 available
// INFLIGHT: error: swz-lower-tiles: mma_in_flight 1 needs wgmma, at most 1 group, and 3 or more stages (the pending multiply's stage and one copied ahead); the schedule has mma.sync.m16n8k16 on 3 stages
// WGINFLIGHT: error: swz-lower-tiles: mma_in_flight 1 needs wgmma, at most 1 group, and 3 or more stages (the pending multiply's stage and one copied ahead); the schedule has wgmma.m64n64k16 on 2 stages
// WARPS: error: swz-lower-tiles: the 16x32 tile over 4 warps (2x2) gives 16/2 x 32/2 warp tiles; each must be a multiple of 16x16
// WGWARPS: error: swz-lower-tiles: wgmma.m64n64k16 needs a warpgroup (4 warps) per 64 rows of tile_m; got tile_m 64 on 8 warps
// WGARCH: error: the sm_89 schedule's gemm asks for wgmma.m64n64k16, which needs device.arch "sm_90a" (Hopper-specific PTX); it says "sm_89"
// WGSWIZZLE: error: swz-lower-tiles: wgmma reads its shared tiles through the 128-byte swizzle: tile_k 64 with #swz.swizzle<3, 3, 3>
