// Split-K ("flash decoding") paged attention for the decode rows of every sequence of a
// pass in one launch, PTX only, head_dim 128: per sequence, the attention of
// attention_f16kv.mlir's flash_attention_f16kv (see that file for the KV layout and the
// partials), with the work laid out for a few query rows instead of a tile of 32 keys in
// workgroup memory, and the splits merged in the same launch.
//
// The kernel is generated: swizzlec applies the target's schedule to this tile spec
// (swz-apply-schedule: compiler/schedules/<target>.json, "attention"."decode": warps,
// keys_in_flight, min_ctas_per_sm) and swz-lower-tiles writes it into this gpu.module
// with its workgroup globals (compiler/mlir/LowerAttentionDecode.cpp; Passes.td,
// SwzLowerTiles, describes the kernel). To see it:
//   swizzle-opt codegen/kernels/attention_decode.mlir \
//     -swz-apply-schedule=schedule=compiler/schedules/sm_80.json -swz-lower-tiles
//
// flash_decode_f16kv_hd128(q, k_cache, v_cache, block_table, out, o_part, lse_part, count,
//   seqs, T, seq_tiles, n_head, head_dim, max_splits, scale):
//   grid (n_seq * seq_tiles, n_head_kv, n_split), block 32 x warps (the shipped sm_*
//   schedules: 8 warps, 256 threads).
//   q, out: [T, n_head * head_dim] f32, the rows of all n_seq sequences; seqs: [n_seq, 4]
//   i32, sequence s's {first row r0, rows Ts, first position p0, offset of its block
//   table in block_table}: its rows are r0..r0+Ts-1 at positions p0..p0+Ts-1, each
//   seeing the keys up to its own position. seq_tiles >= ceil(max Ts * G / 8); n_split
//   >= every sequence's split count. Sequence s splits its ctx = p0 + Ts keys as it
//   would alone: nsm = min(ceil(ctx / 32), max_splits), split_len = ceil(ctx / (nsm 32))
//   32, ceil(ctx / split_len) splits (compiler/driver/launch_bindings.cpp splitLet);
//   workgroups past its splits or rows do nothing. Workgroup (seq * seq_tiles + tile,
//   kvh, s) owns 8 query rows i = t * G + g of sequence seq, one KV head (h = kvh * G +
//   g), and the keys [s split_len, min((s + 1) split_len, ctx)) of split s. Warp w
//   takes keys lo + w, lo + w + warps, ...; lane l holds features 4l..4l+3 of each row's
//   q (scaled) and of the key's K and V rows (f16, read straight from the paged cache,
//   keys_in_flight keys' loads in flight a warp: 4 shipped). Per keys_in_flight keys,
//   every (key, row) score is a butterfly sum over the 32 lanes, all without branches
//   (independent chains the scheduler interleaves; -inf for a pair the row must not see:
//   j > p0 + t, a key past the split, a row past the batch), then each row's online
//   softmax (running max m, sum l, output acc; Milakov & Gimelshein 2018) takes them in
//   one rescale. The warps' (m, l, acc) meet in workgroup memory and thread t combines
//   feature t % 128 of the rows of group t / 128.
//   With one split it writes out; with more, each split writes o_part / lse_part as
//   flash_attention_f16kv does ([n_split, T, n_head] over the batch's T rows), and the
//   split that finishes last (an atomic count per row tile and KV head in `count`, [T *
//   n_head] i32, zero before the launch and zero again after it) merges them into out as
//   attention_split_reduce would: no second launch. Requires head_dim == 128.
module {
  gpu.module @swz_attention_decode {
    swz.attention_tile @flash_decode_f16kv_hd128 : f16 head_dim(128) {decode}
  }
}
