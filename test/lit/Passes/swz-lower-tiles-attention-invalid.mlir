// Errors of swz-lower-tiles on swz.attention_tile: what the attention generator does not
// emit is refused, naming the schedule field (compiler/mlir/LowerAttention.cpp).
// RUN: rm -rf %t && mkdir -p %t
// RUN: not swizzle-opt %s -split-input-file -swz-lower-tiles 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// head_dim 256 (the sm_80 schedule applies; the generator has 64 and 128 only):
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%schedules/sm_80.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HEADDIM
// sm_80.json edited, one field each:
// RUN: sed -e 's/"block_q": 64, "block_kv": 64,/"block_q": 64, "block_kv": 32,/' %schedules/sm_80.json > %t/kv32.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/kv32.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCKKV
// RUN: sed -e 's/"block_q": 64, "block_kv": 64,/"block_q": 128, "block_kv": 64,/' %schedules/sm_80.json > %t/q128.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/q128.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCKQ
// RUN: sed -e '27s/"warps": 4, "stages": 1,/"warps": 4, "stages": 2,/' %schedules/sm_80.json > %t/s2.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/s2.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGES
// RUN: sed -e '28s/"mma": "mma.sync.m16n8k16"/"mma": "wgmma.m64n64k16"/' %schedules/sm_90.json > %t/wgmma.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/wgmma.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MMA
// RUN: sed -e '29s/"copy": "cp.async.cg.16"/"copy": "tma"/' %schedules/sm_80.json > %t/tma.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/tma.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=COPY
// A fixed shift of 3 fits head_dim 64 only; no swizzle fits none.
// RUN: sed -e '30s/"shift": "row"/"shift": 3/' %schedules/sm_80.json > %t/shift3.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/shift3.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHIFT
// RUN: sed -e '30d' %schedules/sm_80.json > %t/noswizzle.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/noswizzle.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOSWIZZLE
// 8 warps (block_q 128): head_dim 128's tiles exceed 48 KiB.
// RUN: sed -e 's/"block_q": 64, "block_kv": 64,/"block_q": 128, "block_kv": 64,/' -e '27s/"warps": 4,/"warps": 8,/' \
// RUN:     %schedules/sm_80.json > %t/w8.json
// RUN: not swizzle-opt %s -split-input-file -swz-apply-schedule=schedule=%t/w8.json -swz-lower-tiles 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SMEM

swz.attention_tile @attn : f16 head_dim(64)

// -----

swz.attention_tile @attn128 : f16 head_dim(128)

// -----

swz.attention_tile @attn256 : f16 head_dim(256)

// UNSCHEDULED: error: swz-lower-tiles: @attn has no schedule (run swz-apply-schedule first)
// HEADDIM-NOT: error: {{.*}}@attn:
// HEADDIM-NOT: error: {{.*}}@attn128:
// HEADDIM: error: swz-lower-tiles: @attn256: head_dim must be 64 or 128 (128- or 256-byte f16 rows), got 256
// BLOCKKV: error: swz-lower-tiles: @attn: block_kv must be the KV page size 64 (one block-table lookup a key tile), got 32
// BLOCKQ: error: swz-lower-tiles: @attn: block_q must be 16 x warps (each warp owns 16 query rows), got block_q 128 on 4 warps
// STAGES: error: swz-lower-tiles: @attn: stages must be 1 (the kernel single-buffers K and V: copy, wait, compute), got 2
// MMA: error: swz-lower-tiles: @attn: mma must be "mma.sync.m16n8k16" (the attention generator has no other, e.g. no wgmma), got "wgmma.m64n64k16"
// COPY: error: swz-lower-tiles: @attn: copy must be "cp.async.cg.16", got "tma"
// SHIFT-NOT: error: {{.*}}@attn:
// SHIFT: error: swz-lower-tiles: @attn128: swizzle must be #swz.swizzle<3, 3, 4> for head_dim 128 (row mod 8 into the 16-byte chunk index), got #swz.swizzle<3, 3, 3>
// NOSWIZZLE: error: swz-lower-tiles: @attn: swizzle must be #swz.swizzle<3, 3, 3> for head_dim 64 (row mod 8 into the 16-byte chunk index), got none
// SMEM-NOT: error: {{.*}}@attn:
// SMEM: error: swz-lower-tiles: @attn128: the Q, K and V tiles (128 + 2 x 64 rows of 128 halves) need 65536 bytes of shared memory, more than the 49152 a block may declare statically
