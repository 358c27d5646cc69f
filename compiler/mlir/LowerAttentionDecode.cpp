//===- LowerAttentionDecode.cpp - swz-lower-tiles: the split-K decode attention ===//
//
// The kernel of a scheduled `swz.attention_tile ... {decode}`: split-K ("flash decoding")
// paged attention for the decode rows of every sequence of a pass in one launch, PTX
// only, head_dim 128, built op by op from the schedule's attention.decode fields.
//
//   * Workgroup (seq * seq_tiles + tile, kvh, s) owns `rows` (block_q) query rows
//     i = t * G + g of sequence seq, one KV head (h = kvh * G + g), and the keys
//     [s split_len, min((s + 1) split_len, ctx)) of split s; each sequence splits its
//     context as it would alone (compiler/driver/launch_bindings.cpp splitLet, split
//     lengths a multiple of block_kv = 32 keys, at most max_splits splits);
//   * warp w takes keys lo + w, lo + w + warps, ...; lane l holds features 4l..4l+3 of
//     each row's q (times scale) and of the key's K and V rows (f16, read straight from
//     the paged cache, keys_in_flight keys' loads in flight a warp);
//   * per keys_in_flight keys, every (key, row) score is a butterfly sum over the 32
//     lanes, all without branches (-inf for a pair the row must not see), then each row's
//     online softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for
//     softmax") takes the keys in one rescale;
//   * the warps' (m, l, acc) meet in workgroup memory (@dec_m, @dec_l, @dec_o) and thread
//     t combines feature t % 128 of the rows of group t / 128;
//   * with one split it writes out; with more, each split writes o_part / lse_part and the
//     split that finishes last (an atomic count per row tile and KV head) merges them
//     into out, as attention_split_reduce would, in the same launch.
// The workgroup memory is read and written by scalar loads and stores only (no ldmatrix
// or cp.async tile), so swz-check-bank-conflicts has nothing to prove here.
//
// This is a port, op for op in the same order, of the generator that used to write
// codegen/kernels/attention_decode.mlir as text (gen_quant_kernels.py, flash_decode), so
// the kernel and its PTX are the ones that file held.
//
//===----------------------------------------------------------------------===//
#include "compiler/mlir/KernelEmitter.h"
#include "compiler/mlir/LowerAttention.h"
#include "compiler/mlir/Schedule.h"

#include "Swz/SwzDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace mlir;

