//===- LowerAttention.cpp - swz-lower-tiles: the flash-attention prefill kernel ===//
//
// The tensor-core flash attention a scheduled `swz.attention_tile` describes, built op by
// op from the schedule's fields. FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster
// Attention with Better Parallelism and Work Partitioning") structure:
//   * warps x 16 query rows a block (block_q); Q (times scale, rounded to f16) is staged
//     once in shared memory and each warp takes its A fragments with ldmatrix.x4;
//   * per 64-key tile (block_kv = one KV page: one block-table lookup), K and V are copied
//     with 16-byte cp.async (zero-filled past the last visible key, so slots outside the
//     context are never read) into block_kv x head_dim f16 tiles;
//   * S = Q K^T by mma.sync.m16n8k16 (K fragments: ldmatrix.x2), causal mask, online
//     softmax on the accumulator fragments (row max and sum over the 4 lanes of a quad by
//     shuffle-xor 1, 2), P rounded to f16 and reused as the A operand of O += P V (V
//     fragments: ldmatrix.x2.trans); O stays in registers.
// The fragment layouts are the PTX ISA's (9.7.13.4.8, mma.m16n8k16 for f16). The score
// and output tiles are nvgpu fragments (vector<2x2xf32> per 16x8 tile) that MLIR's LLVM
// lowering indexes by constant positions, so every loop over fragments is unrolled here
// (the loops over key tiles and copy passes stay scf.for). The shared tiles carry the
// schedule's swz.smem_layout and conflict_free claim: swz-check-bank-conflicts proves and
// swz-materialize-swizzle applies the layout on what this file emits.
//
// This replaced codegen/kernels/gen_attention_mma.py, a script that wrote the same
// kernel as MLIR text for the one schedule; the ops are emitted in the script's order
// (the SIMT interpreter's outputs were bitwise the script's kernel's on every case).
//
//===----------------------------------------------------------------------===//
#include "compiler/mlir/LowerAttention.h"
#include "compiler/mlir/Schedule.h"

#include "Swz/SwzDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

#include <array>
#include <limits>
#include <string>

using namespace mlir;

