// What the dequantizing (skinny) GEMM refuses, each error naming the schedule field.
// RUN: rm -rf %t && mkdir -p %t
// A ring over the 48 KiB of static shared memory (q6_k: 7 x 32 rows x 240 bytes).
// RUN: sed -e 's/"q6_k": 6/"q6_k": 7/' %schedules/sm_80.json > %t/deep.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/deep.json -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=SMEM
// A schedule without gemm.skinny.
// RUN: sed -e 's/"skinny_max_rows": 1, .*$/"skinny_max_rows": 0/' %schedules/sm_80.json > %t/none.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/none.json 2>&1 | FileCheck %s --check-prefix=NONE
// skinny_max_rows without the kernel's geometry, or more rows than its m-tiles.
// RUN: sed -e 's/"skinny_max_rows": 1, .*$/"skinny_max_rows": 1/' %schedules/sm_80.json > %t/rows.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/rows.json 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: sed -e 's/"skinny_max_rows": 1,/"skinny_max_rows": 33,/' -e 's/"m_tiles": 4/"m_tiles": 2/' %schedules/sm_80.json > %t/many.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/many.json 2>&1 | FileCheck %s --check-prefix=MANY
// m_tiles not a power of two; a stage ring of one.
// RUN: sed -e 's/"m_tiles": 4/"m_tiles": 3/' %schedules/sm_80.json > %t/mt.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/mt.json 2>&1 | FileCheck %s --check-prefix=MTILES
// RUN: sed -e 's/"q8_0": 4/"q8_0": 1/' %schedules/sm_80.json > %t/one.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/one.json 2>&1 | FileCheck %s --check-prefix=ONE
// A tile set by hand that the generator cannot emit (tile_k is a 256-weight stage).
// RUN: not swizzle-opt %s -split-input-file -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=HAND

// SMEM: error: swz-lower-tiles: the dequantizing GEMM @gemm_skinny_q6_k (gemm.skinny): gemm.skinny.stages.q6_k = 7 needs 53760 bytes of workgroup memory (7 stages x 32 rows x 240 bytes), more than the 49152 bytes of static shared memory this kernel may declare
// NONE: error: @gemm_skinny_q4_k (weights "q4_k") needs the sm_80 schedule's gemm.skinny, which it does not have
// ROWS: $.gemm.skinny_max_rows: is 1 but there is no $.gemm.skinny (the kernel's geometry)
// MANY: $.gemm.skinny_max_rows: 33 is more than the skinny GEMM's 32 rows ($.gemm.skinny.m_tiles 2 of 16)
// MTILES: $.gemm.skinny.m_tiles: 3 is not 1, 2, 4 or 8
// ONE: $.gemm.skinny.stages.q8_0: must be >= 2, got 1
module {
  swz.gemm_tile @gemm_skinny_q4_k : f16 {weights = "q4_k"}
  swz.gemm_tile @gemm_skinny_q6_k : f16 {weights = "q6_k"}
}

// -----

// HAND: error: swz-lower-tiles: the dequantizing GEMM @gemm_skinny_q8_0 (gemm.skinny): a stage is 256 weights of a row (tile_k 256), got tile_k 128
module {
  swz.gemm_tile @gemm_skinny_q8_0 : f16 tile(64, 32, 128) warps(4) stages(4) {mma = "mma.sync.m16n8k16", copy = "cp.async.cg.16", weights = "q8_0"}
}

// -----

// HAND: error: swz-lower-tiles: @skinny has weights "q4_k" but is not named <base>_q4_k
module {
  swz.gemm_tile @skinny : f16 tile(64, 32, 256) warps(4) stages(8) {mma = "mma.sync.m16n8k16", copy = "cp.async.cg.16", weights = "q4_k"}
}

// -----

// HAND: error: 'swz.gemm_tile' op weights "q5_k" is not a block format the dequantizing GEMM reads (q4_k, q6_k, q8_0)
module {
  swz.gemm_tile @gemm_skinny_q5_k : f16 {weights = "q5_k"}
}
