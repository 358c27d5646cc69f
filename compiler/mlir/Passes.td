//===- Passes.td - swz passes --------------------------------*- tablegen -*-===//
#ifndef SWZ_PASSES_TD
#define SWZ_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwzApplySchedule : Pass<"swz-apply-schedule", "mlir::ModuleOp"> {
  let summary = "attach a target's tile schedule to every swz tile-spec op";
  let description = [{
    Reads `compiler/schedules/<target>.json` (option `schedule`) and fills in
    the schedule fields of every `swz.gemm_tile` and `swz.attention_tile`:
    tile sizes, warps, stages, `smem` layout, `mma` and `copy` instructions,
    `target`, and the `conflict_free` claim (and `mma_in_flight` where the
    schedule's gemm entry has it). A `swz.gemm_tile` with `weights` (the
    skinny GEMM's block format) takes the schedule's `gemm.skinny` instead, and
    a `swz.attention_tile` with `decode` the schedule's `attention.decode`
    (`block(8, 32)`: 8 query rows, 32-key split unit, the driver's launch rule;
    `warps`, `stages(1)`, `keys_in_flight`, `min_ctas_per_sm` when > 0; it fails
    when the schedule has no `attention.decode`). Each shape class of the gemm entry (`gemm.classes`) adds a copy of every
    other `swz.gemm_tile`, `@<name>_<class>` with `shape_class = "<class>"`
    and the class's fields; run again, the copies are re-applied, and those of
    classes the schedule no longer has are erased. Fails when the tiles (with
    dynamic shared memory's alignment slack) do not fit the target's shared
    memory or the element type differs from the schedule's. A `swz.gemv_tile`
    takes `gemv.q8x.<weights>` (activations "q8x": `rows_per_warp`,
    `units_in_flight`, `min_ctas_per_sm` when > 0) or `gemv.f32.<weights>`
    (activations "f32": rows_per_warp 1, `units_in_flight`, `min_ctas_per_sm`),
    and `target`; one with `mma` (F16's tensor-core GEMV) takes `gemv.f16_mma`
    (with `split_k`: `gemv.f16_mma_split_k`): `warps`, `m_tiles`,
    `units_in_flight`. It fails when the schedule has no such entry. An embedding
    lookup (`lookup`) has no schedule fields and is left as it is.

    Before:
    ```mlir
    swz.gemm_tile @ffn_up : f16
    ```
    After `-swz-apply-schedule=schedule=compiler/schedules/sm_80.json`:
    ```mlir
    swz.gemm_tile @ffn_up : f16 tile(128, 128, 64) warps(4) stages(3)
        smem(#swz.swizzle<3, 3, 3>) {conflict_free, copy = "cp.async.cg.16",
        mma = "mma.sync.m16n8k16", target = "sm_80"}
    ```
    With a class `{"name": "narrow", "n_max": 1536, "tile_n": 32}` in the
    gemm entry's `classes`, also:
    ```mlir
    swz.gemm_tile @ffn_up_narrow : f16 tile(128, 32, 64) ... {..., shape_class = "narrow", ...}
    ```
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "path of the schedule JSON file (compiler/schedules/<target>.json)">,
  ];
}

def SwzCheckBankConflicts : Pass<"swz-check-bank-conflicts", "mlir::ModuleOp"> {
  let summary = "statically compute shared-memory bank conflicts of tile specs";
  let description = [{
    For every scheduled tile-spec op, builds the shared-memory tiles it stages
    (GEMM: A = tile_m x tile_k, B = tile_n x tile_k; attention: Q = block_q x
    head_dim, K and V = block_kv x head_dim) with its `smem` layout, and
    computes the bank-conflict degree of `ldmatrix.x4` reads and 16-byte
    `cp.async` stores (compiler/mlir/BankConflicts.h). Emits one remark per tile
    with the degrees; emits an error when the op claims `conflict_free` and a
    degree is above 1.

    The same check runs on the shared-memory tiles of kernels: every static
    rank-2 `memref.global` that a kernel reads with `nvgpu.ldmatrix` or fills
    with `nvgpu.device_async_copy`, with the layout from its
    `swz.smem_layout` (or, after materialisation, `swz.smem_swizzled`)
    attribute, row-major otherwise; `swz.conflict_free` on the global is the
    claim.

    ```
    remark: gemm_tile @ffn_up: A 128x64 of 2-byte elements (128-byte rows,
        Swizzle<3,3,3>): ldmatrix.x4 1-way, cp.async.16 1-way; B ...
    ```
  }];
}

def SwzMaterializeSwizzle : Pass<"swz-materialize-swizzle", "mlir::ModuleOp"> {
  let summary = "rewrite shared-memory indices with a tile's XOR swizzle";
  let description = [{
    For every shared-memory buffer (`memref.global` or `memref.alloc`) that
    carries `swz.smem_layout = #swz.swizzle<B, M, S>`, rewrites the column
    index of each access (memref.load/store, vector.load/store, nvgpu.ldmatrix,
    nvgpu.device_async_copy destination) from `col` to
    `col ^ (((row * cols + col) >> S) & (((1 << B) - 1) << M))`, i.e. the
    CuTe permutation of the linear element offset, which stays inside the row
    because `cols` is a multiple of `2^(M+B)` (checked). The attribute is then
    renamed `swz.smem_swizzled` so the pass is idempotent.

    Unlike upstream `nvgpu-optimize-shared-memory`, which derives its own XOR
    from the access pattern of `memref.alloc`s, the permutation here comes from
    the target schedule, so the layout the bank-conflict analysis checked is the
    layout the kernel uses.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def SwzFuse : Pass<"swz-fuse", "mlir::ModuleOp"> {
  let summary = "fuse model-graph ops whose kernels can share a launch";
  let description = [{
    Residual fusion: `swz.add %r, %y` (either operand order) right after the
    `swz.matmul` producing `%y`, its only use, becomes that matmul with
    `residual(%r)`: the kernel's epilogue adds the residual stream, saving the
    add's launch and one read and write of `[T, N]` activations per layer. A
    matmul restricted to some rows (`swz.rows`) is left alone, since the add
    covers every row.

    RoPE into the KV write: when an attention over a layer's KV cache reads `k`
    only through `swz.rope` (and the importer's collapse / expand reshapes, each
    with that single use), the rope is removed and the attention gets
    `rope_k(%positions)` with the rope's mode, theta and rotary dim: its KV store
    rotates k while writing it, one pass over k instead of two.

    Q and the head norms into the KV write (`qk-rope`, after the above): when the
    attention's `q` is `swz.rope` of the same positions and attributes as `k`'s
    (through the same reshapes), that rope goes too and the attention gets
    `q_rope`; when, further, `q` and `k` are both per-head `swz.rms_norm`s of one
    epsilon (Qwen3's `attn_q_norm` / `attn_k_norm`), those go and the attention
    gets `qk_norm(%gq, %gk)` with `norm_epsilon`. One launch (rope_kv_store_f16)
    then normalises and rotates q in place and k into the cache: a decode layer's
    four small launches (two head norms, rope on q, the KV write) become one.

    Matmuls that read one input (`shared-input`, last): a run of up to three
    `swz.matmul`s next to each other with the same `x` and weight type, no
    residual and no `swz.rows` (q, k and v after the attention norm; gate and up
    after the FFN norm) each get `swz.shared_input = N`, N the first graph op of
    the run. The decode GEMVs of such a run are one launch of the int8 kernel
    (`matmul_<type>_q8x` with up to three weights and outputs): the input is
    quantized and read once per row block for all of them, and two or three
    launches' fixed cost is paid once (compiler/driver/compile_gpu.cpp merges
    exactly these).

    RMSNorm or SwiGLU into the GEMV's int8 input (`quantize-output`): a
    `swz.rms_norm` or `swz.swiglu` whose next op is a `swz.matmul` (no
    `swz.rows`) reading its result gets `swz.quantize_output`: in decode it runs
    the `_q8x` variant of its kernel, which writes the same f32 result and the
    int8 rows (and scales) the matmul's int8 GEMV reads, instead of a separate
    quantize launch (compile_gpu.cpp folds exactly these, where the matmul's
    decode kernel takes int8 input).

    Each fused op records the graph ops it now stands for in `swz.graph_ops`
    (the indices the importer put on the ops, `manifest.graph.ops[i]`), so the
    package writer can map launches back to graph ops.

    ```mlir
    %o = swz.matmul %attn, %wo {weight_type = #swz.quant<q4_1>, swz.graph_ops = [7]} ...
    %x1 = swz.add %x0, %o {swz.graph_ops = [8]} : tensor<?x576xf32>
    ```
    becomes
    ```mlir
    %x1 = swz.matmul %attn, %wo residual(%x0 : tensor<?x576xf32>)
        {weight_type = #swz.quant<q4_1>, swz.graph_ops = [7, 8]} ...
    ```
  }];
  let options = [
    Option<"residual", "residual", "bool", /*default=*/"true",
           "fold residual adds into the preceding matmul's epilogue">,
    Option<"ropeKv", "rope-kv", "bool", /*default=*/"true",
           "fold RoPE on k into the attention's KV-cache write">,
    Option<"qkRope", "qk-rope", "bool", /*default=*/"true",
           "with rope-kv: fold RoPE on q, and Qwen3's per-head RMSNorms on q and k, "
           "into the same launch">,
    Option<"sharedInput", "shared-input", "bool", /*default=*/"true",
           "mark runs of matmuls that read one input (q/k/v, gate/up) to run as one "
           "launch">,
    Option<"quantizeOutput", "quantize-output", "bool", /*default=*/"true",
           "mark an RMSNorm or SwiGLU right before the matmul that reads it to write "
           "that matmul's int8 input too">,
  ];
}

def SwzLowerTiles : Pass<"swz-lower-tiles", "mlir::ModuleOp"> {
  let summary = "generate the kernel of every scheduled tile-spec op";
  let description = [{
    Replaces each scheduled `swz.gemm_tile @name` (after `swz-apply-schedule`)
    with `gpu.module @swz_<name>` holding the kernel `gpu.func @<name>` that the
    schedule describes: y[T, N] (f32) = x[T, K] (f16) · W[N, K]ᵀ (f16) (+ bias[N]
    when the i32 argument flags has bit 0) (+ res[T, N] when it has bit 1: the
    residual, read before y is written by the same thread, so res may be y),
    arguments (x, w, y, bias, res, flags).

    A thread block of `warps` warps computes a `tile_m x tile_n` block of y. With
    `mma = "mma.sync.m16n8k16"` the warps form a grid (the dimension with the
    longer per-warp extent is halved first: 4 warps on 64x64 are 2x2), each warp
    owning 16-row A fragments (`ldmatrix.x4`) and 8-column B tiles (one
    `ldmatrix.x4` per 16 columns) and issuing `mma.sync.m16n8k16` per 16-wide k
    step. With `mma = "wgmma.m64n<tile_n>k16"` (sm_90a) each warpgroup of 4 warps
    owns 64 rows and issues `wgmma.mma_async` on them and the whole tile_n, A and
    B read from shared memory by descriptor (tile_k 64 under Swizzle<3,3,3>: the
    128-byte swizzle; tiles on 1024 bytes; `fence.proxy.async` before the
    barrier that publishes a k tile). The K loop moves
    `tile_k`-wide tiles of x and W through a `stages`-deep ring of 16-byte
    `cp.async.cg` copies into two shared tiles (`gemm_x`: stages x tile_m rows,
    `gemm_w`: stages x tile_n rows, tile_k columns) that carry the schedule's
    `swz.smem_layout` and `conflict_free` claim, so swz-check-bank-conflicts
    proves and swz-materialize-swizzle applies the same layout. Rows beyond T or
    N and chunks beyond K are zero-filled (src-size 0); the epilogue stores only
    rows < T and columns < N. Launch: block (32 x warps, 1, 1), grid
    `ceil(N/tile_n), ceil(T/tile_m), 1` (`swz.grid`), `swz.schedule = "gemm"`.
    A shape class's copy `@<name>_<class>` (swz-apply-schedule) goes into
    `@swz_<name>` beside its base kernel, with its own shared tiles
    `@gemm_<class>_x` / `_w` and `swz.schedule = "gemm.<class>"`.
    Tiles over the 48 KiB of static shared memory a block may declare mark the
    kernel `swz.dynamic_smem = "<bytes>"` (the tiles plus the slack that rounds
    a 16-byte-aligned window up to their alignment); swz-dynamic-smem places them.
    The copies run `stages - 1` k tiles ahead; with the schedule's
    `mma_in_flight = 1` (wgmma, 3 or more stages) each k tile's wgmma group
    stays pending across the next k tile's wait and barrier
    (`wgmma.wait_group 1`) and the copies run one k tile less ahead.

    Every mma.sync schedule gives bitwise the same y: each output's k sum runs
    through the same mma.sync k16 steps in the same order, whatever the tile. The
    wgmma kernels' y was bitwise the mma.sync kernel's on every case measured on
    the H200 (bench/tune_gemm.sh compares each candidate), an observation of the
    hardware, not a guarantee of the ISA.

    Fails (naming the field) when the schedule asks for what this generator
    does not emit (another MMA or copy instruction such as TMA, elements other
    than f16, wgmma without a warpgroup per 64 rows or the 128-byte swizzle),
    when the tile does not split over the warps and threads (warp tiles must be
    multiples of 16x16, a copy pass must cover whole rows), or when
    `mma_in_flight` is set without wgmma or a third stage.

    Each scheduled `swz.attention_tile @name` becomes the tensor-core flash-attention
    prefill kernel `gpu.func @name` (compiler/mlir/LowerAttention.cpp; FlashAttention-2,
    Dao 2023) with its shared tiles `@name_q`, `_k`, `_v`: in the enclosing gpu.module
    when the tile spec sits in one (codegen/kernels/attention_f16kv_mma.mlir puts both
    head dims in `@swz_attention_f16kv_mma`), else in a new `gpu.module @swz_<name>`.
    `warps` warps own 16 query rows each (`block_q` = 16 x warps); per 64-key page
    (`block_kv` = the KV page) K and V arrive by `cp.async.cg.16` (single-buffered:
    `stages` 1) into tiles with Swizzle<3, 3, log2(head_dim) - 3>, S = Q K^T and
    O += P V by `mma.sync.m16n8k16`, online softmax in registers. Arguments (q, k_cache,
    v_cache, block_table, out, o_part, lse_part, T, pos0, n_head, head_dim, split_len,
    scale); launch block (32 x warps, 1, 1), grid
    `ceil(T*n_head/n_head_kv/<block_q>), n_head_kv, n_split` (`swz.grid`),
    `swz.schedule = "attention"`. Any `warps` gives bitwise the same outputs. Fails,
    naming the field, on head_dim other than 64 or 128 and on any other block_kv,
    block_q, stages, mma (e.g. wgmma), copy or swizzle, or tiles over 48 KiB.

    A `swz.attention_tile` with `decode` is the split-K decode attention
    (LowerAttentionDecode.cpp, `gpu.func @name`, head_dim 128), with the workgroup
    globals `@dec_o` (warps x 8 x 128 f32), `@dec_m`, `@dec_l` (warps x 8 f32) and
    `@dec_last` (1 i32), in the enclosing gpu.module (attention_decode.mlir's
    `@swz_attention_decode`) or a new `gpu.module @swz_<name>`. Workgroup
    (seq * seq_tiles + tile, kvh, split) takes 8 query rows of a sequence (its
    record in `seqs`), one KV head and one split of its context (at most
    `max_splits` of a multiple of 32 keys); `warps` warps share the split's keys,
    each with `keys_in_flight` keys' K and V loads in flight, butterfly-shuffle
    scores and an online softmax, the warps merged in workgroup memory, and the
    split that finishes last (an atomic count in `count`) merges the partials
    into `out`. Arguments (q, k_cache, v_cache, block_table, out, o_part,
    lse_part, count, seqs, T, seq_tiles, n_head, head_dim, max_splits, scale);
    block (32 x warps, 1, 1), grid `n_seq*seq_tiles, n_head_kv, n_split`,
    `nvvm.minctasm` = min_ctas_per_sm when > 0, no `swz.schedule` (no staged
    tile: nothing for the bank-conflict proof). Fails, naming the field, on
    head_dim other than 128, block(rows, split unit) other than (8, 32), warps
    not a multiple of 4 dividing the rows in groups of 128 threads,
    keys_in_flight outside [1, 16], over 48 KiB of workgroup memory, or a
    `@dec_*` global that exists already.

    A tile spec with `weights = "<type>"` (q4_k, q6_k, q8_0) is the dequantizing
    skinny GEMM (LowerSkinnyGemm.cpp): its kernel goes into `@swz_<base>` for
    `@<base>_<type>` (gemm_skinny.mlir's three into `@swz_gemm_skinny`), with the
    global `@skinny_<type>` (stages x tile_n rows of each row's 256-weight stage
    window) and arguments (x f32 [T, K], w the GGUF bytes as f16, y, bias, res,
    T, N, K, flags; the epilogue as the GEMM's), block (32 x warps, 1, 1), grid
    `ceil(N/tile_n), 1, 1`, no `swz.schedule`. It fails, naming the gemm.skinny field, for a ring over 48 KiB
    of static shared memory, tile_k other than 256, tile_n other than 8 x warps,
    tile_m not 16 x a power of two.

    A `swz.gemv_tile` (weights q4_k, q8_0, q6_k, q4_1 or q5_0, activations "q8x")
    is the int8 decode GEMV (LowerGemv.cpp), `gpu.func @name` with the globals
    `@acc_<type>` (128 x rows_per_warp f32: the 8-lane segment sums) and
    `@slots_<type>` (1024 x rows_per_warp f32: per-thread partials of 2..8
    tokens) in the tile spec's place (gemv_q8x.mlir's `@swz_gemv_q8x`).
    Arguments (w0, w1, w2, xq, xds, y0, y1, y2, bias0, bias1, bias2, res, N0, N1,
    N2, K, T, flags): up to three matrices of one quantized input; block (128, 1,
    1), grid `ceil((N0+N1+N2)/<4 rows_per_warp>), ceil(T/8), 1`, `nvvm.minctasm` =
    min_ctas_per_sm when > 0. A warp takes rows_per_warp consecutive rows, a lane
    the units lane, lane + 32, ... with units_in_flight units' loads issued
    first; each unit's dot product is dp4a; the reduction is the same additions
    in the same order for one token and for many. Fails on an unscheduled spec
    or when a global it would define exists.

    With activations "f32" (weights q4_0, q4_1, q5_0, q8_0, q4_k, q6_k, f16; every
    target) it is the f32 decode GEMV `gpu.func @name(w, x, y, bias, res, N, K, T,
    flags)` with the globals `@acc` (128 f32) and `@slots` (1024 f32): one matrix,
    one row a warp, units_in_flight units' loads a lane first, block (128, 1, 1),
    grid `ceil(N/4), ceil(T/8), 1`, `spirv.entry_point_abi` for the SPIR-V path;
    with `lookup` the embedding lookup `gpu.func @name(w, tokens, out, K)`, grid
    `T, 1, 1`, the rows dequantized as the GEMV dequantizes them. With `mma =
    "mma.sync.m16n8k16"` (weights f16) it is F16's tensor-core GEMV `gpu.func
    @name(w as 16-byte vectors, x, y, bias, res, N, K, T, flags)` with the global
    `@acc_<name>` (warps x m_tiles x 128 f32): block (32 warps, 1, 1), grid
    `ceil(N/<16 m_tiles>), ceil(T/8), 1`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::gpu::GPUDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::math::MathDialect",
                           "mlir::NVVM::NVVMDialect",
                           "mlir::memref::MemRefDialect", "mlir::nvgpu::NVGPUDialect",
                           "mlir::scf::SCFDialect", "mlir::spirv::SPIRVDialect",
                           "mlir::vector::VectorDialect"];
}

#endif // SWZ_PASSES_TD