namespace swz {
namespace {

/// Static shared memory a block may declare (CUDA: 48 KiB); this generator stays within it.
using schedule::kStaticSmemBytes;

/// The keys of one KV-cache page (runtime/ paged KV cache; the kernel's K/V tile is one
/// page, so one block-table entry a tile).
constexpr int64_t kKvPage = 64;

/// Where the rows, keys and threads of a scheduled attention tile go.
struct AttnGeometry {
  int64_t headDim = 0, blockQ = 0, blockKv = 0, warps = 0, threads = 0;
  int64_t kSteps = 0;   ///< 16-feature k steps of S = Q K^T (head_dim / 16)
  int64_t outTiles = 0; ///< 8-feature n tiles of O (head_dim / 8)
  int64_t sTiles = 0;   ///< 8-key n tiles of S (block_kv / 8)
  int64_t pvSteps = 0;  ///< 16-key k steps of O += P V (block_kv / 16)
  int64_t copyPasses = 0; ///< cp.async passes of all threads over one K (or V) tile
  /// head_dim 64 keeps the Q fragments (4: 16 registers) for the whole kernel; 128
  /// (8 fragments, 32 registers) reloads them from shared memory per key tile.
  bool keepQ = false;
};

/// The geometry of `op`, or an error on `op` naming the schedule field that does not fit.
FailureOr<AttnGeometry> attentionGeometry(AttentionTileOp op) {
  const std::string at = "swz-lower-tiles: @" + op.getSymName().str();
  if (!op.isScheduled())
    return op.emitError() << at << " has no schedule (run swz-apply-schedule first)";
  if (!op.getElementType().isF16())
    return op.emitError() << at << ": the attention kernel keeps K and V in f16; the tile "
                          << "has " << op.getElementType() << " elements";
  AttnGeometry g;
  g.headDim = op.getHeadDim();
  g.blockQ = *op.getBlockQ();
  g.blockKv = *op.getBlockKv();
  g.warps = *op.getWarps();
  g.threads = 32 * g.warps;
  if (g.headDim != 64 && g.headDim != 128)
    return op.emitError() << at << ": head_dim must be 64 or 128 (128- or 256-byte f16 "
                          << "rows), got " << g.headDim;
  if (g.blockKv != kKvPage)
    return op.emitError() << at << ": block_kv must be the KV page size " << kKvPage
                          << " (one block-table lookup a key tile), got " << g.blockKv;
  if (g.blockQ != 16 * g.warps)
    return op.emitError() << at << ": block_q must be 16 x warps (each warp owns 16 query "
                          << "rows), got block_q " << g.blockQ << " on " << g.warps
                          << " warps";
  if (*op.getStages() != 1)
    return op.emitError() << at << ": stages must be 1 (the kernel single-buffers K and V: "
                          << "copy, wait, compute), got " << *op.getStages();
  StringRef mma = op.getMma().value_or(""), copy = op.getCopy().value_or("");
  if (mma != "mma.sync.m16n8k16")
    return op.emitError() << at << ": mma must be \"mma.sync.m16n8k16\" (the attention "
                          << "generator has no other, e.g. no wgmma), got \"" << mma << "\"";
  if (copy != "cp.async.cg.16")
    return op.emitError() << at << ": copy must be \"cp.async.cg.16\", got \"" << copy
                          << "\"";
  // Row r's 16-byte chunk c goes to chunk c ^ (r mod 8): Swizzle<3, 3, S> with S =
  // log2(head_dim) - 3, i.e. 3 for 128-byte rows, 4 for 256-byte rows.
  const int64_t shift = llvm::Log2_64(g.headDim) - 3;
  SwizzleAttr sw = op.getSmemLayoutAttr();
  if (!sw || sw.getBits() != 3 || sw.getBase() != 3 || sw.getShift() != shift) {
    InFlightDiagnostic d = op.emitError()
                           << at << ": swizzle must be #swz.swizzle<3, 3, " << shift
                           << "> for head_dim " << g.headDim
                           << " (row mod 8 into the 16-byte chunk index), got ";
    if (sw)
      d << Attribute(sw);
    else
      d << "none";
    return d;
  }
  const int64_t chunks = g.blockKv * g.headDim / 8;
  if (chunks % g.threads != 0)
    return op.emitError() << at << ": a " << g.blockKv << "x" << g.headDim << " tile has "
                          << chunks << " 16-byte chunks, which " << g.warps
                          << " warps (" << g.threads << " threads) do not divide";
  const int64_t smem = (g.blockQ + 2 * g.blockKv) * g.headDim * 2;
  if (smem > kStaticSmemBytes)
    return op.emitError() << at << ": the Q, K and V tiles (" << g.blockQ << " + 2 x "
                          << g.blockKv << " rows of " << g.headDim << " halves) need "
                          << smem << " bytes of shared memory, more than the "
                          << kStaticSmemBytes << " a block may declare statically";
  g.kSteps = g.headDim / 16;
  g.outTiles = g.headDim / 8;
  g.sTiles = g.blockKv / 8;
  g.pvSteps = g.blockKv / 16;
  g.copyPasses = chunks / g.threads;
  g.keepQ = g.headDim == 64;
  return g;
}

/// Arithmetic on one builder and location; index constants are declared once, at the top
/// of the kernel (in the order first asked for).
struct Em {
  OpBuilder &b;
  Location loc;
  Block &entry;
  llvm::DenseMap<int64_t, Value> &cache;
  Operation *lastConstant = nullptr;

