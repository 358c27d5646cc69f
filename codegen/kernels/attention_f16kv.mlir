// Attention over a paged f16 KV cache: the KV write, flash attention for prefill
// and split-K ("flash decoding") paged attention for decode, with GQA. One source
// for PTX and SPIR-V (gpu + memref + arith + scf + math only; workgroup memory is
// memref.globals in #gpu.address_space<workgroup>, `.shared` on PTX and Workgroup
// variables on SPIR-V through swz-spirv-workgroup-memory; no subgroup operations,
// so results do not depend on the subgroup size, e.g. lavapipe's 8 lanes).
//
// GPU paged KV layout (per layer; pages of 64 tokens = the prefix cache's block,
// runtime/kvcache/block_manager.h):
//   k_cache, v_cache: f16, [page][n_head_kv][64][head_dim], flat memref<?xf16>:
//     element (page, kvh, slot, d) at ((page * n_head_kv + kvh) * 64 + slot) * head_dim + d.
//   block_table: [n_blocks] i32: position p lives in page block_table[p / 64], slot p % 64.
// K and V have the same layout (V is not transposed as on the cpu backend: here a
// thread owns one feature d of an output row, so V rows read along d are
// coalesced). One (page, kv head) is a contiguous 64 x head_dim tile, 8 KiB at
// head_dim 64. The cpu layout ([slot][kv_width] K, transposed V, all layers in one
// page) differs; a spill/restore between the two is a per-layer transpose.
//
// Activations are f32 row-major and passed flat (memref<?xf32>, the SPIR-V lowering
// takes 1-D dynamic buffers): q, out: [T, n_head * head_dim]; k, v (new rows):
// [T, n_head_kv * head_dim]. Row t is at position pos0 + t. G = n_head / n_head_kv
// query heads share a KV head (query head h reads KV head h / G).
//
// 1. kv_store_f16(k, v, k_cache, v_cache, block_table, row_tables, positions, head_dim):
//    grid (T, n_head_kv, 1), block 64; writes the T new rows of k and v rounded to
//    f16 (round to nearest even on PTX, cvt.rn.f16.f32), row t at position
//    positions[t] through the block table that starts at block_table[row_tables[t]]:
//    one launch for the rows of every sequence of a pass (block_table holds all their
//    tables, row_tables[t] the offset of row t's; [T] i32 each, as positions).
//
// 2. flash_attention_f16kv(q, k_cache, v_cache, block_table, out, o_part, lse_part,
//    T, pos0, n_head, head_dim, split_len, scale):
//    out[t, h, :] = softmax_j(scale * q[t, h, :] . K[j, h / G, :]) . V[j, h / G, :]
//    over keys j = 0..pos0+t (causal; the prefix before pos0 and the new rows, all
//    read through the block table). FlashAttention (Dao et al. 2022): keys stream in
//    tiles of 32 through workgroup memory with an online softmax (running max m,
//    running sum l, output rescaled by exp(m_old - m_new)).
//    A workgroup (128 threads) owns 8 query rows of one KV head: flattened row
//    i = t * G + g (query head h = kvh * G + g), so the G query heads of a KV head
//    share every K/V tile it loads and a decode step with T * G <= 8 (T = 1..2 at
//    G = 3, T = 1 at G = 7) reads each K/V page once per (KV head, split).
//    grid (ceil(T * G / 8), n_head_kv, n_split), block 128.
//    Workgroup z = s covers keys [s * split_len, (s + 1) * split_len) (split_len a
//    multiple of 32; prefill: splits of one length per executor, at fixed offsets, so a
//    row's splits do not depend on its pass: compiler/driver/launch_bindings.cpp
//    prefillSplitLen).
//      n_split == 1: writes out (normalised); o_part and lse_part are not touched
//                    (pass any buffer, e.g. out).
//      n_split > 1:  writes o_part[s, t, h, :] = that split's normalised output and
//                    lse_part[s, t, h] = m + log(l) of its scores (-inf where the
//                    split holds no visible key; o_part is then 0); then run
//                    attention_split_reduce. o_part: [n_split, T, n_head, head_dim] f32,
//                    lse_part: [n_split, T, n_head] f32.
//    Requires head_dim <= 128 (workgroup tiles are sized for it) and a multiple of 4
//    (the score dot product runs four features at a time), T * G rows, any T.
//    Workgroup memory: 42,208 bytes (Q 8 x 128, K 32 x 129 (padded: the score loop
//    reads K along a row per lane, conflict-free), V 32 x 128, scores 8 x 32,
//    O 8 x 128, row statistics 24, all f32).
//
// 3. attention_split_reduce(o_part, lse_part, out, n_split, head_dim):
//    grid (T, n_head, 1), block 64:
//    out[t, h, :] = sum_s exp(lse_s - LSE) o_part[s, t, h, :], LSE = log sum_s exp(lse_s).
//
// 4. kv_move_rope_f16(k_cache, v_cache, moves, head_dim, n_rot, theta, neox): not a graph
//    op's: the package's graph.kv_move, K/V moved between slots with K re-rotated (the
//    approx cache mode; below).
//
// The graph's `attention` op (docs/graph.md) is kv_store_f16 then
// flash_attention_f16kv (plus attention_split_reduce when split).
module attributes {gpu.container_module} {
  gpu.module @swz_attention_f16kv attributes {
      spirv.target_env = #spirv.target_env<#spirv.vce<v1.3,
          [Shader, Float16, StorageBuffer16BitAccess],
          [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>,
          #spirv.resource_limits<>>} {

    // ---------------------------------------------------------------- KV write
    gpu.func @kv_store_f16(%k: memref<?xf32>, %v: memref<?xf32>, %k_cache: memref<?xf16>,
                           %v_cache: memref<?xf16>, %block_table: memref<?xi32>,
                           %row_tables: memref<?xi32>, %positions: memref<?xi32>,
                           %head_dim: i32) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>,
                    swz.grid = "T, n_head_kv, 1"} {
      %c64 = arith.constant 64 : index
      %t = gpu.block_id x
      %kvh = gpu.block_id y
      %n_kv = gpu.grid_dim y
      %tid = gpu.thread_id x
      %hd = arith.index_cast %head_dim : i32 to index
      %pos_i = memref.load %positions[%t] : memref<?xi32>
      %pos = arith.index_cast %pos_i : i32 to index
      %tb_i = memref.load %row_tables[%t] : memref<?xi32>
      %tb = arith.index_cast %tb_i : i32 to index
      %blk0 = arith.divui %pos, %c64 : index
      %blk = arith.addi %tb, %blk0 : index
      %slot = arith.remui %pos, %c64 : index
      %page_i = memref.load %block_table[%blk] : memref<?xi32>
      %page = arith.index_cast %page_i : i32 to index
      %a0 = arith.muli %page, %n_kv : index
      %a1 = arith.addi %a0, %kvh : index
      %a2 = arith.muli %a1, %c64 : index
      %a3 = arith.addi %a2, %slot : index
      %dst = arith.muli %a3, %hd : index
      %s0 = arith.muli %t, %n_kv : index
      %s1 = arith.addi %s0, %kvh : index
      %src = arith.muli %s1, %hd : index
      scf.for %d = %tid to %hd step %c64 {
        %si = arith.addi %src, %d : index
        %di = arith.addi %dst, %d : index
        %kx = memref.load %k[%si] : memref<?xf32>
        %vx = memref.load %v[%si] : memref<?xf32>
        %kh = arith.truncf %kx : f32 to f16
        %vh = arith.truncf %vx : f32 to f16
        memref.store %kh, %k_cache[%di] : memref<?xf16>
        memref.store %vh, %v_cache[%di] : memref<?xf16>
      }
      gpu.return
    }

    // ------------------------- head RMSNorm and RoPE on q and k, fused with the KV write
    // rope_kv_store_f16(q, k, v, k_cache, v_cache, block_table, row_tables, head_dim,
    //                   positions, n_rot, theta, neox, q_gamma, k_gamma, eps, norm, n_q):
    // swz-fuse's form of the graph's [head_norm(q), head_norm(k),] [rope(q),] rope(k) and
    // the attention's KV write, one launch. grid (T, n_q + n_head_kv, 1), block 64;
    // head_dim even and <= 256, n_rot even and <= head_dim.
    //   Workgroup (t, y), y < n_q: query head y of row t (q: [T, n_q * head_dim]),
    //     normalised and rotated in place. n_q = 0: q is not touched.
    //   y >= n_q: KV head kvh = y - n_q of row t: k normalised and rotated, then k and
    //     v rounded to f16 into the cache at position positions[t] through the block
    //     table at block_table[row_tables[t]] (kv_store_f16's layout and tables).
    // norm = 1: the head is first normalised exactly as rms_norm_f32 normalises a row
    //   of head_dim (bitwise: the same squares, the same halving tree, y = (x * inv) *
    //   gamma) with gamma = q_gamma or k_gamma ([head_dim] f32) and eps (Qwen3's q_norm /
    //   k_norm); norm = 0: the gammas are not read (bind any buffer).
    // RoPE exactly as rope_f32 (the same f32 angle pos theta^(-2i/n_rot) and products):
    //   neox pairs (i, i + n_rot/2), norm pairs (2i, 2i + 1); features >= n_rot stay.
    // The head is staged in workgroup memory between the norm and the rotation (a
    // pair's two features come from different threads).
    memref.global "private" @qk_sums : memref<64xf32, #gpu.address_space<workgroup>>
    memref.global "private" @qk_row : memref<256xf32, #gpu.address_space<workgroup>>

    gpu.func @rope_kv_store_f16(%q: memref<?xf32>, %k: memref<?xf32>, %v: memref<?xf32>,
                                %k_cache: memref<?xf16>, %v_cache: memref<?xf16>,
                                %block_table: memref<?xi32>, %row_tables: memref<?xi32>, %head_dim: i32,
                                %positions: memref<?xi32>, %n_rot: i32, %theta: f32,
                                %neox: i32, %q_gamma: memref<?xf32>, %k_gamma: memref<?xf32>,
                                %eps: f32, %norm: i32, %n_q: i32) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>,
                    swz.grid = "T, n_q + n_head_kv, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c6 = arith.constant 6 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c192 = arith.constant 192 : index
      %zero = arith.constant 0.0 : f32
      %zero_i = arith.constant 0 : i32
      %m2 = arith.constant -2.0 : f32
      %sums = memref.get_global @qk_sums : memref<64xf32, #gpu.address_space<workgroup>>
      %row = memref.get_global @qk_row : memref<256xf32, #gpu.address_space<workgroup>>
      %t = gpu.block_id x
      %y = gpu.block_id y
      %ny = gpu.grid_dim y
      %tid = gpu.thread_id x
      %nq = arith.index_cast %n_q : i32 to index
      %n_kv = arith.subi %ny, %nq : index
      %is_q = arith.cmpi ult, %y, %nq : index
      %kvh = arith.subi %y, %nq : index
      %h = arith.select %is_q, %y, %kvh : index
      %heads = arith.select %is_q, %nq, %n_kv : index
      %hd = arith.index_cast %head_dim : i32 to index
      %s0 = arith.muli %t, %heads : index
      %s1 = arith.addi %s0, %h : index
      %src = arith.muli %s1, %hd : index
      %do_norm = arith.cmpi ne, %norm, %zero_i : i32
      // 1. This thread's columns tid + 64 j (j < 4) of the head; 0 past head_dim
      //    (those read column 0, which exists).
      %col0 = arith.addi %tid, %c0 : index
      %col1 = arith.addi %tid, %c64 : index
      %col2 = arith.addi %tid, %c128 : index
      %col3 = arith.addi %tid, %c192 : index
      %in0 = arith.cmpi ult, %col0, %hd : index
      %in1 = arith.cmpi ult, %col1, %hd : index
      %in2 = arith.cmpi ult, %col2, %hd : index
      %in3 = arith.cmpi ult, %col3, %hd : index
      %cc0 = arith.select %in0, %col0, %c0 : index
      %cc1 = arith.select %in1, %col1, %c0 : index
      %cc2 = arith.select %in2, %col2, %c0 : index
      %cc3 = arith.select %in3, %col3, %c0 : index
      %i0 = arith.addi %src, %cc0 : index
      %i1 = arith.addi %src, %cc1 : index
      %i2 = arith.addi %src, %cc2 : index
      %i3 = arith.addi %src, %cc3 : index
      // q or k by index, not by branch (a branch between two buffers canonicalises
      // into a select of memrefs, which neither lowering takes): the other buffer's
      // element 0 is read and dropped.
      %iq0 = arith.select %is_q, %i0, %c0 : index
      %ik0 = arith.select %is_q, %c0, %i0 : index
      %lq0 = memref.load %q[%iq0] : memref<?xf32>
      %lk0 = memref.load %k[%ik0] : memref<?xf32>
      %l0 = arith.select %is_q, %lq0, %lk0 : f32
      %iq1 = arith.select %is_q, %i1, %c0 : index
      %ik1 = arith.select %is_q, %c0, %i1 : index
      %lq1 = memref.load %q[%iq1] : memref<?xf32>
      %lk1 = memref.load %k[%ik1] : memref<?xf32>
      %l1 = arith.select %is_q, %lq1, %lk1 : f32
      %iq2 = arith.select %is_q, %i2, %c0 : index
      %ik2 = arith.select %is_q, %c0, %i2 : index
      %lq2 = memref.load %q[%iq2] : memref<?xf32>
      %lk2 = memref.load %k[%ik2] : memref<?xf32>
      %l2 = arith.select %is_q, %lq2, %lk2 : f32
      %iq3 = arith.select %is_q, %i3, %c0 : index
      %ik3 = arith.select %is_q, %c0, %i3 : index
      %lq3 = memref.load %q[%iq3] : memref<?xf32>
      %lk3 = memref.load %k[%ik3] : memref<?xf32>
      %l3 = arith.select %is_q, %lq3, %lk3 : f32
      %x0 = arith.select %in0, %l0, %zero : f32
      %x1 = arith.select %in1, %l1, %zero : f32
      %x2 = arith.select %in2, %l2, %zero : f32
      %x3 = arith.select %in3, %l3, %zero : f32
      // 2. rms_norm_f32's sum for a row of head_dim <= 256: its partial of column c is
      //    fma(x_c, x_c, 0) (0 past the row), then the tree halves 256 partials:
      //    s = 128 and 64 inside this thread (columns c, c + 64, c + 128, c + 192), the
      //    rest in workgroup memory. Computed whether or not norm is set (the barriers
      //    stay outside any branch).
      %p0 = math.fma %x0, %x0, %zero : f32
      %p1 = math.fma %x1, %x1, %zero : f32
      %p2 = math.fma %x2, %x2, %zero : f32
      %p3 = math.fma %x3, %x3, %zero : f32
      %p02 = arith.addf %p0, %p2 : f32
      %p13 = arith.addf %p1, %p3 : f32
      %p = arith.addf %p02, %p13 : f32
      memref.store %p, %sums[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %s_end = scf.for %step = %c0 to %c6 step %c1 iter_args(%s = %c32) -> (index) {
        %active = arith.cmpi ult, %tid, %s : index
        scf.if %active {
          %o = arith.addi %tid, %s : index
          %a = memref.load %sums[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
          %b = memref.load %sums[%o] : memref<64xf32, #gpu.address_space<workgroup>>
          %ab = arith.addf %a, %b : f32
          memref.store %ab, %sums[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        %s2 = arith.divui %s, %c2 : index
        scf.yield %s2 : index
      }
      %total = memref.load %sums[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %Df = arith.uitofp %head_dim : i32 to f32
      %mean = arith.divf %total, %Df : f32
      %meps = arith.addf %mean, %eps : f32
      %inv = math.rsqrt %meps : f32
      // 3. The normalised (or, norm = 0, the loaded) head into workgroup memory.
      %g0, %g1, %g2, %g3 = scf.if %do_norm -> (f32, f32, f32, f32) {
        %gqi0 = arith.select %is_q, %cc0, %c0 : index
        %gki0 = arith.select %is_q, %c0, %cc0 : index
        %gq0 = memref.load %q_gamma[%gqi0] : memref<?xf32>
        %gk0 = memref.load %k_gamma[%gki0] : memref<?xf32>
        %gs0 = arith.select %is_q, %gq0, %gk0 : f32
        %gqi1 = arith.select %is_q, %cc1, %c0 : index
        %gki1 = arith.select %is_q, %c0, %cc1 : index
        %gq1 = memref.load %q_gamma[%gqi1] : memref<?xf32>
        %gk1 = memref.load %k_gamma[%gki1] : memref<?xf32>
        %gs1 = arith.select %is_q, %gq1, %gk1 : f32
        %gqi2 = arith.select %is_q, %cc2, %c0 : index
        %gki2 = arith.select %is_q, %c0, %cc2 : index
        %gq2 = memref.load %q_gamma[%gqi2] : memref<?xf32>
        %gk2 = memref.load %k_gamma[%gki2] : memref<?xf32>
        %gs2 = arith.select %is_q, %gq2, %gk2 : f32
        %gqi3 = arith.select %is_q, %cc3, %c0 : index
        %gki3 = arith.select %is_q, %c0, %cc3 : index
        %gq3 = memref.load %q_gamma[%gqi3] : memref<?xf32>
        %gk3 = memref.load %k_gamma[%gki3] : memref<?xf32>
        %gs3 = arith.select %is_q, %gq3, %gk3 : f32
        scf.yield %gs0, %gs1, %gs2, %gs3 : f32, f32, f32, f32
      } else {
        scf.yield %zero, %zero, %zero, %zero : f32, f32, f32, f32
      }
      %n0 = arith.mulf %x0, %inv : f32
      %n1 = arith.mulf %x1, %inv : f32
      %n2 = arith.mulf %x2, %inv : f32
      %n3 = arith.mulf %x3, %inv : f32
      %r0 = arith.mulf %n0, %g0 : f32
      %r1 = arith.mulf %n1, %g1 : f32
      %r2 = arith.mulf %n2, %g2 : f32
      %r3 = arith.mulf %n3, %g3 : f32
      %y0 = arith.select %do_norm, %r0, %x0 : f32
      %y1 = arith.select %do_norm, %r1, %x1 : f32
      %y2 = arith.select %do_norm, %r2, %x2 : f32
      %y3 = arith.select %do_norm, %r3, %x3 : f32
      scf.if %in0 {
        memref.store %y0, %row[%col0] : memref<256xf32, #gpu.address_space<workgroup>>
      }
      scf.if %in1 {
        memref.store %y1, %row[%col1] : memref<256xf32, #gpu.address_space<workgroup>>
      }
      scf.if %in2 {
        memref.store %y2, %row[%col2] : memref<256xf32, #gpu.address_space<workgroup>>
      }
      scf.if %in3 {
        memref.store %y3, %row[%col3] : memref<256xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
      // 4. Where the head goes: q in place, or (below, in the k branch) the KV cache slot
      // of position positions[t].
      %rpos_i = memref.load %positions[%t] : memref<?xi32>
      %pos = arith.index_cast %rpos_i : i32 to index
      // 5. RoPE, rope_f32's operations: pair i of n_rot / 2, lanes striding.
      %nr = arith.index_cast %n_rot : i32 to index
      %half = arith.divui %nr, %c2 : index
      %rpos = arith.sitofp %rpos_i : i32 to f32
      %nr_f = arith.uitofp %n_rot : i32 to f32
      %ln_theta = math.log %theta : f32
      %is_neox = arith.cmpi ne, %neox, %zero_i : i32
      // One branch for q, one for k, each with its own loops (a branch on the store
      // inside one loop kept both destinations live across libdevice's sinf/cosf and
      // spilled on sm_80; so did the k slot's address: k is rotated in workgroup memory
      // (each thread its own pairs) and stored after the rotation).
      scf.if %is_q {
        scf.for %iq = %tid to %half step %c64 {
          %i_i32q = arith.index_cast %iq : index to i32
          %i_fq = arith.uitofp %i_i32q : i32 to f32
          %e0q = arith.mulf %m2, %i_fq : f32
          %eq = arith.divf %e0q, %nr_f : f32
          %leq = arith.mulf %eq, %ln_theta : f32
          %freqq = math.exp %leq : f32
          %angq = arith.mulf %rpos, %freqq : f32
          %cq = math.cos %angq : f32
          %sq = math.sin %angq : f32
          %two_iq = arith.muli %iq, %c2 : index
          %two_i1q = arith.addi %two_iq, %c1 : index
          %i_halfq = arith.addi %iq, %half : index
          %j0q = arith.select %is_neox, %iq, %two_iq : index
          %j1q = arith.select %is_neox, %i_halfq, %two_i1q : index
          %v0q = memref.load %row[%j0q] : memref<256xf32, #gpu.address_space<workgroup>>
          %v1q = memref.load %row[%j1q] : memref<256xf32, #gpu.address_space<workgroup>>
          %aq = arith.mulf %v0q, %cq : f32
          %bq = arith.mulf %v1q, %sq : f32
          %w0q = arith.subf %aq, %bq : f32
          %dq = arith.mulf %v0q, %sq : f32
          %fq = arith.mulf %v1q, %cq : f32
          %w1q = arith.addf %dq, %fq : f32
          %o0q = arith.addi %src, %j0q : index
          %o1q = arith.addi %src, %j1q : index
          memref.store %w0q, %q[%o0q] : memref<?xf32>
          memref.store %w1q, %q[%o1q] : memref<?xf32>
        }
        // Features past n_rot: the normalised value (only when normalised: otherwise it
        // is already there).
        scf.if %do_norm {
          %nr_tidq = arith.addi %nr, %tid : index
          scf.for %cfq = %nr_tidq to %hd step %c64 {
            %xvq = memref.load %row[%cfq] : memref<256xf32, #gpu.address_space<workgroup>>
            %qi = arith.addi %src, %cfq : index
            memref.store %xvq, %q[%qi] : memref<?xf32>
          }
        }
      } else {
        scf.for %ik = %tid to %half step %c64 {
          %i_i32k = arith.index_cast %ik : index to i32
          %i_fk = arith.uitofp %i_i32k : i32 to f32
          %e0k = arith.mulf %m2, %i_fk : f32
          %ek = arith.divf %e0k, %nr_f : f32
          %lek = arith.mulf %ek, %ln_theta : f32
          %freqk = math.exp %lek : f32
          %angk = arith.mulf %rpos, %freqk : f32
          %ck = math.cos %angk : f32
          %sk = math.sin %angk : f32
          %two_ik = arith.muli %ik, %c2 : index
          %two_i1k = arith.addi %two_ik, %c1 : index
          %i_halfk = arith.addi %ik, %half : index
          %j0k = arith.select %is_neox, %ik, %two_ik : index
          %j1k = arith.select %is_neox, %i_halfk, %two_i1k : index
          %v0k = memref.load %row[%j0k] : memref<256xf32, #gpu.address_space<workgroup>>
          %v1k = memref.load %row[%j1k] : memref<256xf32, #gpu.address_space<workgroup>>
          %ak = arith.mulf %v0k, %ck : f32
          %bk = arith.mulf %v1k, %sk : f32
          %w0k = arith.subf %ak, %bk : f32
          %dk = arith.mulf %v0k, %sk : f32
          %fk = arith.mulf %v1k, %ck : f32
          %w1k = arith.addf %dk, %fk : f32
          memref.store %w0k, %row[%j0k] : memref<256xf32, #gpu.address_space<workgroup>>
          memref.store %w1k, %row[%j1k] : memref<256xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier
        // The rotated head (features past n_rot: the normalised value) into the cache.
        %tb_i = memref.load %row_tables[%t] : memref<?xi32>
        %tb = arith.index_cast %tb_i : i32 to index
        %blk0 = arith.divui %pos, %c64 : index
        %blk = arith.addi %tb, %blk0 : index
        %slot = arith.remui %pos, %c64 : index
        %page_i = memref.load %block_table[%blk] : memref<?xi32>
        %page = arith.index_cast %page_i : i32 to index
        %d0 = arith.muli %page, %n_kv : index
        %d1 = arith.addi %d0, %kvh : index
        %d2 = arith.muli %d1, %c64 : index
        %d3 = arith.addi %d2, %slot : index
        %dst = arith.muli %d3, %hd : index
        scf.for %cf = %tid to %hd step %c64 {
          %xv = memref.load %row[%cf] : memref<256xf32, #gpu.address_space<workgroup>>
          %ki = arith.addi %dst, %cf : index
          %xh = arith.truncf %xv : f32 to f16
          memref.store %xh, %k_cache[%ki] : memref<?xf16>
        }
        // 6. v, as kv_store_f16 writes it.
        scf.for %cv = %tid to %hd step %c64 {
          %si = arith.addi %src, %cv : index
          %di = arith.addi %dst, %cv : index
          %vx = memref.load %v[%si] : memref<?xf32>
          %vh = arith.truncf %vx : f32 to f16
          memref.store %vh, %v_cache[%di] : memref<?xf16>
        }
      }
      gpu.return
    }

    // --------------------------------------- K/V moved between slots (approx cache mode)
    // kv_move_rope_f16(k_cache, v_cache, moves, head_dim, n_rot, theta, neox):
    // grid (T, n_head_kv, 1), block 64; moves: [T][3] i32 {source slot, destination slot,
    // delta}, a slot being page * 64 + its slot in the page. Workgroup (t, kvh) copies KV
    // head kvh of move t's source slot to its destination slot in this layer's pools: V
    // as it is; K re-rotated by RoPE by delta positions (a key roped at p becomes the key
    // roped at p + delta: rope_f32's f32 angle delta * theta^(-2i/n_rot) and products,
    // pairs (i, i + n_rot/2) when neox, else (2i, 2i + 1), rounded to f16); features >=
    // n_rot copied. head_dim <= 256 and even, n_rot even. Each thread reads and writes its
    // own values only (no workgroup memory, no barrier), so the launch's source slots must
    // not be its destination slots (exec::BatchModel::move_kv checks the pages).
    gpu.func @kv_move_rope_f16(%k_cache: memref<?xf16>, %v_cache: memref<?xf16>, %moves: memref<?xi32>,
                               %head_dim: i32, %n_rot: i32, %theta: f32, %neox: i32) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>,
                    swz.grid = "T, n_head_kv, 1"} {
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c64 = arith.constant 64 : index
      %zero_i = arith.constant 0 : i32
      %m2 = arith.constant -2.0 : f32
      %t = gpu.block_id x
      %kvh = gpu.block_id y
      %n_kv = gpu.grid_dim y
      %tid = gpu.thread_id x
      %hd = arith.index_cast %head_dim : i32 to index
      %m0 = arith.muli %t, %c3 : index
      %m1 = arith.addi %m0, %c1 : index
      %mdl = arith.addi %m0, %c2 : index
      %src_i = memref.load %moves[%m0] : memref<?xi32>
      %dst_i = memref.load %moves[%m1] : memref<?xi32>
      %delta_i = memref.load %moves[%mdl] : memref<?xi32>
      // (page, kvh, slot, 0) at ((page * n_kv + kvh) * 64 + slot) * head_dim
      %src_s = arith.index_cast %src_i : i32 to index
      %s_page = arith.divui %src_s, %c64 : index
      %s_slot = arith.remui %src_s, %c64 : index
      %s0 = arith.muli %s_page, %n_kv : index
      %s1 = arith.addi %s0, %kvh : index
      %s2 = arith.muli %s1, %c64 : index
      %s3 = arith.addi %s2, %s_slot : index
      %src = arith.muli %s3, %hd : index
      %dst_s = arith.index_cast %dst_i : i32 to index
      %d_page = arith.divui %dst_s, %c64 : index
      %d_slot = arith.remui %dst_s, %c64 : index
      %d0 = arith.muli %d_page, %n_kv : index
      %d1 = arith.addi %d0, %kvh : index
      %d2 = arith.muli %d1, %c64 : index
      %d3 = arith.addi %d2, %d_slot : index
      %dst = arith.muli %d3, %hd : index
      // V as it is.
      scf.for %cv = %tid to %hd step %c64 {
        %si = arith.addi %src, %cv : index
        %di = arith.addi %dst, %cv : index
        %vx = memref.load %v_cache[%si] : memref<?xf16>
        memref.store %vx, %v_cache[%di] : memref<?xf16>
      }
      // K: pair i of n_rot / 2 rotated by delta, lanes striding.
      %nr = arith.index_cast %n_rot : i32 to index
      %half = arith.divui %nr, %c2 : index
      %dpos = arith.sitofp %delta_i : i32 to f32
      %nr_f = arith.uitofp %n_rot : i32 to f32
      %ln_theta = math.log %theta : f32
      %is_neox = arith.cmpi ne, %neox, %zero_i : i32
      scf.for %i = %tid to %half step %c64 {
        %i_i32 = arith.index_cast %i : index to i32
        %i_f = arith.uitofp %i_i32 : i32 to f32
        %e0 = arith.mulf %m2, %i_f : f32
        %e = arith.divf %e0, %nr_f : f32
        %le = arith.mulf %e, %ln_theta : f32
        %freq = math.exp %le : f32
        %ang = arith.mulf %dpos, %freq : f32
        %c = math.cos %ang : f32
        %s = math.sin %ang : f32
        %two_i = arith.muli %i, %c2 : index
        %two_i1 = arith.addi %two_i, %c1 : index
        %i_half = arith.addi %i, %half : index
        %j0 = arith.select %is_neox, %i, %two_i : index
        %j1 = arith.select %is_neox, %i_half, %two_i1 : index
        %a0 = arith.addi %src, %j0 : index
        %a1 = arith.addi %src, %j1 : index
        %h0 = memref.load %k_cache[%a0] : memref<?xf16>
        %h1 = memref.load %k_cache[%a1] : memref<?xf16>
        %x0 = arith.extf %h0 : f16 to f32
        %x1 = arith.extf %h1 : f16 to f32
        %p0 = arith.mulf %x0, %c : f32
        %p1 = arith.mulf %x1, %s : f32
        %w0 = arith.subf %p0, %p1 : f32
        %p2 = arith.mulf %x0, %s : f32
        %p3 = arith.mulf %x1, %c : f32
        %w1 = arith.addf %p2, %p3 : f32
        %w0h = arith.truncf %w0 : f32 to f16
        %w1h = arith.truncf %w1 : f32 to f16
        %b0 = arith.addi %dst, %j0 : index
        %b1 = arith.addi %dst, %j1 : index
        memref.store %w0h, %k_cache[%b0] : memref<?xf16>
        memref.store %w1h, %k_cache[%b1] : memref<?xf16>
      }
      // K features past n_rot as they are.
      %nr_tid = arith.addi %nr, %tid : index
      scf.for %cf = %nr_tid to %hd step %c64 {
        %si = arith.addi %src, %cf : index
        %di = arith.addi %dst, %cf : index
        %kx = memref.load %k_cache[%si] : memref<?xf16>
        memref.store %kx, %k_cache[%di] : memref<?xf16>
      }
      gpu.return
    }

    // ---------------------------------------------------- flash / split-K attention
    // Workgroup memory of flash_attention_f16kv (f32; sized for head_dim <= 128).
    memref.global "private" @attn_qs : memref<1024xf32, #gpu.address_space<workgroup>>
    memref.global "private" @attn_ks : memref<4128xf32, #gpu.address_space<workgroup>>
    memref.global "private" @attn_vs : memref<4096xf32, #gpu.address_space<workgroup>>
    memref.global "private" @attn_ss : memref<256xf32, #gpu.address_space<workgroup>>
    memref.global "private" @attn_os : memref<1024xf32, #gpu.address_space<workgroup>>
    memref.global "private" @attn_stat : memref<24xf32, #gpu.address_space<workgroup>>
    gpu.func @flash_attention_f16kv(%q: memref<?xf32>, %k_cache: memref<?xf16>,
                                    %v_cache: memref<?xf16>, %block_table: memref<?xi32>,
                                    %out: memref<?xf32>, %o_part: memref<?xf32>,
                                    %lse_part: memref<?xf32>, %T: i32, %pos0: i32,
                                    %n_head: i32, %head_dim: i32, %split_len: i32,
                                    %scale: f32) kernel
        attributes {known_block_size = array<i32: 128, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [128, 1, 1]>,
                    swz.grid = "ceil(T*n_head/n_head_kv/8), n_head_kv, n_split"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %c384 = arith.constant 384 : index
      %c512 = arith.constant 512 : index
      %c640 = arith.constant 640 : index
      %c768 = arith.constant 768 : index
      %c896 = arith.constant 896 : index
      %c1024 = arith.constant 1024 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %zero4 = arith.constant dense<0.0> : vector<4xf32>
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %qs = memref.get_global @attn_qs : memref<1024xf32, #gpu.address_space<workgroup>>
      %ks = memref.get_global @attn_ks : memref<4128xf32, #gpu.address_space<workgroup>>
      %vs = memref.get_global @attn_vs : memref<4096xf32, #gpu.address_space<workgroup>>
      %ss = memref.get_global @attn_ss : memref<256xf32, #gpu.address_space<workgroup>>
      %os = memref.get_global @attn_os : memref<1024xf32, #gpu.address_space<workgroup>>
      %stat = memref.get_global @attn_stat : memref<24xf32, #gpu.address_space<workgroup>>
      %tile = gpu.block_id x
      %kvh = gpu.block_id y
      %split = gpu.block_id z
      %n_kv = gpu.grid_dim y
      %n_split = gpu.grid_dim z
      %tid = gpu.thread_id x
      %hd = arith.index_cast %head_dim : i32 to index
      %nh = arith.index_cast %n_head : i32 to index
      %Ti = arith.index_cast %T : i32 to index
      %p0 = arith.index_cast %pos0 : i32 to index
      %sl = arith.index_cast %split_len : i32 to index
      %G = arith.divui %nh, %n_kv : index
      // Divisions by head_dim and G in 32 bits (index is 64-bit on PTX, and a 64-bit
      // division by a run-time value is several times the instructions).
      %hd32 = arith.index_cast %hd : index to i32
      %G32 = arith.index_cast %G : index to i32
      %rows = arith.muli %Ti, %G : index
      %row0 = arith.muli %tile, %c8 : index
      %pitch = arith.addi %hd, %c1 : index
      %n_q = arith.muli %c8, %hd : index
      %n_tile = arith.muli %c32, %hd : index
      %h0 = arith.muli %kvh, %G : index

      // Q tile (pre-multiplied by scale) and O = 0; dead rows (i >= T * G) get 0.
      scf.for %e = %tid to %n_q step %c128 {
        %r_x32 = arith.index_cast %e : index to i32
        %r_q32 = arith.divui %r_x32, %hd32 : i32
        %r = arith.index_cast %r_q32 : i32 to index
        %d_x32 = arith.index_cast %e : index to i32
        %d_q32 = arith.remui %d_x32, %hd32 : i32
        %d = arith.index_cast %d_q32 : i32 to index
        %i = arith.addi %row0, %r : index
        %live = arith.cmpi ult, %i, %rows : index
        %qv = scf.if %live -> (f32) {
          %t_x32 = arith.index_cast %i : index to i32
          %t_q32 = arith.divui %t_x32, %G32 : i32
          %t = arith.index_cast %t_q32 : i32 to index
          %g_x32 = arith.index_cast %i : index to i32
          %g_q32 = arith.remui %g_x32, %G32 : i32
          %g = arith.index_cast %g_q32 : i32 to index
          %h = arith.addi %h0, %g : index
          %x0 = arith.muli %t, %nh : index
          %x1 = arith.addi %x0, %h : index
          %x2 = arith.muli %x1, %hd : index
          %x3 = arith.addi %x2, %d : index
          %qx = memref.load %q[%x3] : memref<?xf32>
          %qsc = arith.mulf %qx, %scale : f32
          scf.yield %qsc : f32
        } else {
          scf.yield %zero : f32
        }
        memref.store %qv, %qs[%e] : memref<1024xf32, #gpu.address_space<workgroup>>
        memref.store %zero, %os[%e] : memref<1024xf32, #gpu.address_space<workgroup>>
      }
      // Row statistics: stat[r] = m (running max), stat[8 + r] = l (running sum),
      // stat[16 + r] = alpha (this tile's rescale factor).
      %is_stat = arith.cmpi ult, %tid, %c8 : index
      scf.if %is_stat {
        %li = arith.addi %tid, %c8 : index
        memref.store %ninf, %stat[%tid] : memref<24xf32, #gpu.address_space<workgroup>>
        memref.store %zero, %stat[%li] : memref<24xf32, #gpu.address_space<workgroup>>
      }

      // Keys this workgroup visits: [kv_lo, kv_hi), kv_hi = min(end of the split,
      // last visible key of the tile's last live row + 1).
      %row_end = arith.addi %row0, %c8 : index
      %row_lim = arith.minui %row_end, %rows : index
      %last_row = arith.subi %row_lim, %c1 : index
      %t_last_x32 = arith.index_cast %last_row : index to i32
      %t_last_q32 = arith.divui %t_last_x32, %G32 : i32
      %t_last = arith.index_cast %t_last_q32 : i32 to index
      %e0 = arith.addi %p0, %t_last : index
      %kv_end = arith.addi %e0, %c1 : index
      %kv_lo = arith.muli %split, %sl : index
      %kv_hi0 = arith.addi %kv_lo, %sl : index
      %kv_hi = arith.minui %kv_end, %kv_hi0 : index
      gpu.barrier

      scf.for %kt = %kv_lo to %kv_hi step %c32 {
        // K and V tile: 32 keys x head_dim, f16 -> f32; keys >= kv_hi read as 0
        // (never from the cache: slots past the context may hold anything).
        // Unrolled by 8 (elements et + 128 u): the 8 block-table loads, then the 16
        // cache loads, are independent and in flight together (a loop of one element
        // an iteration waited on two dependent loads per element). Keys >= kv_hi and
        // elements past the tile load key kt instead (always visible) and keep 0.
        scf.for %et = %tid to %n_tile step %c1024 {
          %t_j0_x32 = arith.index_cast %et : index to i32
          %t_j0_q32 = arith.divui %t_j0_x32, %hd32 : i32
          %t_j0 = arith.index_cast %t_j0_q32 : i32 to index
          %t_d0_x32 = arith.index_cast %et : index to i32
          %t_d0_q32 = arith.remui %t_d0_x32, %hd32 : i32
          %t_d0 = arith.index_cast %t_d0_q32 : i32 to index
          %t_p0 = arith.addi %kt, %t_j0 : index
          %t_in0 = arith.cmpi ult, %t_p0, %kv_hi : index
          %t_pc0 = arith.select %t_in0, %t_p0, %kt : index
          %t_blk0 = arith.divui %t_pc0, %c64 : index
          %t_slot0 = arith.remui %t_pc0, %c64 : index
          %t_page_i0 = memref.load %block_table[%t_blk0] : memref<?xi32>
          %t_eu1 = arith.addi %et, %c128 : index
          %t_ev1 = arith.cmpi ult, %t_eu1, %n_tile : index
          %t_ec1 = arith.select %t_ev1, %t_eu1, %et : index
          %t_j1_x32 = arith.index_cast %t_ec1 : index to i32
          %t_j1_q32 = arith.divui %t_j1_x32, %hd32 : i32
          %t_j1 = arith.index_cast %t_j1_q32 : i32 to index
          %t_d1_x32 = arith.index_cast %t_ec1 : index to i32
          %t_d1_q32 = arith.remui %t_d1_x32, %hd32 : i32
          %t_d1 = arith.index_cast %t_d1_q32 : i32 to index
          %t_p1 = arith.addi %kt, %t_j1 : index
          %t_in1 = arith.cmpi ult, %t_p1, %kv_hi : index
          %t_pc1 = arith.select %t_in1, %t_p1, %kt : index
          %t_blk1 = arith.divui %t_pc1, %c64 : index
          %t_slot1 = arith.remui %t_pc1, %c64 : index
          %t_page_i1 = memref.load %block_table[%t_blk1] : memref<?xi32>
          %t_eu2 = arith.addi %et, %c256 : index
          %t_ev2 = arith.cmpi ult, %t_eu2, %n_tile : index
          %t_ec2 = arith.select %t_ev2, %t_eu2, %et : index
          %t_j2_x32 = arith.index_cast %t_ec2 : index to i32
          %t_j2_q32 = arith.divui %t_j2_x32, %hd32 : i32
          %t_j2 = arith.index_cast %t_j2_q32 : i32 to index
          %t_d2_x32 = arith.index_cast %t_ec2 : index to i32
          %t_d2_q32 = arith.remui %t_d2_x32, %hd32 : i32
          %t_d2 = arith.index_cast %t_d2_q32 : i32 to index
          %t_p2 = arith.addi %kt, %t_j2 : index
          %t_in2 = arith.cmpi ult, %t_p2, %kv_hi : index
          %t_pc2 = arith.select %t_in2, %t_p2, %kt : index
          %t_blk2 = arith.divui %t_pc2, %c64 : index
          %t_slot2 = arith.remui %t_pc2, %c64 : index
          %t_page_i2 = memref.load %block_table[%t_blk2] : memref<?xi32>
          %t_eu3 = arith.addi %et, %c384 : index
          %t_ev3 = arith.cmpi ult, %t_eu3, %n_tile : index
          %t_ec3 = arith.select %t_ev3, %t_eu3, %et : index
          %t_j3_x32 = arith.index_cast %t_ec3 : index to i32
          %t_j3_q32 = arith.divui %t_j3_x32, %hd32 : i32
          %t_j3 = arith.index_cast %t_j3_q32 : i32 to index
          %t_d3_x32 = arith.index_cast %t_ec3 : index to i32
          %t_d3_q32 = arith.remui %t_d3_x32, %hd32 : i32
          %t_d3 = arith.index_cast %t_d3_q32 : i32 to index
          %t_p3 = arith.addi %kt, %t_j3 : index
          %t_in3 = arith.cmpi ult, %t_p3, %kv_hi : index
          %t_pc3 = arith.select %t_in3, %t_p3, %kt : index
          %t_blk3 = arith.divui %t_pc3, %c64 : index
          %t_slot3 = arith.remui %t_pc3, %c64 : index
          %t_page_i3 = memref.load %block_table[%t_blk3] : memref<?xi32>
          %t_eu4 = arith.addi %et, %c512 : index
          %t_ev4 = arith.cmpi ult, %t_eu4, %n_tile : index
          %t_ec4 = arith.select %t_ev4, %t_eu4, %et : index
          %t_j4_x32 = arith.index_cast %t_ec4 : index to i32
          %t_j4_q32 = arith.divui %t_j4_x32, %hd32 : i32
          %t_j4 = arith.index_cast %t_j4_q32 : i32 to index
          %t_d4_x32 = arith.index_cast %t_ec4 : index to i32
          %t_d4_q32 = arith.remui %t_d4_x32, %hd32 : i32
          %t_d4 = arith.index_cast %t_d4_q32 : i32 to index
          %t_p4 = arith.addi %kt, %t_j4 : index
          %t_in4 = arith.cmpi ult, %t_p4, %kv_hi : index
          %t_pc4 = arith.select %t_in4, %t_p4, %kt : index
          %t_blk4 = arith.divui %t_pc4, %c64 : index
          %t_slot4 = arith.remui %t_pc4, %c64 : index
          %t_page_i4 = memref.load %block_table[%t_blk4] : memref<?xi32>
          %t_eu5 = arith.addi %et, %c640 : index
          %t_ev5 = arith.cmpi ult, %t_eu5, %n_tile : index
          %t_ec5 = arith.select %t_ev5, %t_eu5, %et : index
          %t_j5_x32 = arith.index_cast %t_ec5 : index to i32
          %t_j5_q32 = arith.divui %t_j5_x32, %hd32 : i32
          %t_j5 = arith.index_cast %t_j5_q32 : i32 to index
          %t_d5_x32 = arith.index_cast %t_ec5 : index to i32
          %t_d5_q32 = arith.remui %t_d5_x32, %hd32 : i32
          %t_d5 = arith.index_cast %t_d5_q32 : i32 to index
          %t_p5 = arith.addi %kt, %t_j5 : index
          %t_in5 = arith.cmpi ult, %t_p5, %kv_hi : index
          %t_pc5 = arith.select %t_in5, %t_p5, %kt : index
          %t_blk5 = arith.divui %t_pc5, %c64 : index
          %t_slot5 = arith.remui %t_pc5, %c64 : index
          %t_page_i5 = memref.load %block_table[%t_blk5] : memref<?xi32>
          %t_eu6 = arith.addi %et, %c768 : index
          %t_ev6 = arith.cmpi ult, %t_eu6, %n_tile : index
          %t_ec6 = arith.select %t_ev6, %t_eu6, %et : index
          %t_j6_x32 = arith.index_cast %t_ec6 : index to i32
          %t_j6_q32 = arith.divui %t_j6_x32, %hd32 : i32
          %t_j6 = arith.index_cast %t_j6_q32 : i32 to index
          %t_d6_x32 = arith.index_cast %t_ec6 : index to i32
          %t_d6_q32 = arith.remui %t_d6_x32, %hd32 : i32
          %t_d6 = arith.index_cast %t_d6_q32 : i32 to index
          %t_p6 = arith.addi %kt, %t_j6 : index
          %t_in6 = arith.cmpi ult, %t_p6, %kv_hi : index
          %t_pc6 = arith.select %t_in6, %t_p6, %kt : index
          %t_blk6 = arith.divui %t_pc6, %c64 : index
          %t_slot6 = arith.remui %t_pc6, %c64 : index
          %t_page_i6 = memref.load %block_table[%t_blk6] : memref<?xi32>
          %t_eu7 = arith.addi %et, %c896 : index
          %t_ev7 = arith.cmpi ult, %t_eu7, %n_tile : index
          %t_ec7 = arith.select %t_ev7, %t_eu7, %et : index
          %t_j7_x32 = arith.index_cast %t_ec7 : index to i32
          %t_j7_q32 = arith.divui %t_j7_x32, %hd32 : i32
          %t_j7 = arith.index_cast %t_j7_q32 : i32 to index
          %t_d7_x32 = arith.index_cast %t_ec7 : index to i32
          %t_d7_q32 = arith.remui %t_d7_x32, %hd32 : i32
          %t_d7 = arith.index_cast %t_d7_q32 : i32 to index
          %t_p7 = arith.addi %kt, %t_j7 : index
          %t_in7 = arith.cmpi ult, %t_p7, %kv_hi : index
          %t_pc7 = arith.select %t_in7, %t_p7, %kt : index
          %t_blk7 = arith.divui %t_pc7, %c64 : index
          %t_slot7 = arith.remui %t_pc7, %c64 : index
          %t_page_i7 = memref.load %block_table[%t_blk7] : memref<?xi32>
          %t_page0 = arith.index_cast %t_page_i0 : i32 to index
          %t_a0_0 = arith.muli %t_page0, %n_kv : index
          %t_a1_0 = arith.addi %t_a0_0, %kvh : index
          %t_a2_0 = arith.muli %t_a1_0, %c64 : index
          %t_a3_0 = arith.addi %t_a2_0, %t_slot0 : index
          %t_a4_0 = arith.muli %t_a3_0, %hd : index
          %t_a5_0 = arith.addi %t_a4_0, %t_d0 : index
          %t_kh0 = memref.load %k_cache[%t_a5_0] : memref<?xf16>
          %t_vh0 = memref.load %v_cache[%t_a5_0] : memref<?xf16>
          %t_page1 = arith.index_cast %t_page_i1 : i32 to index
          %t_a0_1 = arith.muli %t_page1, %n_kv : index
          %t_a1_1 = arith.addi %t_a0_1, %kvh : index
          %t_a2_1 = arith.muli %t_a1_1, %c64 : index
          %t_a3_1 = arith.addi %t_a2_1, %t_slot1 : index
          %t_a4_1 = arith.muli %t_a3_1, %hd : index
          %t_a5_1 = arith.addi %t_a4_1, %t_d1 : index
          %t_kh1 = memref.load %k_cache[%t_a5_1] : memref<?xf16>
          %t_vh1 = memref.load %v_cache[%t_a5_1] : memref<?xf16>
          %t_page2 = arith.index_cast %t_page_i2 : i32 to index
          %t_a0_2 = arith.muli %t_page2, %n_kv : index
          %t_a1_2 = arith.addi %t_a0_2, %kvh : index
          %t_a2_2 = arith.muli %t_a1_2, %c64 : index
          %t_a3_2 = arith.addi %t_a2_2, %t_slot2 : index
          %t_a4_2 = arith.muli %t_a3_2, %hd : index
          %t_a5_2 = arith.addi %t_a4_2, %t_d2 : index
          %t_kh2 = memref.load %k_cache[%t_a5_2] : memref<?xf16>
          %t_vh2 = memref.load %v_cache[%t_a5_2] : memref<?xf16>
          %t_page3 = arith.index_cast %t_page_i3 : i32 to index
          %t_a0_3 = arith.muli %t_page3, %n_kv : index
          %t_a1_3 = arith.addi %t_a0_3, %kvh : index
          %t_a2_3 = arith.muli %t_a1_3, %c64 : index
          %t_a3_3 = arith.addi %t_a2_3, %t_slot3 : index
          %t_a4_3 = arith.muli %t_a3_3, %hd : index
          %t_a5_3 = arith.addi %t_a4_3, %t_d3 : index
          %t_kh3 = memref.load %k_cache[%t_a5_3] : memref<?xf16>
          %t_vh3 = memref.load %v_cache[%t_a5_3] : memref<?xf16>
          %t_page4 = arith.index_cast %t_page_i4 : i32 to index
          %t_a0_4 = arith.muli %t_page4, %n_kv : index
          %t_a1_4 = arith.addi %t_a0_4, %kvh : index
          %t_a2_4 = arith.muli %t_a1_4, %c64 : index
          %t_a3_4 = arith.addi %t_a2_4, %t_slot4 : index
          %t_a4_4 = arith.muli %t_a3_4, %hd : index
          %t_a5_4 = arith.addi %t_a4_4, %t_d4 : index
          %t_kh4 = memref.load %k_cache[%t_a5_4] : memref<?xf16>
          %t_vh4 = memref.load %v_cache[%t_a5_4] : memref<?xf16>
          %t_page5 = arith.index_cast %t_page_i5 : i32 to index
          %t_a0_5 = arith.muli %t_page5, %n_kv : index
          %t_a1_5 = arith.addi %t_a0_5, %kvh : index
          %t_a2_5 = arith.muli %t_a1_5, %c64 : index
          %t_a3_5 = arith.addi %t_a2_5, %t_slot5 : index
          %t_a4_5 = arith.muli %t_a3_5, %hd : index
          %t_a5_5 = arith.addi %t_a4_5, %t_d5 : index
          %t_kh5 = memref.load %k_cache[%t_a5_5] : memref<?xf16>
          %t_vh5 = memref.load %v_cache[%t_a5_5] : memref<?xf16>
          %t_page6 = arith.index_cast %t_page_i6 : i32 to index
          %t_a0_6 = arith.muli %t_page6, %n_kv : index
          %t_a1_6 = arith.addi %t_a0_6, %kvh : index
          %t_a2_6 = arith.muli %t_a1_6, %c64 : index
          %t_a3_6 = arith.addi %t_a2_6, %t_slot6 : index
          %t_a4_6 = arith.muli %t_a3_6, %hd : index
          %t_a5_6 = arith.addi %t_a4_6, %t_d6 : index
          %t_kh6 = memref.load %k_cache[%t_a5_6] : memref<?xf16>
          %t_vh6 = memref.load %v_cache[%t_a5_6] : memref<?xf16>
          %t_page7 = arith.index_cast %t_page_i7 : i32 to index
          %t_a0_7 = arith.muli %t_page7, %n_kv : index
          %t_a1_7 = arith.addi %t_a0_7, %kvh : index
          %t_a2_7 = arith.muli %t_a1_7, %c64 : index
          %t_a3_7 = arith.addi %t_a2_7, %t_slot7 : index
          %t_a4_7 = arith.muli %t_a3_7, %hd : index
          %t_a5_7 = arith.addi %t_a4_7, %t_d7 : index
          %t_kh7 = memref.load %k_cache[%t_a5_7] : memref<?xf16>
          %t_vh7 = memref.load %v_cache[%t_a5_7] : memref<?xf16>
          %t_kf0 = arith.extf %t_kh0 : f16 to f32
          %t_vf0 = arith.extf %t_vh0 : f16 to f32
          %t_k0 = arith.select %t_in0, %t_kf0, %zero : f32
          %t_v0 = arith.select %t_in0, %t_vf0, %zero : f32
          %t_kr0 = arith.muli %t_j0, %pitch : index
          %t_ki0 = arith.addi %t_kr0, %t_d0 : index
          memref.store %t_k0, %ks[%t_ki0] : memref<4128xf32, #gpu.address_space<workgroup>>
          memref.store %t_v0, %vs[%et] : memref<4096xf32, #gpu.address_space<workgroup>>
          %t_kf1 = arith.extf %t_kh1 : f16 to f32
          %t_vf1 = arith.extf %t_vh1 : f16 to f32
          %t_k1 = arith.select %t_in1, %t_kf1, %zero : f32
          %t_v1 = arith.select %t_in1, %t_vf1, %zero : f32
          %t_kr1 = arith.muli %t_j1, %pitch : index
          %t_ki1 = arith.addi %t_kr1, %t_d1 : index
          scf.if %t_ev1 {
            memref.store %t_k1, %ks[%t_ki1] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v1, %vs[%t_eu1] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf2 = arith.extf %t_kh2 : f16 to f32
          %t_vf2 = arith.extf %t_vh2 : f16 to f32
          %t_k2 = arith.select %t_in2, %t_kf2, %zero : f32
          %t_v2 = arith.select %t_in2, %t_vf2, %zero : f32
          %t_kr2 = arith.muli %t_j2, %pitch : index
          %t_ki2 = arith.addi %t_kr2, %t_d2 : index
          scf.if %t_ev2 {
            memref.store %t_k2, %ks[%t_ki2] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v2, %vs[%t_eu2] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf3 = arith.extf %t_kh3 : f16 to f32
          %t_vf3 = arith.extf %t_vh3 : f16 to f32
          %t_k3 = arith.select %t_in3, %t_kf3, %zero : f32
          %t_v3 = arith.select %t_in3, %t_vf3, %zero : f32
          %t_kr3 = arith.muli %t_j3, %pitch : index
          %t_ki3 = arith.addi %t_kr3, %t_d3 : index
          scf.if %t_ev3 {
            memref.store %t_k3, %ks[%t_ki3] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v3, %vs[%t_eu3] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf4 = arith.extf %t_kh4 : f16 to f32
          %t_vf4 = arith.extf %t_vh4 : f16 to f32
          %t_k4 = arith.select %t_in4, %t_kf4, %zero : f32
          %t_v4 = arith.select %t_in4, %t_vf4, %zero : f32
          %t_kr4 = arith.muli %t_j4, %pitch : index
          %t_ki4 = arith.addi %t_kr4, %t_d4 : index
          scf.if %t_ev4 {
            memref.store %t_k4, %ks[%t_ki4] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v4, %vs[%t_eu4] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf5 = arith.extf %t_kh5 : f16 to f32
          %t_vf5 = arith.extf %t_vh5 : f16 to f32
          %t_k5 = arith.select %t_in5, %t_kf5, %zero : f32
          %t_v5 = arith.select %t_in5, %t_vf5, %zero : f32
          %t_kr5 = arith.muli %t_j5, %pitch : index
          %t_ki5 = arith.addi %t_kr5, %t_d5 : index
          scf.if %t_ev5 {
            memref.store %t_k5, %ks[%t_ki5] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v5, %vs[%t_eu5] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf6 = arith.extf %t_kh6 : f16 to f32
          %t_vf6 = arith.extf %t_vh6 : f16 to f32
          %t_k6 = arith.select %t_in6, %t_kf6, %zero : f32
          %t_v6 = arith.select %t_in6, %t_vf6, %zero : f32
          %t_kr6 = arith.muli %t_j6, %pitch : index
          %t_ki6 = arith.addi %t_kr6, %t_d6 : index
          scf.if %t_ev6 {
            memref.store %t_k6, %ks[%t_ki6] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v6, %vs[%t_eu6] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
          %t_kf7 = arith.extf %t_kh7 : f16 to f32
          %t_vf7 = arith.extf %t_vh7 : f16 to f32
          %t_k7 = arith.select %t_in7, %t_kf7, %zero : f32
          %t_v7 = arith.select %t_in7, %t_vf7, %zero : f32
          %t_kr7 = arith.muli %t_j7, %pitch : index
          %t_ki7 = arith.addi %t_kr7, %t_d7 : index
          scf.if %t_ev7 {
            memref.store %t_k7, %ks[%t_ki7] : memref<4128xf32, #gpu.address_space<workgroup>>
            memref.store %t_v7, %vs[%t_eu7] : memref<4096xf32, #gpu.address_space<workgroup>>
          }
        }
        gpu.barrier

        // Scores S[r][j] = (scale q_r) . k_j, -inf where key kt + j is not visible
        // to row r (after its position, or past kv_hi). Thread tid does the pairs
        // tid and tid + 128: j = lane index (tid % 32), r = tid / 32 (+ 4).
        scf.for %u = %c0 to %c2 step %c1 {
          %u128 = arith.muli %u, %c128 : index
          %pr = arith.addi %tid, %u128 : index
          %r = arith.divui %pr, %c32 : index
          %j = arith.remui %pr, %c32 : index
          %i = arith.addi %row0, %r : index
          %t_x32 = arith.index_cast %i : index to i32
          %t_q32 = arith.divui %t_x32, %G32 : i32
          %t = arith.index_cast %t_q32 : i32 to index
          %pos_r = arith.addi %p0, %t : index
          %key = arith.addi %kt, %j : index
          %causal = arith.cmpi ule, %key, %pos_r : index
          %inr = arith.cmpi ult, %key, %kv_hi : index
          %vis = arith.andi %causal, %inr : i1
          // Rows past T * G (r is uniform over 32 consecutive threads) skip the dot.
          %live = arith.cmpi ult, %i, %rows : index
          %vis2 = arith.andi %vis, %live : i1
          %s = scf.if %vis2 -> (f32) {
            %qb = arith.muli %r, %hd : index
            %kb = arith.muli %j, %pitch : index
            // Four partial sums (d = 0, 1, 2, 3 mod 4; head_dim % 4 == 0), the lanes of
            // a vector<4xf32> accumulator, added pairwise: four independent fma chains.
            %hd4 = arith.divui %hd, %c4 : index
            %hd4e = arith.muli %hd4, %c4 : index
            %dot4 = scf.for %d = %c0 to %hd4e step %c4 iter_args(%a4 = %zero4) -> (vector<4xf32>) {
              %qi0 = arith.addi %qb, %d : index
              %ki0 = arith.addi %kb, %d : index
              %qx0 = memref.load %qs[%qi0] : memref<1024xf32, #gpu.address_space<workgroup>>
              %kx0 = memref.load %ks[%ki0] : memref<4128xf32, #gpu.address_space<workgroup>>
              %qv0 = vector.insert %qx0, %zero4 [0] : f32 into vector<4xf32>
              %kv0 = vector.insert %kx0, %zero4 [0] : f32 into vector<4xf32>
              %du1 = arith.addi %d, %c1 : index
              %qi1 = arith.addi %qb, %du1 : index
              %ki1 = arith.addi %kb, %du1 : index
              %qx1 = memref.load %qs[%qi1] : memref<1024xf32, #gpu.address_space<workgroup>>
              %kx1 = memref.load %ks[%ki1] : memref<4128xf32, #gpu.address_space<workgroup>>
              %qv1 = vector.insert %qx1, %qv0 [1] : f32 into vector<4xf32>
              %kv1 = vector.insert %kx1, %kv0 [1] : f32 into vector<4xf32>
              %du2 = arith.addi %d, %c2 : index
              %qi2 = arith.addi %qb, %du2 : index
              %ki2 = arith.addi %kb, %du2 : index
              %qx2 = memref.load %qs[%qi2] : memref<1024xf32, #gpu.address_space<workgroup>>
              %kx2 = memref.load %ks[%ki2] : memref<4128xf32, #gpu.address_space<workgroup>>
              %qv2 = vector.insert %qx2, %qv1 [2] : f32 into vector<4xf32>
              %kv2 = vector.insert %kx2, %kv1 [2] : f32 into vector<4xf32>
              %du3 = arith.addi %d, %c3 : index
              %qi3 = arith.addi %qb, %du3 : index
              %ki3 = arith.addi %kb, %du3 : index
              %qx3 = memref.load %qs[%qi3] : memref<1024xf32, #gpu.address_space<workgroup>>
              %kx3 = memref.load %ks[%ki3] : memref<4128xf32, #gpu.address_space<workgroup>>
              %qv3 = vector.insert %qx3, %qv2 [3] : f32 into vector<4xf32>
              %kv3 = vector.insert %kx3, %kv2 [3] : f32 into vector<4xf32>
              %b4 = vector.fma %qv3, %kv3, %a4 : vector<4xf32>
              scf.yield %b4 : vector<4xf32>
            }
            %dl0 = vector.extract %dot4[0] : f32 from vector<4xf32>
            %dl1 = vector.extract %dot4[1] : f32 from vector<4xf32>
            %dl2 = vector.extract %dot4[2] : f32 from vector<4xf32>
            %dl3 = vector.extract %dot4[3] : f32 from vector<4xf32>
            %s01 = arith.addf %dl0, %dl1 : f32
            %s23 = arith.addf %dl2, %dl3 : f32
            %s0123 = arith.addf %s01, %s23 : f32
            scf.yield %s0123 : f32
          } else {
            scf.yield %ninf : f32
          }
          memref.store %s, %ss[%pr] : memref<256xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier

        // Online softmax, one thread per row: m_new = max(m, max_j S), P = exp(S - m_new)
        // (0 where S = -inf), l = l * alpha + sum_j P, alpha = exp(m - m_new) (0 while
        // m = -inf). P overwrites S.
        scf.if %is_stat {
          %r = arith.addi %tid, %c0 : index
          %li = arith.addi %r, %c8 : index
          %ai = arith.addi %r, %c16 : index
          %sb = arith.muli %r, %c32 : index
          %m_old = memref.load %stat[%r] : memref<24xf32, #gpu.address_space<workgroup>>
          %l_old = memref.load %stat[%li] : memref<24xf32, #gpu.address_space<workgroup>>
          // Both loops over the row's 32 scores four at a time (four independent chains).
          %mx4:4 = scf.for %j = %c0 to %c32 step %c4 iter_args(%m0 = %m_old, %m1 = %m_old, %m2 = %m_old, %m3 = %m_old) -> (f32, f32, f32, f32) {
            %si0 = arith.addi %sb, %j : index
            %s0 = memref.load %ss[%si0] : memref<256xf32, #gpu.address_space<workgroup>>
            %n0 = arith.maximumf %m0, %s0 : f32
            %jm1 = arith.addi %j, %c1 : index
            %si1 = arith.addi %sb, %jm1 : index
            %s1 = memref.load %ss[%si1] : memref<256xf32, #gpu.address_space<workgroup>>
            %n1 = arith.maximumf %m1, %s1 : f32
            %jm2 = arith.addi %j, %c2 : index
            %si2 = arith.addi %sb, %jm2 : index
            %s2 = memref.load %ss[%si2] : memref<256xf32, #gpu.address_space<workgroup>>
            %n2 = arith.maximumf %m2, %s2 : f32
            %jm3 = arith.addi %j, %c3 : index
            %si3 = arith.addi %sb, %jm3 : index
            %s3 = memref.load %ss[%si3] : memref<256xf32, #gpu.address_space<workgroup>>
            %n3 = arith.maximumf %m3, %s3 : f32
            scf.yield %n0, %n1, %n2, %n3 : f32, f32, f32, f32
          }
          %mx01 = arith.maximumf %mx4#0, %mx4#1 : f32
          %mx23 = arith.maximumf %mx4#2, %mx4#3 : f32
          %mx = arith.maximumf %mx01, %mx23 : f32
          %old_ninf = arith.cmpf oeq, %m_old, %ninf : f32
          %dm = arith.subf %m_old, %mx : f32
          %ea = math.exp %dm : f32
          %alpha = arith.select %old_ninf, %zero, %ea : f32
          %sum4:4 = scf.for %j = %c0 to %c32 step %c4 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (f32, f32, f32, f32) {
            %si0 = arith.addi %sb, %j : index
            %s0 = memref.load %ss[%si0] : memref<256xf32, #gpu.address_space<workgroup>>
            %masked0 = arith.cmpf oeq, %s0, %ninf : f32
            %ds0 = arith.subf %s0, %mx : f32
            %ep0 = math.exp %ds0 : f32
            %pv0 = arith.select %masked0, %zero, %ep0 : f32
            memref.store %pv0, %ss[%si0] : memref<256xf32, #gpu.address_space<workgroup>>
            %b0 = arith.addf %a0, %pv0 : f32
            %jm1 = arith.addi %j, %c1 : index
            %si1 = arith.addi %sb, %jm1 : index
            %s1 = memref.load %ss[%si1] : memref<256xf32, #gpu.address_space<workgroup>>
            %masked1 = arith.cmpf oeq, %s1, %ninf : f32
            %ds1 = arith.subf %s1, %mx : f32
            %ep1 = math.exp %ds1 : f32
            %pv1 = arith.select %masked1, %zero, %ep1 : f32
            memref.store %pv1, %ss[%si1] : memref<256xf32, #gpu.address_space<workgroup>>
            %b1 = arith.addf %a1, %pv1 : f32
            %jm2 = arith.addi %j, %c2 : index
            %si2 = arith.addi %sb, %jm2 : index
            %s2 = memref.load %ss[%si2] : memref<256xf32, #gpu.address_space<workgroup>>
            %masked2 = arith.cmpf oeq, %s2, %ninf : f32
            %ds2 = arith.subf %s2, %mx : f32
            %ep2 = math.exp %ds2 : f32
            %pv2 = arith.select %masked2, %zero, %ep2 : f32
            memref.store %pv2, %ss[%si2] : memref<256xf32, #gpu.address_space<workgroup>>
            %b2 = arith.addf %a2, %pv2 : f32
            %jm3 = arith.addi %j, %c3 : index
            %si3 = arith.addi %sb, %jm3 : index
            %s3 = memref.load %ss[%si3] : memref<256xf32, #gpu.address_space<workgroup>>
            %masked3 = arith.cmpf oeq, %s3, %ninf : f32
            %ds3 = arith.subf %s3, %mx : f32
            %ep3 = math.exp %ds3 : f32
            %pv3 = arith.select %masked3, %zero, %ep3 : f32
            memref.store %pv3, %ss[%si3] : memref<256xf32, #gpu.address_space<workgroup>>
            %b3 = arith.addf %a3, %pv3 : f32
            scf.yield %b0, %b1, %b2, %b3 : f32, f32, f32, f32
          }
          %sum01 = arith.addf %sum4#0, %sum4#1 : f32
          %sum23 = arith.addf %sum4#2, %sum4#3 : f32
          %sum = arith.addf %sum01, %sum23 : f32
          %l_sc = arith.mulf %l_old, %alpha : f32
          %l_new = arith.addf %l_sc, %sum : f32
          memref.store %mx, %stat[%r] : memref<24xf32, #gpu.address_space<workgroup>>
          memref.store %l_new, %stat[%li] : memref<24xf32, #gpu.address_space<workgroup>>
          memref.store %alpha, %stat[%ai] : memref<24xf32, #gpu.address_space<workgroup>>
        }
        gpu.barrier

        // O[r][d] = alpha_r O[r][d] + sum_j P[r][j] V[j][d] for live rows; each thread
        // owns the elements tid, tid + 128, ... of the 8 x head_dim tile for the whole
        // kernel (a row is uniform over 32 consecutive threads when head_dim % 32 == 0).
        scf.for %e = %tid to %n_q step %c128 {
          %r_x32 = arith.index_cast %e : index to i32
          %r_q32 = arith.divui %r_x32, %hd32 : i32
          %r = arith.index_cast %r_q32 : i32 to index
          %d_x32 = arith.index_cast %e : index to i32
          %d_q32 = arith.remui %d_x32, %hd32 : i32
          %d = arith.index_cast %d_q32 : i32 to index
          %i = arith.addi %row0, %r : index
          %live = arith.cmpi ult, %i, %rows : index
          scf.if %live {
            %ai = arith.addi %r, %c16 : index
            %alpha = memref.load %stat[%ai] : memref<24xf32, #gpu.address_space<workgroup>>
            %o_old = memref.load %os[%e] : memref<1024xf32, #gpu.address_space<workgroup>>
            %o_sc = arith.mulf %o_old, %alpha : f32
            %sb = arith.muli %r, %c32 : index
            // Four partial sums over the 32 keys (j = 0, 1, 2, 3 mod 4), added pairwise
            // to the rescaled O: four independent fma chains.
            %pv:4 = scf.for %j = %c0 to %c32 step %c4 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (f32, f32, f32, f32) {
              %si0 = arith.addi %sb, %j : index
              %pj0 = memref.load %ss[%si0] : memref<256xf32, #gpu.address_space<workgroup>>
              %vr0 = arith.muli %j, %hd : index
              %vi0 = arith.addi %vr0, %d : index
              %vx0 = memref.load %vs[%vi0] : memref<4096xf32, #gpu.address_space<workgroup>>
              %b0 = math.fma %pj0, %vx0, %a0 : f32
              %ju1 = arith.addi %j, %c1 : index
              %si1 = arith.addi %sb, %ju1 : index
              %pj1 = memref.load %ss[%si1] : memref<256xf32, #gpu.address_space<workgroup>>
              %vr1 = arith.muli %ju1, %hd : index
              %vi1 = arith.addi %vr1, %d : index
              %vx1 = memref.load %vs[%vi1] : memref<4096xf32, #gpu.address_space<workgroup>>
              %b1 = math.fma %pj1, %vx1, %a1 : f32
              %ju2 = arith.addi %j, %c2 : index
              %si2 = arith.addi %sb, %ju2 : index
              %pj2 = memref.load %ss[%si2] : memref<256xf32, #gpu.address_space<workgroup>>
              %vr2 = arith.muli %ju2, %hd : index
              %vi2 = arith.addi %vr2, %d : index
              %vx2 = memref.load %vs[%vi2] : memref<4096xf32, #gpu.address_space<workgroup>>
              %b2 = math.fma %pj2, %vx2, %a2 : f32
              %ju3 = arith.addi %j, %c3 : index
              %si3 = arith.addi %sb, %ju3 : index
              %pj3 = memref.load %ss[%si3] : memref<256xf32, #gpu.address_space<workgroup>>
              %vr3 = arith.muli %ju3, %hd : index
              %vi3 = arith.addi %vr3, %d : index
              %vx3 = memref.load %vs[%vi3] : memref<4096xf32, #gpu.address_space<workgroup>>
              %b3 = math.fma %pj3, %vx3, %a3 : f32
              scf.yield %b0, %b1, %b2, %b3 : f32, f32, f32, f32
            }
            %p01 = arith.addf %pv#0, %pv#1 : f32
            %p23 = arith.addf %pv#2, %pv#3 : f32
            %p0123 = arith.addf %p01, %p23 : f32
            %o_new = arith.addf %o_sc, %p0123 : f32
            memref.store %o_new, %os[%e] : memref<1024xf32, #gpu.address_space<workgroup>>
          }
        }
        // The next tile overwrites K, V and S.
        gpu.barrier
      }

      // Epilogue: O / l to out (one split) or to o_part with lse_part (split-K).
      %single = arith.cmpi eq, %n_split, %c1 : index
      %sT = arith.muli %split, %Ti : index
      scf.for %e = %tid to %n_q step %c128 {
        %r_x32 = arith.index_cast %e : index to i32
        %r_q32 = arith.divui %r_x32, %hd32 : i32
        %r = arith.index_cast %r_q32 : i32 to index
        %d_x32 = arith.index_cast %e : index to i32
        %d_q32 = arith.remui %d_x32, %hd32 : i32
        %d = arith.index_cast %d_q32 : i32 to index
        %i = arith.addi %row0, %r : index
        %live = arith.cmpi ult, %i, %rows : index
        scf.if %live {
          %t_x32 = arith.index_cast %i : index to i32
          %t_q32 = arith.divui %t_x32, %G32 : i32
          %t = arith.index_cast %t_q32 : i32 to index
          %g_x32 = arith.index_cast %i : index to i32
          %g_q32 = arith.remui %g_x32, %G32 : i32
          %g = arith.index_cast %g_q32 : i32 to index
          %h = arith.addi %h0, %g : index
          %li = arith.addi %r, %c8 : index
          %l = memref.load %stat[%li] : memref<24xf32, #gpu.address_space<workgroup>>
          %o = memref.load %os[%e] : memref<1024xf32, #gpu.address_space<workgroup>>
          %lpos = arith.cmpf ogt, %l, %zero : f32
          %on = arith.divf %o, %l : f32
          %val = arith.select %lpos, %on, %zero : f32
          scf.if %single {
            %x0 = arith.muli %t, %nh : index
            %x1 = arith.addi %x0, %h : index
            %x2 = arith.muli %x1, %hd : index
            %x3 = arith.addi %x2, %d : index
            memref.store %val, %out[%x3] : memref<?xf32>
          } else {
            %y0 = arith.addi %sT, %t : index
            %y1 = arith.muli %y0, %nh : index
            %y2 = arith.addi %y1, %h : index
            %y3 = arith.muli %y2, %hd : index
            %y4 = arith.addi %y3, %d : index
            memref.store %val, %o_part[%y4] : memref<?xf32>
          }
        }
      }
      %not_single = arith.cmpi ne, %n_split, %c1 : index
      %write_lse = arith.andi %not_single, %is_stat : i1
      scf.if %write_lse {
        %i = arith.addi %row0, %tid : index
        %live = arith.cmpi ult, %i, %rows : index
        scf.if %live {
          %t_x32 = arith.index_cast %i : index to i32
          %t_q32 = arith.divui %t_x32, %G32 : i32
          %t = arith.index_cast %t_q32 : i32 to index
          %g_x32 = arith.index_cast %i : index to i32
          %g_q32 = arith.remui %g_x32, %G32 : i32
          %g = arith.index_cast %g_q32 : i32 to index
          %h = arith.addi %h0, %g : index
          %li = arith.addi %tid, %c8 : index
          %m = memref.load %stat[%tid] : memref<24xf32, #gpu.address_space<workgroup>>
          %l = memref.load %stat[%li] : memref<24xf32, #gpu.address_space<workgroup>>
          %lpos = arith.cmpf ogt, %l, %zero : f32
          %ll = math.log %l : f32
          %lse0 = arith.addf %m, %ll : f32
          %lse = arith.select %lpos, %lse0, %ninf : f32
          %y0 = arith.addi %sT, %t : index
          %y1 = arith.muli %y0, %nh : index
          %y2 = arith.addi %y1, %h : index
          memref.store %lse, %lse_part[%y2] : memref<?xf32>
        }
      }
      gpu.return
    }

    // ------------------------------------------------------ split-K reduction
    gpu.func @attention_split_reduce(%o_part: memref<?xf32>, %lse_part: memref<?xf32>,
                                     %out: memref<?xf32>, %n_split: i32, %head_dim: i32) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>,
                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>,
                    swz.grid = "T, n_head, 1"} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %t = gpu.block_id x
      %h = gpu.block_id y
      %Ti = gpu.grid_dim x
      %nh = gpu.grid_dim y
      %tid = gpu.thread_id x
      %hd = arith.index_cast %head_dim : i32 to index
      %ns = arith.index_cast %n_split : i32 to index
      // lse_part[s, t, h] at (s * T + t) * n_head + h; stride between splits T * n_head.
      %x0 = arith.muli %t, %nh : index
      %base = arith.addi %x0, %h : index
      %sstride = arith.muli %Ti, %nh : index
      %mx = scf.for %s = %c0 to %ns step %c1 iter_args(%m = %ninf) -> (f32) {
        %a0 = arith.muli %s, %sstride : index
        %a1 = arith.addi %a0, %base : index
        %x = memref.load %lse_part[%a1] : memref<?xf32>
        %m2 = arith.maximumf %m, %x : f32
        scf.yield %m2 : f32
      }
      %den = scf.for %s = %c0 to %ns step %c1 iter_args(%acc = %zero) -> (f32) {
        %a0 = arith.muli %s, %sstride : index
        %a1 = arith.addi %a0, %base : index
        %x = memref.load %lse_part[%a1] : memref<?xf32>
        %dx = arith.subf %x, %mx : f32
        %w = math.exp %dx : f32
        %acc2 = arith.addf %acc, %w : f32
        scf.yield %acc2 : f32
      }
      scf.for %d = %tid to %hd step %c64 {
        %num = scf.for %s = %c0 to %ns step %c1 iter_args(%acc = %zero) -> (f32) {
          %a0 = arith.muli %s, %sstride : index
          %a1 = arith.addi %a0, %base : index
          %x = memref.load %lse_part[%a1] : memref<?xf32>
          %dx = arith.subf %x, %mx : f32
          %w = math.exp %dx : f32
          %o0 = arith.muli %a1, %hd : index
          %o1 = arith.addi %o0, %d : index
          %o = memref.load %o_part[%o1] : memref<?xf32>
          %acc2 = math.fma %w, %o, %acc : f32
          scf.yield %acc2 : f32
        }
        %y = arith.divf %num, %den : f32
        %b0 = arith.muli %base, %hd : index
        %b1 = arith.addi %b0, %d : index
        memref.store %y, %out[%b1] : memref<?xf32>
      }
      gpu.return
    }
  }
}
