// What the split-K decode attention refuses, each error naming the schedule field.
// RUN: rm -rf %t && mkdir -p %t
// Schedule files: warps the combine cannot use, no keys in flight, too many, an unknown
// field, no attention.decode at all.
// RUN: sed -e 's/"decode": { "warps": 8,/"decode": { "warps": 6,/' %schedules/sm_80.json > %t/warps.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/warps.json 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: sed -e 's/"keys_in_flight": 4/"keys_in_flight": 0/' %schedules/sm_80.json > %t/none-in-flight.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/none-in-flight.json 2>&1 | FileCheck %s --check-prefix=KEYS0
// RUN: sed -e 's/"keys_in_flight": 4/"keys_in_flight": 17/' %schedules/sm_80.json > %t/many.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/many.json 2>&1 | FileCheck %s --check-prefix=KEYS17
// RUN: sed -e 's/"min_ctas_per_sm": 0 }/"min_ctas_per_sm": 0, "rows": 16 }/' %schedules/sm_80.json > %t/field.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/field.json 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: sed -e '/"decode": {/d' -e 's/"prefill_split_min": 2048,/"prefill_split_min": 2048/' %schedules/sm_80.json > %t/nodecode.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/nodecode.json 2>&1 | FileCheck %s --check-prefix=NONE
// Tiles set by hand that the generator cannot emit.
// RUN: not swizzle-opt %s -split-input-file -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=HAND

// WARPS: $.attention.decode.warps: 6 is not 4 or 8 (the warps combine the 8 query rows in groups of 128 threads)
// KEYS0: $.attention.decode.keys_in_flight: must be >= 1, got 0
// KEYS17: $.attention.decode.keys_in_flight: 17 is more than 16
// FIELD: $.attention.decode.rows: not a decode field (warps, keys_in_flight, min_ctas_per_sm)
// NONE: error: @flash_decode_f16kv_hd128 (decode) needs the sm_80 schedule's attention.decode, which it does not have
module {
  gpu.module @swz_attention_decode {
    swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) {decode}
  }
}

// -----

// HAND: error: swz-lower-tiles: the decode attention @d64: head_dim must be 128 (32 lanes x 4 features), got 64
module {
  gpu.module @m {
    swz.attention_tile @d64 : f16 head_dim(64) block(8, 32) warps(8) stages(1) {decode, keys_in_flight = 4 : i32}
  }
}

// -----

// HAND: error: swz-lower-tiles: the decode attention @rows16: block(rows, split unit) must be (8, 32), the driver's launch rule (launch_bindings.cpp seq_tiles and kDecodeMinSplit), got (16, 32)
module {
  gpu.module @m {
    swz.attention_tile @rows16 : f16 head_dim(128) block(16, 32) warps(8) stages(1) {decode, keys_in_flight = 4 : i32}
  }
}

// -----

// HAND: error: swz-lower-tiles: the decode attention @w2: attention.decode.warps must be a multiple of 4 whose groups of 128 threads divide the 8 rows, got 2
module {
  gpu.module @m {
    swz.attention_tile @w2 : f16 head_dim(128) block(8, 32) warps(2) stages(1) {decode, keys_in_flight = 4 : i32}
  }
}

// -----

// HAND: error: swz-lower-tiles: @dec_o already exists (one decode attention a gpu.module)
module {
  gpu.module @m {
    memref.global "private" @dec_o : memref<4xf32, #gpu.address_space<workgroup>>
    swz.attention_tile @twice : f16 head_dim(128) block(8, 32) warps(8) stages(1) {decode, keys_in_flight = 4 : i32}
  }
}

// -----

// HAND: error: 'swz.attention_tile' op decode stages nothing through ldmatrix or cp.async: no smem, mma, copy or conflict_free
module {
  swz.attention_tile @smem : f16 head_dim(128) block(8, 32) warps(8) stages(1) smem(#swz.swizzle<3, 3, 4>) {decode, keys_in_flight = 4 : i32}
}

// -----

// HAND: error: 'swz.attention_tile' op decode: a scheduled decode tile needs keys_in_flight >= 1
module {
  swz.attention_tile @nokeys : f16 head_dim(128) block(8, 32) warps(8) stages(1) {decode}
}

// -----

// Negative values are refused as such (signless i32 attributes, read signed).
// HAND: error: 'swz.attention_tile' op decode: a scheduled decode tile needs keys_in_flight >= 1
module {
  swz.attention_tile @negkeys : f16 head_dim(128) block(8, 32) warps(8) stages(1) {decode, keys_in_flight = -2 : i32}
}

// -----

// HAND: error: 'swz.attention_tile' op decode: min_ctas_per_sm must be >= 0, got -1
module {
  swz.attention_tile @negctas : f16 head_dim(128) block(8, 32) warps(8) stages(1) {decode, keys_in_flight = 4 : i32, min_ctas_per_sm = -1 : i32}
}