  Value c(int64_t v) {
    auto [it, inserted] = cache.try_emplace(v, Value());
    if (inserted) {
      OpBuilder cb(b.getContext());
      if (lastConstant)
        cb.setInsertionPointAfter(lastConstant);
      else
        cb.setInsertionPointToStart(&entry);
      it->second = cb.create<arith::ConstantIndexOp>(loc, v);
      lastConstant = it->second.getDefiningOp();
    }
    return it->second;
  }
  Value addi(Value a, Value d) { return b.create<arith::AddIOp>(loc, a, d); }
  Value addi(Value a, int64_t v) { return addi(a, c(v)); }
  Value subi(Value a, Value d) { return b.create<arith::SubIOp>(loc, a, d); }
  Value muli(Value a, Value d) { return b.create<arith::MulIOp>(loc, a, d); }
  Value muli(Value a, int64_t v) { return muli(a, c(v)); }
  Value divui(Value a, Value d) { return b.create<arith::DivUIOp>(loc, a, d); }
  Value divui(Value a, int64_t v) { return divui(a, c(v)); }
  Value remui(Value a, Value d) { return b.create<arith::RemUIOp>(loc, a, d); }
  Value remui(Value a, int64_t v) { return remui(a, c(v)); }
  Value minui(Value a, Value d) { return b.create<arith::MinUIOp>(loc, a, d); }
  Value cmpi(arith::CmpIPredicate p, Value a, Value d) {
    return b.create<arith::CmpIOp>(loc, p, a, d);
  }
  Value cmpf(arith::CmpFPredicate p, Value a, Value d) {
    return b.create<arith::CmpFOp>(loc, p, a, d);
  }
  Value select(Value cond, Value t, Value f) { return b.create<arith::SelectOp>(loc, cond, t, f); }
  Value addf(Value a, Value d) { return b.create<arith::AddFOp>(loc, a, d); }
  Value subf(Value a, Value d) { return b.create<arith::SubFOp>(loc, a, d); }
  Value mulf(Value a, Value d) { return b.create<arith::MulFOp>(loc, a, d); }
  Value divf(Value a, Value d) { return b.create<arith::DivFOp>(loc, a, d); }
  Value maxf(Value a, Value d) { return b.create<arith::MaximumFOp>(loc, a, d); }
  Value exp(Value a) { return b.create<math::ExpOp>(loc, a); }
  Value log(Value a) { return b.create<math::LogOp>(loc, a); }
  Value indexCast(Value a) { return b.create<arith::IndexCastOp>(loc, b.getIndexType(), a); }
  Value extract(Value v, int64_t i, int64_t j) {
    return b.create<vector::ExtractOp>(loc, v, ArrayRef<int64_t>{i, j});
  }
  Value insert(Value s, Value v, int64_t i, int64_t j) {
    return b.create<vector::InsertOp>(loc, s, v, ArrayRef<int64_t>{i, j});
  }
  /// The xor-`offset` lane's `v` (gpu.shuffle xor over the full warp `width`).
  Value shuffleXor(Value v, Value offset, Value width) {
    return b.create<gpu::ShuffleOp>(loc, v.getType(), b.getI1Type(), v, offset, width,
                                    gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
};

/// Values the kernel body computes once and the loops use.
struct AttnValues {
  Value q, kCache, vCache, blockTable, out, oPart, lsePart, scale;
  Value sq, sk, sv;               ///< shared tiles
  Value zero, ninf, zv, za, w32, x1, x2;
  Value tid, lane, kvh, split, nSplit, nh, Ti, G, rows, row0, h0;
};

/// Writes the kernel of `op` (geometry `g`: `gpu.func @<name>` after its shared tiles)
/// at `b`'s insertion point, in a gpu.module.
void emitAttentionKernel(AttentionTileOp op, const AttnGeometry &g, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  const std::string name = op.getSymName().str();
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto tileType = [&](int64_t rows) {
    return MemRefType::get({rows, g.headDim}, f16, MemRefLayoutAttrInterface{}, wg);
  };
  MemRefType sqType = tileType(g.blockQ), skvType = tileType(g.blockKv);
  using Tile = std::pair<const char *, MemRefType>;
  for (auto [suffix, type] : {Tile{"_q", sqType}, Tile{"_k", skvType}, Tile{"_v", skvType}}) {
    auto gl = b.create<memref::GlobalOp>(loc, name + suffix, b.getStringAttr("private"), type,
                                         Attribute{}, false, b.getI64IntegerAttr(128));
    if (op.getConflictFree())
      gl->setAttr("swz.conflict_free", b.getUnitAttr());
    gl->setAttr("swz.smem_layout", op.getSmemLayoutAttr());
  }

  auto dyn1 = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  auto fnType = b.getFunctionType({dyn1(f32), dyn1(f16), dyn1(f16), dyn1(i32), dyn1(f32),
                                   dyn1(f32), dyn1(f32), i32, i32, i32, i32, i32, f32},
                                  {});
  auto fn = b.create<gpu::GPUFuncOp>(loc, name, fnType);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(g.threads), 1, 1}));
  fn->setAttr("swz.grid", b.getStringAttr("ceil(T*n_head/n_head_kv/" +
                                          std::to_string(g.blockQ) + "), n_head_kv, n_split"));
  fn->setAttr("swz.schedule", b.getStringAttr("attention"));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  llvm::DenseMap<int64_t, Value> cache;
  Em e{b, loc, entry, cache};
  using IP = arith::CmpIPredicate;
  using FP = arith::CmpFPredicate;