namespace swz {
namespace {

/// Keys of one KV-cache page (runtime/ paged KV cache; one block-table entry a page).
constexpr int64_t kPage = 64;
/// head_dim the kernel serves: 32 lanes x 4 features.
constexpr int64_t kHeadDim = 128;
/// Query rows a workgroup owns and the split-length unit, as the driver's launch records
/// assume them (Schedule.h).
constexpr int64_t kRows = schedule::kDecodeRows, kSplitUnit = schedule::kDecodeSplitUnit;
/// Static shared memory a CUDA block may declare.
using schedule::kStaticSmemBytes;

/// The kernel's geometry from the scheduled op.
struct DecodeGeometry {
  int64_t rows = 0, splitUnit = 0, warps = 0, unroll = 0, minCtas = 0;
};

FailureOr<DecodeGeometry> decodeGeometry(AttentionTileOp op) {
  const std::string at = "swz-lower-tiles: the decode attention @" + op.getSymName().str();
  if (!op.isScheduled())
    return op.emitError() << at << " has no schedule (run swz-apply-schedule first)";
  DecodeGeometry g;
  g.rows = *op.getBlockQ();
  g.splitUnit = *op.getBlockKv();
  g.warps = *op.getWarps();
  g.unroll = op.getKeysInFlight().value_or(0);
  g.minCtas = op.getMinCtasPerSm().value_or(0);
  if (!op.getElementType().isF16())
    return op.emitError() << at << " reads an f16 KV cache; the tile has "
                          << op.getElementType() << " elements";
  if (op.getHeadDim() != kHeadDim)
    return op.emitError() << at << ": head_dim must be " << kHeadDim
                          << " (32 lanes x 4 features), got " << op.getHeadDim();
  if (g.rows != kRows || g.splitUnit != kSplitUnit)
    return op.emitError() << at << ": block(rows, split unit) must be (" << kRows << ", "
                          << kSplitUnit << "), the driver's launch rule (launch_bindings.cpp "
                          << "seq_tiles and kDecodeMinSplit), got (" << g.rows << ", "
                          << g.splitUnit << ")";
  // The combine: thread t takes feature t % 128 of the rows of group t / 128, so the
  // warps make whole groups of 128 threads and the groups divide the rows.
  if (g.warps % 4 != 0 || (g.rows * 4) % g.warps != 0)
    return op.emitError() << at << ": attention.decode.warps must be a multiple of 4 whose "
                          << "groups of 128 threads divide the " << g.rows << " rows, got "
                          << g.warps;
  if (g.unroll < 1 || g.unroll > 16)
    return op.emitError() << at << ": attention.decode.keys_in_flight must be in [1, 16], got "
                          << g.unroll;
  const int64_t smem = g.warps * g.rows * (kHeadDim + 2) * 4 + 4;
  if (smem > kStaticSmemBytes)
    return op.emitError() << at << ": " << g.warps << " warps' states need " << smem
                          << " bytes of workgroup memory, more than the " << kStaticSmemBytes
                          << " a block may declare statically";
  return g;
}

using Em = KernelEmitter;

/// Writes the kernel of `op` (geometry `g`) at `b`'s insertion point in a gpu.module: the
/// four workgroup globals, then `gpu.func @<name>`.
void emitDecodeKernel(AttentionTileOp op, const DecodeGeometry &g, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  const int64_t R = g.rows, W = g.warps, U = g.unroll, HD = kHeadDim;
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto wgType = [&](int64_t n, Type t) {
    return MemRefType::get({n}, t, MemRefLayoutAttrInterface{}, wg);
  };
  // 16-byte aligned: the NVPTX backend merges a thread's four consecutive f32 stores into
  // dec_o into one st.shared.v4 (misaligned, and a launch failure, at align 4).
  const MemRefType smType = wgType(W * R, f32), soType = wgType(W * R * HD, f32),
                   lastType = wgType(1, i32);
  using Global = std::pair<const char *, MemRefType>;
  for (auto [name, type] : {Global{"dec_o", soType}, Global{"dec_m", smType},
                            Global{"dec_l", smType}, Global{"dec_last", lastType}})
    b.create<memref::GlobalOp>(loc, name, b.getStringAttr("private"), type, Attribute{}, false,
                               b.getI64IntegerAttr(16));

  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  auto fnType = b.getFunctionType({dyn(f32), dyn(f16), dyn(f16), dyn(i32), dyn(f32), dyn(f32),
                                   dyn(f32), dyn(i32), dyn(i32), i32, i32, i32, i32, i32, f32},
                                  {});
  auto fn = createKernel(b, loc, op.getSymName(), fnType, int32_t(32 * W),
                         "n_seq*seq_tiles, n_head_kv, n_split", g.minCtas);

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  using IP = arith::CmpIPredicate;
  using FP = arith::CmpFPredicate;
  Value q = entry.getArgument(0), kCache = entry.getArgument(1), vCache = entry.getArgument(2),
        blockTable = entry.getArgument(3), out = entry.getArgument(4),
        oPart = entry.getArgument(5), lsePart = entry.getArgument(6),
        count = entry.getArgument(7), seqs = entry.getArgument(8), argT = entry.getArgument(9),
        argSeqTiles = entry.getArgument(10), argNHead = entry.getArgument(11),
        argMaxSplits = entry.getArgument(13), scale = entry.getArgument(14);

  Value ninf = e.cf(-std::numeric_limits<float>::infinity());
  Value zero = e.cf(0.0f);
  Value ms = b.create<memref::GetGlobalOp>(loc, smType, "dec_m");
  Value ls = b.create<memref::GetGlobalOp>(loc, smType, "dec_l");
  Value os = b.create<memref::GetGlobalOp>(loc, soType, "dec_o");
  Value lastf = b.create<memref::GetGlobalOp>(loc, lastType, "dec_last");
  Value wx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value kvh = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value split = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::z);
  Value nKv = b.create<gpu::GridDimOp>(loc, gpu::Dimension::y);
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value warp = e.divu(tid, c(32));
  Value lane = e.remu(tid, c(32));
  // Workgroup x = seq * seq_tiles + tile: row tile `tile` of sequence `seq`, whose record
  // seqs[4 seq ..] is {first row R0 of the batch, rows Ti, first position P0, block table
  // offset TB}.
  Value ST = e.toIndex(argSeqTiles);
  Value seq = e.divu(wx, ST);
  Value tile = e.remu(wx, ST);
  Value sb = e.mul(seq, c(4));
  std::array<Value, 4> rec;
  for (int64_t k = 0; k < 4; ++k)
    rec[k] = e.toIndex(e.load(seqs, e.plus(sb, k)));
  auto [R0, Ti, P0, TB] = rec;
  Value TT = e.toIndex(argT);
  Value NH = e.toIndex(argNHead);
  Value G = e.divu(NH, nKv);
  Value rowsV = e.mul(Ti, G);
  Value ctxV = e.add(P0, Ti);
  // The sequence's own split (splitLet over its context): at most max_splits splits of a
  // multiple of the split unit, then only those that hold keys. Workgroups past them, or
  // past its rows, idle.
  const int64_t SU = g.splitUnit;
  Value MS = e.toIndex(argMaxSplits);
  Value nsm = e.minu(e.ceilDiv(ctxV, c(SU)), MS);
  Value SL = e.mul(e.ceilDiv(ctxV, e.mul(nsm, c(SU))), c(SU));
  Value nSplit = e.ceilDiv(ctxV, SL);
  Value rowIn = e.cmp(IP::ult, e.mul(tile, c(R)), rowsV);
  Value splitIn = e.cmp(IP::ult, split, nSplit);
  Value active = e.andi(rowIn, splitIn);
  emitIf(e, active, [&] {
    Value lo = e.mul(split, SL);
    Value loSl = e.add(lo, SL);
    Value hi = e.minu(loSl, ctxV);
    Value d0 = e.mul(lane, c(4));
    // Per row r: validity, causal limit (key j visible iff j <= lim), output row base, q.
    std::vector<Value> valid, lim, obase;
    std::vector<std::array<Value, 4>> qv;
    for (int64_t r = 0; r < R; ++r) {
      Value i = e.add(e.mul(tile, c(R)), c(r));
      Value ok = e.cmp(IP::ult, i, rowsV);
      Value ic = e.select(ok, i, c(0));
      Value t = e.divu(ic, G);
      Value gg = e.remu(ic, G);
      Value h = e.add(e.mul(kvh, G), gg);
      Value ob = e.mul(e.add(e.mul(e.add(R0, t), NH), h), c(HD));
      valid.push_back(ok);
      lim.push_back(e.add(P0, t));
      obase.push_back(ob);
      Value qb = e.add(ob, d0);
      std::array<Value, 4> qr;
      for (int64_t k = 0; k < 4; ++k)
        qr[k] = e.fmul(e.load(q, e.plus(qb, k)), scale);
      qv.push_back(qr);
    }
    // Keys of this warp: lo + warp + W * (U * it + u); iterations ceil((hi - lo - warp) / (W U)).
    Value start = e.add(lo, warp);
    Value has = e.cmp(IP::ugt, hi, start);
    Value rem = e.sub(hi, start);
    Value remc = e.select(has, rem, c(0));
    Value nit = e.divu(e.add(remc, c(W * U - 1)), c(W * U));
    // State: m[r], l[r], acc[r][k].
    SmallVector<Value> init;
    init.append(R, ninf);
    init.append(R, zero);
    init.append(4 * R, zero);
    auto loop = b.create<scf::ForOp>(loc, c(0), nit, c(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value it = loop.getInductionVar();
      SmallVector<Value> cur(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
      struct Key {
        Value j, inr;
        std::array<Value, 4> k, v;
      };
      std::vector<Key> keys;
      for (int64_t u = 0; u < U; ++u) { // every load first: U keys' K and V rows in flight
        Key key;
        key.j = e.add(start, e.mul(e.add(e.mul(it, c(U)), c(u)), c(W)));
        key.inr = e.cmp(IP::ult, key.j, hi);
        Value jc = e.select(key.inr, key.j, start); // a valid key (its scores are not used)
        Value pg = e.add(TB, e.divu(jc, c(kPage)));
        Value page = e.toIndex(e.load(blockTable, pg));
        Value slot = e.remu(jc, c(kPage));
        // ((page n_kv + kvh) 64 + slot) 128 + 4 lane: [page][n_head_kv][64][128] f16.
        Value row = e.add(e.mul(e.add(e.mul(page, nKv), kvh), c(kPage)), slot);
        Value kb = e.add(e.mul(row, c(HD)), d0);
        for (int64_t k = 0; k < 4; ++k)
          key.k[k] = b.create<arith::ExtFOp>(loc, f32, e.load(kCache, e.plus(kb, k)));
        for (int64_t k = 0; k < 4; ++k)
          key.v[k] = b.create<arith::ExtFOp>(loc, f32, e.load(vCache, e.plus(kb, k)));
        keys.push_back(key);
      }
      // Scores first, every (key, row) pair at once: no branch between them, so the rows'
      // and keys' butterfly sums are independent chains the scheduler interleaves. A pair
      // the row must not see (a row past the batch, a key past the split, a later
      // position) scores -inf.
      std::vector<std::vector<Value>> sc(U, std::vector<Value>(R)), vis(U, std::vector<Value>(R));
      for (int64_t u = 0; u < U; ++u)
        for (int64_t r = 0; r < R; ++r) {
          Value le = e.cmp(IP::ule, keys[u].j, lim[r]);
          vis[u][r] = e.andi(e.andi(valid[r], keys[u].inr), le);
          Value part = e.fmul(qv[r][0], keys[u].k[0]);
          for (int64_t k = 1; k < 4; ++k)
            part = e.fma(qv[r][k], keys[u].k[k], part);
          for (int64_t off : {16, 8, 4, 2, 1}) {
            Value sh = b.create<gpu::ShuffleOp>(loc, f32, b.getI1Type(), part, e.ci(off),
                                                e.ci(32), gpu::ShuffleMode::XOR)
                           .getShuffleResult();
            part = e.fadd(part, sh);
          }
          sc[u][r] = part;
        }
      // Each row's online softmax over the U keys in one step: the new max over the
      // running one and the visible scores, the running sum and output rescaled once (by
      // 1 when the max stays, also when nothing was visible yet), the keys added in order.
      Value one = e.cf(1.0f);
      for (int64_t r = 0; r < R; ++r) {
        Value m = cur[r], l = cur[R + r];
        Value mx = m;
        for (int64_t u = 0; u < U; ++u)
          mx = e.maxf(mx, e.select(vis[u][r], sc[u][r], ninf));
        Value same = e.cmpf(FP::OEQ, mx, m);
        Value corr = e.select(same, one, e.exp(e.fsub(m, mx)));
        std::vector<Value> ps;
        for (int64_t u = 0; u < U; ++u)
          ps.push_back(e.select(vis[u][r], e.exp(e.fsub(sc[u][r], mx)), zero));
        Value psum = ps[0];
        for (int64_t u = 1; u < U; ++u)
          psum = e.fadd(psum, ps[u]);
        cur[r] = mx;
        cur[R + r] = e.fma(l, corr, psum);
        for (int64_t k = 0; k < 4; ++k) {
          Value a = e.fmul(cur[2 * R + 4 * r + k], corr);
          for (int64_t u = 0; u < U; ++u)
            // Skipped, not added as 0 * v: a key the row must not see may hold a
            // non-finite V (a position this pass writes for a later row).
            a = e.select(vis[u][r], e.fma(ps[u], keys[u].v[k], a), a);
          cur[2 * R + 4 * r + k] = a;
        }
      }
      b.create<scf::YieldOp>(loc, cur);
    }
    ValueRange st = loop.getResults();
    // The warps' states meet in workgroup memory: m, l at [warp * R + r], acc at
    // [(warp * R + r) * 128 + d].
    Value lane0 = e.cmp(IP::eq, lane, c(0));
    for (int64_t r = 0; r < R; ++r) {
      Value wr = e.add(e.mul(warp, c(R)), c(r));
      emitIf(e, lane0, [&] {
        e.store(st[r], ms, wr);
        e.store(st[R + r], ls, wr);
      });
      Value ob = e.add(e.mul(wr, c(HD)), d0);
      for (int64_t k = 0; k < 4; ++k)
        e.store(st[2 * R + 4 * r + k], os, e.plus(ob, k));
    }
    b.create<gpu::BarrierOp>(loc);
    // Thread d combines feature d of each row: M = max_w m_w, L = sum_w l_w e^(m_w - M),
    // O = sum_w o_w e^(m_w - M); one split: out = O / L; else o_part = O / L (0 with no
    // visible key) and lse_part = M + log L (-inf), as flash_attention_f16kv writes them.
    Value oneSplit = e.cmp(IP::eq, nSplit, c(1));
    // With more than 128 threads, thread t combines feature t % 128 of the rows of group
    // t / 128 (R / (W / 4) rows a group).
    Value dd = e.remu(tid, c(HD));
    Value grp = e.divu(tid, c(HD));
    Value dIs0 = e.cmp(IP::eq, dd, c(0));
    Value tIs0 = e.cmp(IP::eq, tid, c(0));
    const int64_t rowsPerGrp = R * 4 / W;
    std::vector<Value> mine;
    for (int64_t r = 0; r < R; ++r)
      mine.push_back(e.andi(valid[r], e.cmp(IP::eq, grp, c(r / rowsPerGrp))));
    for (int64_t r = 0; r < R; ++r)
      emitIf(e, mine[r], [&] {
        std::vector<Value> mw;
        for (int64_t w = 0; w < W; ++w)
          mw.push_back(e.load(ms, c(w * R + r)));
        Value M = mw[0];
        for (int64_t w = 1; w < W; ++w)
          M = e.maxf(M, mw[w]);
        Value any = e.cmpf(FP::OGT, M, ninf);
        Value Ms = e.select(any, M, zero); // no visible key: l = o = 0
        Value L = zero, O = zero;
        for (int64_t w = 0; w < W; ++w) {
          Value f = e.exp(e.fsub(mw[w], Ms));
          Value lw = e.load(ls, c(w * R + r));
          Value ow = e.load(os, e.add(c((w * R + r) * HD), dd));
          L = e.fma(lw, f, L);
          O = e.fma(ow, f, O);
        }
        Value pos = e.cmpf(FP::OGT, L, zero);
        Value Lc = e.select(pos, L, e.cf(1.0f));
        Value o = e.fdiv(O, Lc);
        Value oi = e.add(obase[r], dd);
        auto ifOne = b.create<scf::IfOp>(loc, oneSplit, /*withElseRegion=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ifOne.thenBlock()->getTerminator());
        e.store(o, out, oi);
        b.setInsertionPoint(ifOne.elseBlock()->getTerminator());
        // o_part[s, t, h, :] / lse_part[s, t, h] (t a row of the batch): row
        // (s * T * n_head) + t * n_head + h.
        Value srow = e.mul(split, e.mul(TT, NH));
        Value pi = e.add(e.mul(srow, c(HD)), oi);
        e.store(o, oPart, pi);
        emitIf(e, dIs0, [&] {
          Value lse = e.select(pos, e.fadd(Ms, e.log(Lc)), ninf);
          Value li = e.add(srow, e.divu(obase[r], c(HD)));
          e.store(lse, lsePart, li);
        });
      });
    // Split-K: the workgroup that finishes its (row tile, KV head) last merges the splits
    // (attention_split_reduce's sum, in this launch): every thread fences its partials,
    // thread 0 counts the workgroup in count[tile * n_kv + kvh] (atomic add; the last one
    // resets it to 0 for the next launch), and the last workgroup, after an acquiring
    // fence, writes out[t, h, :] = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M).
    Value multi = e.cmp(IP::ugt, nSplit, c(1));
    emitIf(e, multi, [&] {
      e.ptx("fence.acq_rel.gpu;");
      b.create<gpu::BarrierOp>(loc);
      emitIf(e, tIs0, [&] {
        // The tile's count: by its first query row in the batch, R0 * G + R tile (the
        // sequences' rows are disjoint), < T * G.
        Value r0g = e.mul(R0, G);
        Value qrow = e.add(r0g, e.mul(tile, c(R)));
        Value slot = e.add(e.mul(qrow, nKv), kvh);
        Value old = b.create<memref::AtomicRMWOp>(loc, i32, arith::AtomicRMWKind::addi,
                                                  e.ci(1), count, ValueRange{slot});
        Value nsm1 = b.create<arith::IndexCastOp>(loc, i32, e.sub(nSplit, c(1)));
        Value last = e.cmp(IP::eq, old, nsm1);
        e.store(b.create<arith::ExtUIOp>(loc, i32, last), lastf, c(0));
        emitIf(e, last, [&] { e.store(e.ci(0), count, slot); });
      });
      b.create<gpu::BarrierOp>(loc);
      Value amLast = e.cmp(IP::ne, e.load(lastf, c(0)), e.ci(0));
      emitIf(e, amLast, [&] {
        e.ptx("fence.acq_rel.gpu;");
        Value nrow = e.mul(TT, NH); // rows of one split in lse_part
        for (int64_t r = 0; r < R; ++r)
          emitIf(e, mine[r], [&] {
            Value hrow = e.divu(obase[r], c(HD));
            // M = max_s lse_s (split 0 always sees key 0, so M is finite).
            auto maxLoop = b.create<scf::ForOp>(loc, c(0), nSplit, c(1), ValueRange{ninf});
            {
              OpBuilder::InsertionGuard guard(b);
              b.setInsertionPointToStart(maxLoop.getBody());
              Value s = maxLoop.getInductionVar();
              Value lsv = e.load(lsePart, e.add(e.mul(s, nrow), hrow));
              b.create<scf::YieldOp>(loc, e.maxf(maxLoop.getRegionIterArgs()[0], lsv));
            }
            Value M = maxLoop.getResult(0);
            auto sumLoop =
                b.create<scf::ForOp>(loc, c(0), nSplit, c(1), ValueRange{zero, zero});
            {
              OpBuilder::InsertionGuard guard(b);
              b.setInsertionPointToStart(sumLoop.getBody());
              Value s = sumLoop.getInductionVar();
              Value la = sumLoop.getRegionIterArgs()[0], oa = sumLoop.getRegionIterArgs()[1];
              Value srow = e.add(e.mul(s, nrow), hrow);
              Value lsv = e.load(lsePart, srow);
              Value ws = e.exp(e.fsub(lsv, M));
              Value op = e.load(oPart, e.add(e.mul(srow, c(HD)), dd));
              Value la2 = e.fadd(la, ws);
              Value oa2 = e.fma(ws, op, oa);
              b.create<scf::YieldOp>(loc, ValueRange{la2, oa2});
            }
            Value ro = e.fdiv(sumLoop.getResult(1), sumLoop.getResult(0));
            e.store(ro, out, e.add(obase[r], dd));
          });
      });
    });
  });
  b.create<gpu::ReturnOp>(loc);
}

} // namespace

LogicalResult lowerDecodeAttentionTile(AttentionTileOp op) {
  FailureOr<DecodeGeometry> g = decodeGeometry(op);
  if (failed(g))
    return failure();
  return placeTileKernel(op, op.getSymName(), {"dec_o", "dec_m", "dec_l", "dec_last"},
                         "one decode attention a gpu.module",
                         [&](OpBuilder &b) { emitDecodeKernel(op, *g, b); });
}

} // namespace swz
