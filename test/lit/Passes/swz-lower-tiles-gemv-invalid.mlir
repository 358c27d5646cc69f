// What the decode GEMVs' tile specs and schedule entries refuse, each error naming the field.
// RUN: rm -rf %t && mkdir -p %t
// Schedule files: no rows, too many rows, an unknown field, a block format the int8 path
// does not have, no gemv.q8x entry for the op's type.
// RUN: sed -e 's/"q4_k": { "rows_per_warp": 2,/"q4_k": { "rows_per_warp": 0,/' %schedules/sm_90.json > %t/rows0.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/rows0.json 2>&1 | FileCheck %s --check-prefix=ROWS0
// RUN: sed -e 's/"q4_k": { "rows_per_warp": 2,/"q4_k": { "rows_per_warp": 9,/' %schedules/sm_90.json > %t/rows9.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/rows9.json 2>&1 | FileCheck %s --check-prefix=ROWS9
// RUN: sed -e 's/"q4_k": { "rows_per_warp": 2,/"q4_k": { "warps": 8, "rows_per_warp": 2,/' %schedules/sm_90.json > %t/field.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/field.json 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: sed -e 's/"q5_0": {/"q5_1": {/' %schedules/sm_90.json > %t/q51.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/q51.json 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: sed -e '/"q4_k": { "rows_per_warp"/d' -e 's/"q4_k_mma_split_k_below_rows": 4096,/"q4_k_mma_split_k_below_rows": 4096, "q8x": {/' %schedules/sm_90.json > %t/noq4k.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/noq4k.json 2>&1 | FileCheck %s --check-prefix=NONE
// The f32 GEMVs' entries: a field they do not have, a type, none for the op's type.
// RUN: sed -e 's/"q4_0": { "units_in_flight": 2 }/"q4_0": { "units_in_flight": 2, "rows_per_warp": 2 }/' %schedules/spirv.json > %t/f32field.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/f32field.json 2>&1 | FileCheck %s --check-prefix=F32FIELD
// RUN: sed -e 's/"f16": { "units_in_flight": 2 }/"bf16": { "units_in_flight": 2 }/' %schedules/spirv.json > %t/bf16.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/bf16.json 2>&1 | FileCheck %s --check-prefix=F32TYPE
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/spirv.json 2>&1 | FileCheck %s --check-prefix=SPIRV
// Bounds: units in flight (both tables), workgroups an SM, a gemv field that does not exist.
// RUN: sed -e 's/"q4_k": { "rows_per_warp": 2, "units_in_flight": 1,/"q4_k": { "rows_per_warp": 2, "units_in_flight": 9,/' %schedules/sm_90.json > %t/uif9.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/uif9.json 2>&1 | FileCheck %s --check-prefix=UIF9
// RUN: sed -e 's/"q4_0": { "units_in_flight": 2 }/"q4_0": { "units_in_flight": 9 }/' %schedules/spirv.json > %t/f32uif9.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/f32uif9.json 2>&1 | FileCheck %s --check-prefix=F32UIF9
// RUN: sed -e 's/"min_ctas_per_sm": 6 }/"min_ctas_per_sm": 33 }/' %schedules/sm_90.json > %t/ctas.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/ctas.json 2>&1 | FileCheck %s --check-prefix=CTAS
// RUN: sed -e 's/"gemv": { "f32": {/"gemv": { "threads": 256, "f32": {/' %schedules/sm_90.json > %t/threads.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/threads.json 2>&1 | FileCheck %s --check-prefix=GEMVKEY
// Specs the verifier or the generator refuse.
// RUN: not swizzle-opt %s -split-input-file -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=HAND