  // ---- prologue ---------------------------------------------------------------------
  AttnValues v;
  v.q = entry.getArgument(0);
  v.kCache = entry.getArgument(1);
  v.vCache = entry.getArgument(2);
  v.blockTable = entry.getArgument(3);
  v.out = entry.getArgument(4);
  v.oPart = entry.getArgument(5);
  v.lsePart = entry.getArgument(6);
  Value argT = entry.getArgument(7), argPos0 = entry.getArgument(8),
        argNHead = entry.getArgument(9), argSplitLen = entry.getArgument(11);
  v.scale = entry.getArgument(12);
  v.sq = b.create<memref::GetGlobalOp>(loc, sqType, name + "_q");
  v.sk = b.create<memref::GetGlobalOp>(loc, skvType, name + "_k");
  v.sv = b.create<memref::GetGlobalOp>(loc, skvType, name + "_v");
  auto accType = VectorType::get({2, 2}, f32);
  auto fragA = VectorType::get({4, 2}, f16), fragB = VectorType::get({2, 2}, f16);
  v.zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
  v.ninf = b.create<arith::ConstantOp>(
      loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  v.zv = b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(accType, 0.0f));
  v.za = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(fragA, b.getF16FloatAttr(0.0).getValue()));
  v.w32 = b.create<arith::ConstantIntOp>(loc, 32, 32);
  v.x1 = b.create<arith::ConstantIntOp>(loc, 1, 32);
  v.x2 = b.create<arith::ConstantIntOp>(loc, 2, 32);
  Value tile = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  v.kvh = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  v.split = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::z);
  Value nKv = b.create<gpu::GridDimOp>(loc, gpu::Dimension::y);
  v.nSplit = b.create<gpu::GridDimOp>(loc, gpu::Dimension::z);
  v.tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  v.lane = e.remui(v.tid, 32);
  Value warp = e.divui(v.tid, 32);
  v.nh = e.indexCast(argNHead);
  v.Ti = e.indexCast(argT);
  Value p0 = e.indexCast(argPos0);
  Value sl = e.indexCast(argSplitLen);
  v.G = e.divui(v.nh, nKv);
  v.rows = e.muli(v.Ti, v.G);
  v.row0 = e.muli(tile, g.blockQ);
  v.h0 = e.muli(v.kvh, v.G);

  // ---- Q tile: q * scale rounded to f16; rows past T * G are 0 ------------------------
  {
    auto loop = b.create<scf::ForOp>(loc, v.tid, e.c(g.blockQ * g.headDim), e.c(g.threads));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value el = loop.getInductionVar();
    Value r = e.divui(el, g.headDim);
    Value d = e.remui(el, g.headDim);
    Value i = e.addi(v.row0, r);
    Value live = e.cmpi(IP::ult, i, v.rows);
    auto ifOp = b.create<scf::IfOp>(loc, TypeRange{f32}, live, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Value t = e.divui(i, v.G);
      Value gg = e.remui(i, v.G);
      Value h = e.addi(v.h0, gg);
      Value a0 = e.muli(t, v.nh);
      Value a1 = e.addi(a0, h);
      Value a2 = e.muli(a1, g.headDim);
      Value a3 = e.addi(a2, d);
      Value qx = b.create<memref::LoadOp>(loc, v.q, ValueRange{a3});
      Value qs = e.mulf(qx, v.scale);
      b.create<scf::YieldOp>(loc, qs);
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      b.create<scf::YieldOp>(loc, v.zero);
    }
    Value qh = b.create<arith::TruncFOp>(loc, f16, ifOp.getResult(0));
    b.create<memref::StoreOp>(loc, qh, v.sq, ValueRange{r, d});
  }

  // ---- keys [kv_lo, kv_hi): the split's range, clipped to the last live row's position
  Value rowEnd = e.addi(v.row0, g.blockQ);
  Value rowLim = e.minui(rowEnd, v.rows);
  Value lastRow = e.subi(rowLim, e.c(1));
  Value tLast = e.divui(lastRow, v.G);
  Value e0 = e.addi(p0, tLast);
  Value kvEnd = e.addi(e0, 1);
  Value kvLo = e.muli(v.split, sl);
  Value kvHi0 = e.addi(kvLo, sl);
  Value kvHi = e.minui(kvEnd, kvHi0);
  b.create<gpu::BarrierOp>(loc);

  // ---- A fragments of this warp's 16 Q rows (ldmatrix.x4: lane -> row lane % 16, k half
  // lane / 16) ----------------------------------------------------------------------------
  Value w16 = e.muli(warp, 16);
  Value l16 = e.remui(v.lane, 16);
  Value qrow = e.addi(w16, l16);
  Value lh = e.divui(v.lane, 16);
  Value qcoff = e.muli(lh, 8);
  auto loadQ = [&](int64_t ks) -> Value {
    Value col = e.addi(qcoff, ks * 16);
    return b.create<nvgpu::LdMatrixOp>(loc, fragA, v.sq, ValueRange{qrow, col}, false, 4);
  };
  SmallVector<Value> qa;
  if (g.keepQ)
    for (int64_t ks = 0; ks < g.kSteps; ++ks)
      qa.push_back(loadQ(ks));

  // ---- accumulator fragment rows of this lane: w16 + lane / 4 (+ 8); columns
  // (lane % 4) * 2 + j --------------------------------------------------------------------
  Value g4 = e.divui(v.lane, 4);
  Value q4 = e.remui(v.lane, 4);
  Value col2 = e.muli(q4, 2);
  Value rA = e.addi(w16, g4);
  Value rB = e.addi(rA, 8);
  std::array<Value, 2> rowI, rowPos; // query row (flattened t * G + g) and its position
  for (int64_t i = 0; i < 2; ++i) {
    rowI[i] = e.addi(v.row0, i == 0 ? rA : rB);
    Value t = e.divui(rowI[i], v.G);
    rowPos[i] = e.addi(p0, t);
  }
  // ldmatrix addresses: K (x2, B of S = Q K^T): row lane % 8, k half (lane / 8) % 2;
  // V (x2.trans, B of O += P V): row (key) lane % 16.
  Value kro = e.remui(v.lane, 8);
  Value kq = e.divui(v.lane, 8);
  Value kh = e.remui(kq, 2);
  Value kco = e.muli(kh, 8);

  // ---- main loop over key tiles: iter_args m0, m1 (row max), l0, l1 (row sum), O -------
  SmallVector<Value> inits{v.ninf, v.ninf, v.zero, v.zero};
  inits.append(g.outTiles, v.zv);
  auto mainLoop = b.create<scf::ForOp>(loc, kvLo, kvHi, e.c(g.blockKv), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(mainLoop.getBody());
    Value kt = mainLoop.getInductionVar();
    ValueRange it = mainLoop.getRegionIterArgs();
    std::array<Value, 2> m{it[0], it[1]}, l{it[2], it[3]};
    // K and V tiles of this page: block_kv rows x head_dim / 8 chunks of 16 bytes, rows
    // at or past kv_hi zero-filled (cp.async src-size 0).
    Value blk = e.divui(kt, g.blockKv);
    Value pgI = b.create<memref::LoadOp>(loc, v.blockTable, ValueRange{blk});
    Value pg = e.indexCast(pgI);
    Value b0 = e.muli(pg, nKv);
    Value b1 = e.addi(b0, v.kvh);
    Value base = e.muli(b1, g.blockKv * g.headDim);
    {
      auto copy = b.create<scf::ForOp>(loc, e.c(0), e.c(g.copyPasses), e.c(1));
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPoint(copy.getBody()->getTerminator());
      Value u = copy.getInductionVar();
      Value uT = e.muli(u, g.threads);
      Value ch = e.addi(v.tid, uT);
      Value cr = e.divui(ch, g.headDim / 8);
      Value cq = e.remui(ch, g.headDim / 8);
      Value cc = e.muli(cq, 8);
      Value key = e.addi(kt, cr);
      Value inr = e.cmpi(IP::ult, key, kvHi);
      Value nel = e.select(inr, e.c(8), e.c(0));
      Value so = e.muli(cr, g.headDim);
      Value s1 = e.addi(base, so);
      Value src = e.addi(s1, cc);
      using Copy = std::pair<Value, Value>; // global source, shared tile
      for (auto [from, to] : {Copy{v.kCache, v.sk}, Copy{v.vCache, v.sv}})
        b.create<nvgpu::DeviceAsyncCopyOp>(loc, nvgpu::DeviceAsyncTokenType::get(ctx), to,
                                           ValueRange{cr, cc}, from, ValueRange{src},
                                           b.getIndexAttr(8), nel, b.getUnitAttr());
    }
    Value grp = b.create<nvgpu::DeviceAsyncCreateGroupOp>(
        loc, nvgpu::DeviceAsyncTokenType::get(ctx), ValueRange{});
    b.create<nvgpu::DeviceAsyncWaitOp>(loc, grp, b.getI32IntegerAttr(0));
    b.create<gpu::BarrierOp>(loc);

    // S = (scale Q) K^T: sTiles n-tiles of 8 keys, kSteps k-steps of 16 features.
    SmallVector<Value> S(g.sTiles, v.zv), krows;
    for (int64_t nt = 0; nt < g.sTiles; ++nt)
      krows.push_back(e.addi(kro, nt * 8));
    for (int64_t ks = 0; ks < g.kSteps; ++ks) {
      Value qf = g.keepQ ? qa[ks] : loadQ(ks);
      Value kcol = e.addi(kco, ks * 16);
      for (int64_t nt = 0; nt < g.sTiles; ++nt) {
        Value kb = b.create<nvgpu::LdMatrixOp>(loc, fragB, v.sk, ValueRange{krows[nt], kcol},
                                               false, 2);
        S[nt] = b.create<nvgpu::MmaSyncOp>(loc, qf, kb, S[nt], ArrayRef<int64_t>{16, 8, 16});
      }
    }

    // Causal mask: key kt + 8 nt + (lane % 4) * 2 + j is visible to row i iff key <= pos_i
    // and key < kv_hi.
    Value keyBase = e.addi(kt, col2);
    auto at = [&](int64_t nt, int64_t i, int64_t j) { return (nt * 2 + i) * 2 + j; };
    SmallVector<Value> sm(g.sTiles * 4);
    for (int64_t nt = 0; nt < g.sTiles; ++nt)
      for (int64_t j = 0; j < 2; ++j) {
        Value key = e.addi(keyBase, nt * 8 + j);
        Value inr = e.cmpi(IP::ult, key, kvHi);
        for (int64_t i = 0; i < 2; ++i) {
          Value cz = e.cmpi(IP::ule, key, rowPos[i]);
          Value vis = b.create<arith::AndIOp>(loc, cz, inr);
          Value s = e.extract(S[nt], i, j);
          sm[at(nt, i, j)] = e.select(vis, s, v.ninf);
        }
      }
    // Online softmax per row (the 4 lanes of a quad share a row).
    std::array<Value, 2> mNew, alpha;
    for (int64_t i = 0; i < 2; ++i) {
      Value mx = m[i];
      for (int64_t nt = 0; nt < g.sTiles; ++nt)
        for (int64_t j = 0; j < 2; ++j)
          mx = e.maxf(mx, sm[at(nt, i, j)]);
      for (Value off : {v.x1, v.x2})
        mx = e.maxf(mx, e.shuffleXor(mx, off, v.w32));
      mNew[i] = mx;
      Value was = e.cmpf(FP::OEQ, m[i], v.ninf);
      Value dm = e.subf(m[i], mx);
      Value ea = e.exp(dm);
      alpha[i] = e.select(was, v.zero, ea);
    }
    SmallVector<Value> p16(g.sTiles * 4);
    std::array<Value, 2> rs{v.zero, v.zero};
    for (int64_t nt = 0; nt < g.sTiles; ++nt)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          Value s = sm[at(nt, i, j)];
          Value msk = e.cmpf(FP::OEQ, s, v.ninf);
          Value ds = e.subf(s, mNew[i]);
          Value ep = e.exp(ds);
          Value p = e.select(msk, v.zero, ep);
          rs[i] = e.addf(rs[i], p);
          p16[at(nt, i, j)] = b.create<arith::TruncFOp>(loc, f16, p);
        }
    std::array<Value, 2> lNew;
    for (int64_t i = 0; i < 2; ++i)
      lNew[i] = e.addf(e.mulf(l[i], alpha[i]), rs[i]);
    // Rescale O by alpha of its row.
    Value av = v.zv;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        av = e.insert(alpha[i], av, i, j);
    SmallVector<Value> O;
    for (int64_t n = 0; n < g.outTiles; ++n)
      O.push_back(e.mulf(it[4 + n], av));
    // O += P V: P (f16) as A fragments (S tiles 2 kk, 2 kk + 1), V by ldmatrix.x2.trans.
    for (int64_t kk = 0; kk < g.pvSteps; ++kk) {
      Value a = v.za;
      const std::array<std::pair<int64_t, int64_t>, 4> order{
          {{2 * kk, 0}, {2 * kk, 1}, {2 * kk + 1, 0}, {2 * kk + 1, 1}}};
      for (int64_t row = 0; row < 4; ++row)
        for (int64_t j = 0; j < 2; ++j)
          a = e.insert(p16[at(order[row].first, order[row].second, j)], a, row, j);
      Value vrow = e.addi(l16, kk * 16);
      for (int64_t n = 0; n < g.outTiles; ++n) {
        Value vb = b.create<nvgpu::LdMatrixOp>(loc, fragB, v.sv, ValueRange{vrow, e.c(n * 8)},
                                               true, 2);
        O[n] = b.create<nvgpu::MmaSyncOp>(loc, a, vb, O[n], ArrayRef<int64_t>{16, 8, 16});
      }
    }
    // The next tile's copies overwrite K and V.
    b.create<gpu::BarrierOp>(loc);
    SmallVector<Value> yields{mNew[0], mNew[1], lNew[0], lNew[1]};
    yields.append(O.begin(), O.end());
    b.create<scf::YieldOp>(loc, yields);
  }
  ValueRange res = mainLoop.getResults();

  // ---- epilogue: l summed over the quad; O / l to out (one split) or o_part and lse_part
  std::array<Value, 2> lt;
  for (int64_t i = 0; i < 2; ++i) {
    Value lv = res[2 + i];
    for (Value off : {v.x1, v.x2})
      lv = e.addf(lv, e.shuffleXor(lv, off, v.w32));
    lt[i] = lv;
  }
  Value single = e.cmpi(IP::eq, v.nSplit, e.c(1));
  Value sT = e.muli(v.split, v.Ti);
  Value lead = e.cmpi(IP::eq, q4, e.c(0));
  for (int64_t i = 0; i < 2; ++i) {
    Value irow = rowI[i];
    Value live = e.cmpi(IP::ult, irow, v.rows);
    auto liveIf = b.create<scf::IfOp>(loc, live, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(liveIf.thenBlock()->getTerminator());
    Value t = e.divui(irow, v.G);
    Value gg = e.remui(irow, v.G);
    Value h = e.addi(v.h0, gg);
    Value lpos = e.cmpf(FP::OGT, lt[i], v.zero);
    Value x0 = e.muli(t, v.nh);
    Value x1 = e.addi(x0, h);
    Value y0 = e.addi(sT, t);
    Value y1 = e.muli(y0, v.nh);
    Value y2 = e.addi(y1, h);
    Value rowBase = e.select(single, x1, y2);
    Value ob = e.muli(rowBase, g.headDim);
    Value ob2 = e.addi(ob, col2);
    SmallVector<std::pair<Value, Value>> vals;
    for (int64_t n = 0; n < g.outTiles; ++n)
      for (int64_t j = 0; j < 2; ++j) {
        Value ov = e.extract(res[4 + n], i, j);
        Value on = e.divf(ov, lt[i]);
        Value val = e.select(lpos, on, v.zero);
        Value idx = e.addi(ob2, n * 8 + j);
        vals.push_back({val, idx});
      }
    auto singleIf = b.create<scf::IfOp>(loc, single, /*withElseRegion=*/true);
    b.setInsertionPoint(singleIf.thenBlock()->getTerminator());
    for (auto [val, idx] : vals)
      b.create<memref::StoreOp>(loc, val, v.out, ValueRange{idx});
    b.setInsertionPoint(singleIf.elseBlock()->getTerminator());
    for (auto [val, idx] : vals)
      b.create<memref::StoreOp>(loc, val, v.oPart, ValueRange{idx});
    auto leadIf = b.create<scf::IfOp>(loc, lead, /*withElseRegion=*/false);
    b.setInsertionPoint(leadIf.thenBlock()->getTerminator());
    Value ll = e.log(lt[i]);
    Value l0 = e.addf(res[i], ll);
    Value lse = e.select(lpos, l0, v.ninf);
    b.create<memref::StoreOp>(loc, lse, v.lsePart, ValueRange{y2});
  }
  b.create<gpu::ReturnOp>(loc);
}

} // namespace

