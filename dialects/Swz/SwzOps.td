//===- SwzOps.td - swz model-graph and tile-spec ops --------*- tablegen -*-===//
#ifndef SWZ_OPS_TD
#define SWZ_OPS_TD

include "Swz/SwzBase.td"
include "Swz/SwzAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Swz_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Swz_IndexTensor : RankedTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Model-graph ops
//===----------------------------------------------------------------------===//

def Swz_MatmulOp : Swz_Op<"matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "y = x · Wᵀ (+ bias) (+ residual) with a (possibly quantized) weight";
  let description = [{
    `x` is `[T, K]` activations, `w` is the logical `[N, K]` weight (ggml order:
    K contiguous), the result is `[T, N]`. `weight_type` says how the weight is
    stored; block formats need `K` to be a multiple of the block size (32 for
    q4_0/q4_1/q8_0, 256 for the k-quants). Decode (T = 1) lowers to a
    dequantizing GEMV, prefill to a tensor-core GEMM tile (`swz.gemm_tile`).

    The optional `bias` (`[N]`, qwen2's q/k/v projections) is added to every
    row. The optional `residual` (`[T, N]`) is added last: it is how
    `swz-fuse` folds a residual `swz.add` into the matmul's epilogue, so the
    kernel accumulates into the residual stream instead of writing `y` and
    launching an add.

    ```mlir
    %y = swz.matmul %x, %w {weight_type = #swz.quant<q4_k>}
        : tensor<?x4864xf32>, tensor<896x4864xf32> -> tensor<?x896xf32>
    %k = swz.matmul %h, %wk bias(%bk : tensor<128xf32>) {weight_type = #swz.quant<q8_0>}
        : tensor<?x896xf32>, tensor<128x896xf32> -> tensor<?x128xf32>
    %x2 = swz.matmul %a, %wd residual(%x1 : tensor<?x896xf32>) {weight_type = #swz.quant<q6_k>}
        : tensor<?x4864xf32>, tensor<896x4864xf32> -> tensor<?x896xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$x, Swz_FloatTensor:$w,
                       Optional<Swz_FloatTensor>:$bias,
                       Optional<Swz_FloatTensor>:$residual,
                       Swz_QuantTypeAttr:$weight_type);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $w (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`residual` `(` $residual^ `:` type($residual) `)`)? attr-dict
    `:` type($x) `,` type($w) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Swz_EmbeddingOp : Swz_Op<"embedding", [Pure]> {
  let summary = "row lookup in a (possibly quantized) token-embedding table";
  let description = [{
    `table` is `[V, D]`, `ids` is `[T]` of i32 token ids, the result is `[T, D]`.

    ```mlir
    %h = swz.embedding %table, %ids {weight_type = #swz.quant<q8_0>}
        : tensor<49152x576xf32>, tensor<?xi32> -> tensor<?x576xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$table, Swz_IndexTensor:$ids,
                       Swz_QuantTypeAttr:$weight_type);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Swz_RmsNormOp : Swz_Op<"rms_norm", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "RMSNorm over the last dimension: x / sqrt(mean(x²) + ε) · γ";
  let description = [{
    Zhang & Sennrich 2019. `gamma` is `[D]` where `D` is the last dimension of `x`.

    ```mlir
    %n = swz.rms_norm %h, %gamma {epsilon = 1.0e-05 : f32}
        : tensor<?x576xf32>, tensor<576xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$x, Swz_FloatTensor:$gamma, F32Attr:$epsilon);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = "$x `,` $gamma attr-dict `:` type($x) `,` type($gamma)";
  let hasVerifier = 1;
}

def Swz_RopeOp : Swz_Op<"rope", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "rotary position embedding on [T, H, Dh] heads";
  let description = [{
    Su et al. 2021 (RoFormer). Rotates the first `rotary_dim` features of every
    head of `x` (`[T, H, Dh]`) by angles `pos · theta^(-2i/rotary_dim)`;
    `positions` is `[T]` of i32. `mode` picks the pair layout: `normal` (llama)
    or `neox` (qwen2/qwen3).

    ```mlir
    %q2 = swz.rope %q, %pos {mode = #swz.rope_mode<neox>, theta = 1.0e+06 : f32,
                             rotary_dim = 64 : i32}
        : tensor<?x14x64xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$x, Swz_IndexTensor:$positions,
                       Swz_RopeModeAttr:$mode, F32Attr:$theta, I32Attr:$rotary_dim);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = "$x `,` $positions attr-dict `:` type($x) `,` type($positions)";
  let hasVerifier = 1;
}

def Swz_AttentionOp : Swz_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention with grouped-query heads (GQA)";
  let description = [{
    `q` is `[T, Hq, D]`, `k` and `v` are `[S, Hkv, D]` with `Hq` a multiple of
    `Hkv` (query head `h` reads KV head `h / (Hq / Hkv)`). With `causal`, query
    `t` sees keys `0 .. S - T + t`. The result is `[T, Hq, D]`.

    With `layer = L`, `k` and `v` are only this batch's new rows (`S = T`): the
    op first appends them (as f16) to layer L's paged KV cache at the batch's
    positions, then attends over the whole cache (the cached prefix plus the
    new rows), as the runtime's graph op `attention` does (docs/graph.md).

    With `rope_k(%positions)` (only with `layer`), `k` is the batch's keys before
    RoPE: the op rotates them (`k_rope_mode`, `k_rope_theta`, `k_rope_dim`, as
    `swz.rope`) while writing them to the KV cache. This is how `swz-fuse` folds
    the graph's `rope(k)` into the KV write. With `q_rope` as well, `q` is the
    queries before the same RoPE (same positions, mode, theta and rotary dim),
    rotated by the same launch. With `qk_norm(%gq, %gk)` (only with `rope_k`), `q`
    and `k` are before a per-head RMSNorm with those `[D]` weights and
    `norm_epsilon` (Qwen3's `attn_q_norm` / `attn_k_norm`), applied before RoPE.

    ```mlir
    %o = swz.attention %q, %k, %v rope_k(%pos : tensor<?xi32>)
        qk_norm(%gq, %gk : tensor<128xf32>, tensor<128xf32>) {scale = 0.0883883461 : f32,
        causal, layer = 0 : i32, k_rope_mode = #swz.rope_mode<neox>,
        k_rope_theta = 1.0e+06 : f32, k_rope_dim = 128 : i32, q_rope,
        norm_epsilon = 9.99999997E-7 : f32}
        : tensor<?x16x128xf32>, tensor<?x8x128xf32>, tensor<?x8x128xf32> -> tensor<?x16x128xf32>
    ```

    ```mlir
    %o = swz.attention %q, %k, %v rope_k(%pos : tensor<?xi32>) {scale = 0.125 : f32,
        causal, layer = 0 : i32, k_rope_mode = #swz.rope_mode<normal>,
        k_rope_theta = 1.0e+05 : f32, k_rope_dim = 64 : i32}
        : tensor<?x9x64xf32>, tensor<?x3x64xf32>, tensor<?x3x64xf32> -> tensor<?x9x64xf32>
    ```

    ```mlir
    %o = swz.attention %q, %k, %v {scale = 0.125 : f32, causal}
        : tensor<?x14x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32> -> tensor<?x14x64xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$q, Swz_FloatTensor:$k, Swz_FloatTensor:$v,
                       Optional<Swz_IndexTensor>:$k_positions,
                       Optional<Swz_FloatTensor>:$q_norm_weight,
                       Optional<Swz_FloatTensor>:$k_norm_weight,
                       F32Attr:$scale, UnitAttr:$causal, OptionalAttr<I32Attr>:$layer,
                       OptionalAttr<Swz_RopeModeAttr>:$k_rope_mode,
                       OptionalAttr<F32Attr>:$k_rope_theta,
                       OptionalAttr<I32Attr>:$k_rope_dim,
                       UnitAttr:$q_rope,
                       OptionalAttr<F32Attr>:$norm_epsilon);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`rope_k` `(` $k_positions^ `:` type($k_positions) `)`)?
    (`qk_norm` `(` $q_norm_weight^ `,` $k_norm_weight `:` type($q_norm_weight) `,`
     type($k_norm_weight) `)`)? attr-dict
    `:` type($q) `,` type($k) `,` type($v) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Swz_SwigluOp : Swz_Op<"swiglu", [Pure, AllTypesMatch<["gate", "up", "result"]>]> {
  let summary = "SwiGLU: silu(gate) · up, elementwise";
  let description = [{
    Shazeer 2020. `silu(x) = x / (1 + exp(-x))`.

    ```mlir
    %a = swz.swiglu %g, %u : tensor<?x1536xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$gate, Swz_FloatTensor:$up);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Swz_AddOp : Swz_Op<"add", [Pure, Commutative, AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "elementwise addition (the residual connection)";
  let description = [{
    ```mlir
    %r = swz.add %h, %attn : tensor<?x576xf32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$lhs, Swz_FloatTensor:$rhs);
  let results = (outs Swz_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Swz_ArgmaxOp : Swz_Op<"argmax", [Pure]> {
  let summary = "greedy sampling: index of the largest logit of each row";
  let description = [{
    `logits` is `[T, V]`, the result is `[T]` of i32; ties go to the lowest index
    (as llama.cpp's greedy sampler).

    ```mlir
    %tok = swz.argmax %logits : tensor<1x49152xf32> -> tensor<1xi32>
    ```
  }];
  let arguments = (ins Swz_FloatTensor:$logits);
  let results = (outs Swz_IndexTensor:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile-spec ops
//===----------------------------------------------------------------------===//

def Swz_GemmTileOp : Swz_Op<"gemm_tile", [Symbol]> {
  let summary = "schedule of one tensor-core GEMM kernel (C[M,N] = A[M,K] · B[N,K]ᵀ)";
  let description = [{
    A thread block computes a `tile_m × tile_n` block of C, looping over K in
    steps of `tile_k`. A and B tiles are staged in shared memory (`stages`-deep
    cp.async/TMA pipeline) as row-major `tile_m × tile_k` and `tile_n × tile_k`
    tiles of `element_type`, permuted by `smem_layout` if present (otherwise
    plain row-major), and read with `ldmatrix.x4` (mma.sync) or by shared-memory
    descriptor (wgmma). `swz-lower-tiles` generates the kernel.

    The schedule fields (`tile`, `warps`, `stages`, `smem`, `mma`, `copy`, and
    optionally `mma_in_flight`: wgmma groups left pending across a k tile) are
    absent until `swz-apply-schedule` fills them in from the target's schedule.
    For each shape class of the schedule's gemm entry, swz-apply-schedule adds
    a copy `@<name>_<class>` with `shape_class = "<class>"` and that class's
    fields; swz-lower-tiles puts its kernel beside `@<name>`'s.
    `conflict_free` is a claim that `swz-check-bank-conflicts` verifies.

    `weights = "q4_k" | "q6_k" | "q8_0"` makes it the dequantizing (skinny) variant:
    B is not an f16 matrix but the GGUF tensor's blocks, dequantized to f16 in the
    kernel's loads (`y[T, N] = f16(x) . f16(dequant(W))^T`, T <= tile_m). It is the
    same tile spec (an M x N tile of C over K, `stages` deep, mma.sync) with one more
    fact, where B's bytes come from; a separate op would repeat every field and the
    scheduling. swz-apply-schedule fills it from the schedule's `gemm.skinny`
    (tile(16 * m_tiles, 8 * warps, 256): one n8 tile a warp, a 256-weight super-block
    a stage; `stages` per type) and adds no shape-class copies; swz-lower-tiles
    (LowerSkinnyGemm.cpp) writes its kernel into `@swz_<name less "_<weights>">`, so
    `@gemm_skinny_q4_k`, `@gemm_skinny_q6_k` and `@gemm_skinny_q8_0` share
    `@swz_gemm_skinny`.

    ```mlir
    swz.gemm_tile @gemm_skinny_q6_k : f16 {weights = "q6_k"}
    ```

    ```mlir
    swz.gemm_tile @ffn_up : f16 tile(128, 128, 64) warps(4) stages(3)
        smem(#swz.swizzle<3, 3, 3>) {mma = "mma.sync.m16n8k16", copy = "cp.async.16",
        conflict_free}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$element_type,
                       OptionalAttr<I32Attr>:$tile_m, OptionalAttr<I32Attr>:$tile_n,
                       OptionalAttr<I32Attr>:$tile_k, OptionalAttr<I32Attr>:$warps,
                       OptionalAttr<I32Attr>:$stages,
                       OptionalAttr<Swz_SwizzleAttr>:$smem_layout,
                       OptionalAttr<StrAttr>:$mma, OptionalAttr<StrAttr>:$copy,
                       OptionalAttr<StrAttr>:$target, UnitAttr:$conflict_free,
                       OptionalAttr<I32Attr>:$mma_in_flight,
                       OptionalAttr<StrAttr>:$shape_class,
                       OptionalAttr<StrAttr>:$weights);
  let assemblyFormat = [{
    $sym_name `:` $element_type
    (`tile` `(` $tile_m^ `,` $tile_n `,` $tile_k `)`)?
    (`warps` `(` $warps^ `)`)? (`stages` `(` $stages^ `)`)?
    (`smem` `(` qualified($smem_layout)^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when swz-apply-schedule (or the author) has set the tile sizes.
    bool isScheduled() { return getTileM().has_value(); }
  }];
}

def Swz_AttentionTileOp : Swz_Op<"attention_tile", [Symbol]> {
  let summary = "schedule of one flash-attention kernel";
  let description = [{
    FlashAttention-2 style: a thread block owns `block_q` query rows of one head
    and streams K/V in blocks of `block_kv` rows of `head_dim` elements through
    shared memory (`stages` deep). Each warp owns 16 query rows (the M of
    `mma.m16n8k16`), so `block_q` must be a multiple of `16 · warps`. Q, K and V
    tiles use `smem_layout` (row pitch = `head_dim` elements).

    ```mlir
    swz.attention_tile @attn_prefill : f16 head_dim(64) block(64, 64) warps(4)
        stages(2) smem(#swz.swizzle<3, 3, 3>) {conflict_free}
    ```

    `decode` makes it the split-K decode attention ("flash decoding"): a few query rows
    of every sequence of a pass against its paged KV cache, warps over keys, the
    splits merged in the same launch. Same facts (query rows and keys a block, warps,
    head_dim), read differently: `block_q` is the query rows a workgroup owns (8),
    `block_kv` the unit of a split's length in keys (32), `warps` the warps sharing a
    split's keys, and `keys_in_flight` the keys a warp loads at once; `min_ctas_per_sm`
    (optional) becomes the kernel's `nvvm.minctasm`. Nothing is staged in shared
    memory through ldmatrix or cp.async, so there is no `smem`, `mma` or `copy`.
    swz-apply-schedule fills it from the schedule's `attention.decode`; swz-lower-tiles
    (LowerAttentionDecode.cpp) writes the kernel.

    ```mlir
    swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) {decode}
    // after swz-apply-schedule (sm_80.json):
    swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) block(8, 32)
        warps(8) stages(1) {decode, keys_in_flight = 4 : i32, target = "sm_80"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$element_type,
                       I32Attr:$head_dim,
                       OptionalAttr<I32Attr>:$block_q, OptionalAttr<I32Attr>:$block_kv,
                       OptionalAttr<I32Attr>:$warps, OptionalAttr<I32Attr>:$stages,
                       OptionalAttr<Swz_SwizzleAttr>:$smem_layout,
                       OptionalAttr<StrAttr>:$mma, OptionalAttr<StrAttr>:$copy,
                       OptionalAttr<StrAttr>:$target, UnitAttr:$conflict_free,
                       UnitAttr:$decode, OptionalAttr<I32Attr>:$keys_in_flight,
                       OptionalAttr<I32Attr>:$min_ctas_per_sm);
  let assemblyFormat = [{
    $sym_name `:` $element_type `head_dim` `(` $head_dim `)`
    (`block` `(` $block_q^ `,` $block_kv `)`)?
    (`warps` `(` $warps^ `)`)? (`stages` `(` $stages^ `)`)?
    (`smem` `(` qualified($smem_layout)^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isScheduled() { return getBlockQ().has_value(); }
  }];
}

def Swz_GemvTileOp : Swz_Op<"gemv_tile", [Symbol]> {
  let summary = "schedule of one dequantizing decode GEMV kernel (y[T, N] = x[T, K] · W[N, K]ᵀ, T ≤ 8 a workgroup)";
  let description = [{
    The decode-side matmul of a few tokens against a GGUF weight of type `weights`,
    read in its own blocks. `activations = "q8x"` (weights `q4_k`, `q8_0`, `q6_k`,
    `q4_1`, `q5_0`; PTX): the activations are int8 blocks of 32 with their scale (quantize_q8_x, as
    llama.cpp's quantize_q8_1), each weight unit's dot product is PTX `dp4a`; the kernel
    takes up to three matrices of one input in one launch (merged q/k/v, gate/up).
    A workgroup is 4 warps; a warp takes `rows_per_warp` consecutive weight rows (their
    units share each unit's activation loads), a lane the units lane, lane + 32, ... of
    them with `units_in_flight` units' loads issued before any is used, and
    `min_ctas_per_sm` (optional) becomes the kernel's `nvvm.minctasm`. A unit (one
    thread's share of a block: a Q4_K / Q6_K 32-weight sub-block, 16 Q8_0 weights, a
    Q4_1 / Q5_0 block) is a fact of the block format, not a schedule choice.

    `activations = "f32"` (weights `q4_0`, `q4_1`, `q5_0`, `q8_0`, `q4_k`, `q6_k`,
    `f16`; every target, SPIR-V included): the activations are f32, each unit is
    dequantized once and dotted with every token's x; one matrix a launch, one row a
    warp (`rows_per_warp` 1), `units_in_flight` from the schedule's `gemv.f32.<weights>`;
    the globals are `@acc` and `@slots`.

    `mma = "mma.sync.m16n8k16"` (weights `f16`, activations `f32`; PTX) makes it F16's
    tensor-core GEMV: a workgroup of `warps` warps computes `m_tiles` x 16 rows for 8
    tokens (the mma's 8 columns), the warps splitting K (warp w the 32-weight chunks w,
    w + warps, ...), `units_in_flight` chunks' loads a warp before it multiplies; the
    warps' sums meet in `@acc_<name>` in a fixed order. The schedule's `gemv.f16_mma`
    gives warps, m_tiles and units_in_flight, and `gemv.f16_mma_split_k` those of a spec
    with `split_k` (the shape for matrices of few rows: more warps a workgroup).

    `lookup` (with `activations = "f32"`) makes it the embedding lookup of the same
    weight: `out[t, :] = dequant(W[tokens[t], :])`, the rows dequantized as the GEMV
    dequantizes them (one workgroup of 128 threads a token, each thread a unit at a
    time). It has no schedule fields; swz-apply-schedule leaves it as it is.

    The schedule fields are absent until `swz-apply-schedule` fills them in from the
    target schedule's `gemv.q8x.<weights>` (`gemv.f32.<weights>` for the f32 path
    below); `swz-lower-tiles` (LowerGemv.cpp) writes the kernel `gpu.func @<name>` and
    its workgroup globals (int8: `@acc_<weights>` and `@slots_<weights>`) in the tile
    spec's place.

    ```mlir
    swz.gemv_tile @matmul_q4_k_q8x {weights = "q4_k", activations = "q8x"}
    // after swz-apply-schedule (sm_90.json):
    swz.gemv_tile @matmul_q4_k_q8x rows_per_warp(2) {activations = "q8x",
        min_ctas_per_sm = 6 : i32, target = "sm_90", units_in_flight = 1 : i32,
        weights = "q4_k"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$weights, StrAttr:$activations,
                       OptionalAttr<I32Attr>:$rows_per_warp,
                       OptionalAttr<I32Attr>:$units_in_flight,
                       OptionalAttr<I32Attr>:$min_ctas_per_sm,
                       OptionalAttr<StrAttr>:$target, UnitAttr:$lookup,
                       OptionalAttr<StrAttr>:$mma, OptionalAttr<I32Attr>:$warps,
                       OptionalAttr<I32Attr>:$m_tiles, UnitAttr:$split_k);
  let assemblyFormat = [{
    $sym_name (`rows_per_warp` `(` $rows_per_warp^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when swz-apply-schedule (or the author) has set the geometry.
    bool isScheduled() { return getRowsPerWarp().has_value() || getWarps().has_value(); }
  }];
}

#endif // SWZ_OPS_TD