// ROWS0: $.gemv.q8x.q4_k.rows_per_warp: must be >= 1, got 0
// ROWS9: $.gemv.q8x.q4_k.rows_per_warp: 9 is more than 8
// FIELD: $.gemv.q8x.q4_k.warps: not a field of the int8 GEMVs (rows_per_warp, units_in_flight, min_ctas_per_sm)
// TYPE: $.gemv.q8x.q5_1: not a weight type of the int8 GEMVs (q4_1, q4_k, q5_0, q6_k, q8_0)
// NONE: error: @matmul_q4_k_q8x (weights "q4_k") needs the sm_90 schedule's gemv.q8x.q4_k, which it does not have
// UIF9: $.gemv.q8x.q4_k.units_in_flight: 9 is more than 8
// F32UIF9: $.gemv.f32.q4_0.units_in_flight: 9 is more than 8
// CTAS: $.gemv.q8x.q4_k.min_ctas_per_sm: 33 is more than 32
// GEMVKEY: $.gemv.threads: not a gemv field (f32, q8x, f16_mma, f16_mma_split_k, f16_mma_split_k_below_rows, q4_k_mma, q4_k_mma_split_k_below_rows)
// F32FIELD: $.gemv.f32.q4_0.rows_per_warp: not a field of the f32 GEMVs (units_in_flight, min_ctas_per_sm)
// F32TYPE: $.gemv.f32.bf16: not a weight type of the f32 GEMVs (f16, q4_0, q4_1, q4_k, q5_0, q6_k, q8_0)
// The SPIR-V target has no int8 GEMV.
// SPIRV: error: @matmul_q4_k_q8x (weights "q4_k") needs the spirv schedule's gemv.q8x.q4_k, which it does not have
// HAND: error: swz-lower-tiles: @matmul_q4_k_q8x has no schedule (run swz-apply-schedule first)
module {
  gpu.module @swz_gemv_q8x {
    swz.gemv_tile @matmul_q4_k_q8x {activations = "q8x", weights = "q4_k"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op weights must be one of q4_k, q8_0, q6_k, q4_1, q5_0 (the int8 path's block formats), got "q2_k"
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "q8x", weights = "q2_k"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op activations must be "q8x" (int8 blocks of 32, dp4a) or "f32", got "f16"
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f16", weights = "q8_0"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op weights must be one of q4_0, q4_1, q5_0, q8_0, q4_k, q6_k, f16 (the f32 path's), got "q2_k"
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", weights = "q2_k"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op the f32 GEMV takes one row a warp (rows_per_warp 1), got 2
module {
  gpu.module @m {
    swz.gemv_tile @g rows_per_warp(2) {activations = "f32", weights = "q4_0", units_in_flight = 1 : i32}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op a scheduled GEMV needs units_in_flight in [1, 8]
module {
  gpu.module @m {
    swz.gemv_tile @g rows_per_warp(1) {activations = "q8x", weights = "q8_0"}
  }
}

// -----

// HAND: error: swz-lower-tiles: @acc_q8_0 already exists (one int8 GEMV of a block format a gpu.module)
module {
  gpu.module @m {
    memref.global "private" @acc_q8_0 : memref<128xf32, #gpu.address_space<workgroup>>
    swz.gemv_tile @g rows_per_warp(1) {activations = "q8x", weights = "q8_0", units_in_flight = 1 : i32}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op lookup (the embedding lookup) reads f32 rows: activations "f32"
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "q8x", lookup, weights = "q8_0"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op lookup has no schedule fields (rows_per_warp, warps, m_tiles, units_in_flight, min_ctas_per_sm)
module {
  gpu.module @m {
    swz.gemv_tile @g rows_per_warp(1) {activations = "f32", lookup, weights = "q8_0", units_in_flight = 1 : i32}
  }
}

// -----

// Over 8 rows a warp the int8 kernel's workgroup memory (4608 bytes a row a warp) would not
// fit the 48 KiB a kernel may declare statically.
// HAND: error: 'swz.gemv_tile' op rows_per_warp must be in [1, 8], got 11
module {
  gpu.module @m {
    swz.gemv_tile @g rows_per_warp(11) {activations = "q8x", weights = "q8_0", units_in_flight = 1 : i32}
  }
}

// -----

// HAND: error: swz-lower-tiles: @acc already exists (one f32 GEMV a gpu.module)
module {
  gpu.module @m {
    memref.global "private" @acc : memref<128xf32, #gpu.address_space<workgroup>>
    swz.gemv_tile @g rows_per_warp(1) {activations = "f32", weights = "q8_0", units_in_flight = 1 : i32}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op mma "mma.sync.m16n8k16" is F16's tensor-core GEMV (weights f16, activations f32); got mma "mma.sync.m16n8k16" with weights "q8_0"
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", mma = "mma.sync.m16n8k16", weights = "q8_0"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op warps, m_tiles and split_k are the tensor-core GEMV's (mma)
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", split_k, weights = "f16"}
  }
}

// -----

// HAND: error: swz-lower-tiles: @g has no schedule (run swz-apply-schedule first)
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", mma = "mma.sync.m16n8k16", weights = "f16"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op lookup is the embedding lookup: no mma, no split_k
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", lookup, mma = "mma.sync.m16n8k16", weights = "f16"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op the tensor-core GEMV needs warps in [1, 16] and m_tiles in [1, 4], got warps 17, m_tiles 1
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", m_tiles = 1 : i32, mma = "mma.sync.m16n8k16", units_in_flight = 1 : i32, warps = 17 : i32, weights = "f16"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op a scheduled tensor-core GEMV needs m_tiles
module {
  gpu.module @m {
    swz.gemv_tile @g {activations = "f32", mma = "mma.sync.m16n8k16", units_in_flight = 1 : i32, warps = 4 : i32, weights = "f16"}
  }
}

// -----

// HAND: error: 'swz.gemv_tile' op the tensor-core GEMV's rows are m_tiles x 16 a workgroup, shared by its warps: no rows_per_warp
module {
  gpu.module @m {
    swz.gemv_tile @g rows_per_warp(1) {activations = "f32", mma = "mma.sync.m16n8k16", weights = "f16"}
  }
}