LogicalResult placeTileKernel(Operation *op, llvm::StringRef name, llvm::ArrayRef<std::string> symbols,
                              llvm::StringRef note, llvm::function_ref<void(OpBuilder &)> emit) {
  auto parent = dyn_cast<gpu::GPUModuleOp>(op->getParentOp());
  Operation *scope = parent ? parent.getOperation() : op->getParentOp();
  const std::string moduleName = ("swz_" + name).str();
  for (const std::string &sym : symbols)
    if (SymbolTable::lookupSymbolIn(scope, sym)) {
      InFlightDiagnostic d = op->emitError() << "swz-lower-tiles: @" << sym << " already exists";
      if (!note.empty())
        d << " (" << note << ")";
      return d;
    }
  if (!parent && SymbolTable::lookupSymbolIn(scope, moduleName))
    return op->emitError() << "swz-lower-tiles: @" << moduleName << " already exists in the module";
  // In a gpu.module the kernel takes the tile spec's place; otherwise a new gpu.module
  // does. The kernel takes the tile's name: the spec is erased before anything verifies.
  OpBuilder b(op);
  gpu::GPUModuleOp gm = parent;
  if (!gm) {
    gm = b.create<gpu::GPUModuleOp>(op->getLoc(), moduleName);
    b.setInsertionPointToStart(gm.getBody());
  }
  emit(b);
  op->erase();
  if (auto module = gm->getParentOfType<ModuleOp>())
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(gm.getContext()));
  return success();
}

LogicalResult lowerAttentionTile(AttentionTileOp op) {
  if (op.getDecode())
    return lowerDecodeAttentionTile(op);
  FailureOr<AttnGeometry> g = attentionGeometry(op);
  if (failed(g))
    return failure();
  const std::string name = op.getSymName().str();
  return placeTileKernel(op, name, {name + "_q", name + "_k", name + "_v"}, "",
                         [&](OpBuilder &b) { emitAttentionKernel(op, *g, b); });
}

} // namespace swz
