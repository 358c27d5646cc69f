//===- LowerTiles.cpp - swz-lower-tiles: kernels generated from tile specs ===//
//
// The GEMM a scheduled `swz.gemm_tile` describes, built op by op from the schedule's
// fields (Passes.td, SwzLowerTiles, says what it emits and why every tile gives the same
// numbers). The structure follows CUTLASS's sm80 multistage mainloop (cp.async ring of
// `stages` k tiles, ldmatrix.x4 fragments, mma.sync.m16n8k16; NVIDIA, "CUTLASS: Efficient
// GEMM in CUDA", docs/efficient_gemm.md) with the shared-memory permutation left to
// swz-materialize-swizzle; on sm_90a the same ring feeds wgmma.mma_async through
// shared-memory matrix descriptors (PTX ISA 8.0, 9.7.15: "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate"), as CUTLASS's sm90 cp.async GMMA mainloop does.
//
//===----------------------------------------------------------------------===//
#include "compiler/mlir/Passes.h"
#include "compiler/mlir/LowerAttention.h"
#include "compiler/mlir/LowerGemv.h"
#include "compiler/mlir/LowerSkinnyGemm.h"

#include "Swz/SwzDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/Support/MathExtras.h"

#include <functional>
#include <string>

namespace swz {
#define GEN_PASS_DEF_SWZLOWERTILES
#include "compiler/mlir/Passes.h.inc"
} // namespace swz

using namespace mlir;

namespace swz {
namespace {

/// Where the threads and warps of a scheduled GEMM tile go.
struct GemmGeometry {
  int64_t tileM = 0, tileN = 0, tileK = 0, warps = 0, stages = 0, threads = 0;
  int64_t warpRows = 0, warpCols = 0; ///< warp grid: warpRows x warpCols warps
  int64_t warpM = 0, warpN = 0;       ///< each warp's sub-tile of y
  int64_t fragsM = 0;                 ///< 16-row A fragments a warp (warpM / 16)
  int64_t tilesN = 0;                 ///< 8-column B tiles a warp (warpN / 8, even)
  int64_t chunksPerRow = 0;           ///< 16-byte chunks in a shared row (tileK / 8)
  int64_t rowsPerPass = 0;            ///< rows one copy pass of all threads fills
  /// Hopper: each warpgroup (4 warps) multiplies 64 rows by the whole tile_n with
  /// wgmma.mma_async.m64n<tile_n>k16, A and B read from shared memory by descriptor.
  bool wgmma = false;
  /// wgmma groups left in flight across a k tile (wgmma.wait_group N): the schedule's
  /// mma_in_flight (default 0). With 1, k tile kt's multiply overlaps the wait for kt + 1
  /// and the barrier, and one stage fewer is copied ahead.
  int64_t wgmmaInFlight = 0;
  /// k tiles copied ahead of the one multiplied: stages - 1, less the stages that
  /// in-flight multiplies still read.
  int64_t lookahead = 0;
  int64_t smemAlign = 0; ///< alignment of the shared tiles (wgmma: 1024 bytes)
  /// Bytes of dynamic shared memory (0: the tiles fit the static 48 KiB; tiles over it
  /// go to dynamic shared memory: the kernel declares `swz.dynamic_smem` and
  /// swz-dynamic-smem places them).
  int64_t dynamicSmem = 0;
};

/// The geometry of `op`, or an error on `op` naming what does not fit.
FailureOr<GemmGeometry> gemmGeometry(GemmTileOp op) {
  if (!op.isScheduled())
    return op.emitError() << "swz-lower-tiles: @" << op.getSymName()
                          << " has no schedule (run swz-apply-schedule first)";
  if (!op.getElementType().isF16())
    return op.emitError() << "swz-lower-tiles generates f16 GEMMs; @" << op.getSymName()
                          << " has " << op.getElementType() << " elements";
  StringRef mma = op.getMma().value_or(""), copy = op.getCopy().value_or("");
  GemmGeometry g;
  g.tileM = *op.getTileM();
  g.tileN = *op.getTileN();
  g.tileK = *op.getTileK();
  g.warps = *op.getWarps();
  g.stages = *op.getStages();
  g.threads = 32 * g.warps;
  const std::string wgmmaName = "wgmma.m64n" + std::to_string(g.tileN) + "k16";
  g.wgmma = mma == wgmmaName;
  if ((mma != "mma.sync.m16n8k16" && !g.wgmma) || copy != "cp.async.cg.16")
    return op.emitError() << "swz-lower-tiles emits mma.sync.m16n8k16 or " << wgmmaName
                          << " (tile_n wide) with cp.async.cg.16 copies; the schedule asks for "
                             "mma \""
                          << mma << "\" with copy \"" << copy << "\"";
  if (!llvm::isPowerOf2_64(g.warps))
    return op.emitError() << "swz-lower-tiles: warps must be a power of two, got " << g.warps;
  if (g.stages < 2)
    return op.emitError() << "swz-lower-tiles: the cp.async ring needs stages >= 2, got "
                          << g.stages;
  if (g.wgmma) {
    // wgmma.m64nNk16 (PTX ISA 9.7.15): a warpgroup owns 64 rows and N = tile_n columns
    // (8..256, a multiple of 8 for f16); A and B K-major in shared memory with the
    // 128-byte swizzle, i.e. 64-element rows under Swizzle<3,3,3> (CuTe's
    // Swizzle<3,4,3> on bytes), each stage's tiles on 1024-byte boundaries.
    auto sw = op.getSmemLayoutAttr();
    if (g.tileM % 64 != 0 || g.warps != 4 * (g.tileM / 64))
      return op.emitError() << "swz-lower-tiles: " << wgmmaName << " needs a warpgroup (4 warps) "
                            << "per 64 rows of tile_m; got tile_m " << g.tileM << " on "
                            << g.warps << " warps";
    if (g.tileN < 8 || g.tileN > 256 || g.tileN % 8 != 0)
      return op.emitError() << "swz-lower-tiles: wgmma's N (tile_n) must be a multiple of 8 "
                               "in [8, 256], got "
                            << g.tileN;
    if (g.tileK != 64 || !sw || sw.getBits() != 3 || sw.getBase() != 3 || sw.getShift() != 3)
      return op.emitError() << "swz-lower-tiles: wgmma reads its shared tiles through the "
                               "128-byte swizzle: tile_k 64 with #swz.swizzle<3, 3, 3>";
    g.warpRows = g.warps;
    g.warpCols = 1;
    g.warpM = 16;
    g.warpN = g.tileN;
  } else {
    // Halve the dimension whose per-warp extent is longer (rows first on a tie).
    g.warpRows = g.warpCols = 1;
    while (g.warpRows * g.warpCols < g.warps) {
      if (g.tileM / g.warpRows >= g.tileN / g.warpCols)
        g.warpRows *= 2;
      else
        g.warpCols *= 2;
    }
    g.warpM = g.tileM / g.warpRows;
    g.warpN = g.tileN / g.warpCols;
    if (g.tileM % g.warpRows != 0 || g.tileN % g.warpCols != 0 || g.warpM % 16 != 0 ||
        g.warpN % 16 != 0)
      return op.emitError() << "swz-lower-tiles: the " << g.tileM << "x" << g.tileN
                            << " tile over " << g.warps << " warps (" << g.warpRows << "x"
                            << g.warpCols << ") gives " << g.tileM << "/" << g.warpRows << " x "
                            << g.tileN << "/" << g.warpCols
                            << " warp tiles; each must be a multiple of 16x16";
  }
  g.fragsM = g.warpM / 16;
  g.tilesN = g.warpN / 8;
  g.chunksPerRow = g.tileK / 8;
  if (g.threads % g.chunksPerRow != 0)
    return op.emitError() << "swz-lower-tiles: tile_k " << g.tileK << " has "
                          << g.chunksPerRow << " 16-byte chunks a row, which do not divide "
                          << g.threads << " threads";
  g.rowsPerPass = g.threads / g.chunksPerRow;
  if (g.tileM % g.rowsPerPass != 0 || g.tileN % g.rowsPerPass != 0)
    return op.emitError() << "swz-lower-tiles: a copy pass of " << g.threads
                          << " threads fills " << g.rowsPerPass << " rows of tile_k "
                          << g.tileK << "; tile_m " << g.tileM << " and tile_n " << g.tileN
                          << " must be multiples of it";
  g.wgmmaInFlight = op.getMmaInFlight().value_or(0);
  if (g.wgmmaInFlight != 0 && (!g.wgmma || g.wgmmaInFlight != 1 || g.stages < 3))
    return op.emitError() << "swz-lower-tiles: mma_in_flight " << g.wgmmaInFlight
                          << " needs wgmma, at most 1 group, and 3 or more stages (the "
                             "pending multiply's stage and one copied ahead); the schedule has "
                          << mma << " on " << g.stages << " stages";
  g.lookahead = g.stages - 1 - g.wgmmaInFlight;
  g.smemAlign = schedule::gemmSmemAlign(g.wgmma);
  const int64_t smem = g.stages * (g.tileM + g.tileN) * g.tileK * 2;
  // Dynamic shared memory is only 16-byte aligned: room to round its base up.
  g.dynamicSmem = schedule::gemmDynamicSmemBytes(smem, g.wgmma);
  return g;
}

/// Index arithmetic on one builder and location.
struct Ix {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value add(Value a, Value d) { return b.create<arith::AddIOp>(loc, a, d); }
  Value add(Value a, int64_t v) { return v == 0 ? a : add(a, c(v)); }
  Value mul(Value a, int64_t v) { return b.create<arith::MulIOp>(loc, a, c(v)); }
  Value div(Value a, int64_t v) { return b.create<arith::DivUIOp>(loc, a, c(v)); }
  Value rem(Value a, int64_t v) { return b.create<arith::RemUIOp>(loc, a, c(v)); }
  Value min(Value a, Value d) { return b.create<arith::MinUIOp>(loc, a, d); }
  Value ult(Value a, Value d) {
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, a, d);
  }
  Value both(Value a, Value d) { return b.create<arith::AndIOp>(loc, a, d); }
  Value select(Value cond, Value t, Value f) { return b.create<arith::SelectOp>(loc, cond, t, f); }
};

/// One operand's copy into shared memory: `rows` tile rows starting at global row
/// `base` (< `limit`) of `src`, into `dst`.
struct CopyOperand {
  Value src, dst, base, limit;
  int64_t rows;
};

/// Values the kernel body computes once and the loops use.
struct GemmValues {
  Value x, w, y, bias, res, flags;
  Value sx, sw;                 ///< shared tiles
  Value tid, lane, T, N, K, Km8;
  Value row0, col0;             ///< this block's tile of y
  Value cpRow, cpCol;           ///< copy role: row within a pass, column of the chunk
  Value wrow, wcol;             ///< the warp's sub-tile
};

/// Issues the cp.async copies of k tile `kt` into ring stage `stage` (indices).
void emitStageCopy(OpBuilder &b, Location loc, const GemmGeometry &g, const GemmValues &v,
                   Value kt, Value stage) {
  Ix ix{b, loc};
  Value gc = ix.add(ix.mul(kt, g.tileK), v.cpCol);
  Value kin = ix.ult(gc, v.K);
  Value gcc = ix.min(gc, v.Km8); // in bounds even where nothing is copied
  for (const CopyOperand &op :
       {CopyOperand{v.x, v.sx, v.row0, v.T, g.tileM}, CopyOperand{v.w, v.sw, v.col0, v.N, g.tileN}}) {
    Value s0 = ix.mul(stage, op.rows);
    Value limitMinus1 = b.create<arith::SubIOp>(loc, op.limit, ix.c(1));
    b.create<scf::ForOp>(
        loc, ix.c(0), ix.c(op.rows / g.rowsPerPass), ix.c(1), ValueRange{},
        [&](OpBuilder &fb, Location l, Value i, ValueRange) {
          Ix f{fb, l};
          Value r = f.add(f.mul(i, g.rowsPerPass), v.cpRow);
          Value sr = f.add(s0, r);
          Value gr = f.add(op.base, r);
          Value ok = f.both(f.ult(gr, op.limit), kin);
          Value n = f.select(ok, f.c(8), f.c(0));
          Value grc = f.min(gr, limitMinus1);
          fb.create<nvgpu::DeviceAsyncCopyOp>(
              l, nvgpu::DeviceAsyncTokenType::get(fb.getContext()), op.dst,
              ValueRange{sr, v.cpCol}, op.src, ValueRange{grc, gcc}, fb.getIndexAttr(8), n,
              fb.getUnitAttr());
          fb.create<scf::YieldOp>(l);
        });
  }
}

Value createGroup(OpBuilder &b, Location loc) {
  return b.create<nvgpu::DeviceAsyncCreateGroupOp>(
      loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), ValueRange{});
}

/// value(b, m, n, i, j): element [i][j] of the warp's m16n8 accumulator tile (m, n) after
/// the K loop, i.e. y[row0 + wrow + 16 m + lane / 4 + 8 i][col0 + wcol + 8 n + 2 (lane % 4)
/// + j] before the bias.
using AccessorFn = std::function<Value(OpBuilder &, int64_t, int64_t, int64_t, int64_t)>;

/// The start of K-loop iteration `kt` (both multiplies): wait until k tile kt has landed
/// (lookahead - 1 younger groups may stay in flight), with `asyncProxy` make it visible to
/// the async proxy wgmma reads shared memory through (fence.proxy.async, PTX ISA
/// 9.7.15.1), barrier (the tile is visible to every warp, and every warp has finished
/// reading the stage the next copy overwrites: (kt - 1) % stages, or with a wgmma group
/// in flight (kt - 2) % stages, whose multiply each warpgroup waited for before this
/// barrier), start k tile kt + lookahead. Returns the ring stage of k tile kt.
Value beginKTile(OpBuilder &lb, Location l, const GemmGeometry &g, const GemmValues &v, Value kt,
                 Value nk, Value token, bool asyncProxy) {
  Ix li{lb, l};
  lb.create<nvgpu::DeviceAsyncWaitOp>(l, token, lb.getI32IntegerAttr(g.lookahead - 1));
  if (asyncProxy)
    lb.create<NVVM::FenceProxyOp>(
        l, NVVM::ProxyKindAttr::get(lb.getContext(), NVVM::ProxyKind::async_shared),
        NVVM::SharedSpaceAttr::get(lb.getContext(), NVVM::SharedSpace::shared_cta));
  lb.create<gpu::BarrierOp>(l);
  Value ktn = li.add(kt, g.lookahead);
  lb.create<scf::IfOp>(l, li.ult(ktn, nk), [&](OpBuilder &tb, Location tl) {
    emitStageCopy(tb, tl, g, v, ktn, Ix{tb, tl}.rem(ktn, g.stages));
    tb.create<scf::YieldOp>(tl);
  });
  createGroup(lb, l);
  return li.rem(kt, g.stages);
}

/// The wgmma K loop (sm_90a): per k tile, beginKTile, then tile_k / 16
/// wgmma.mma_async.m64n<tile_n>k16 of the warpgroup's 64 rows, committed; then waits
/// until at most wgmmaInFlight groups are pending (the previous k tile's, which reads a
/// stage no copy overwrites before the next barrier; CUTLASS's sm90 mainloop keeps one
/// in flight the same way), and for all of them after the loop. Returns the accessor of
/// the accumulators in mma.sync's m16n8 fragment order: wgmma's D register 4 n + 2 i + j
/// of warp w in the warpgroup is row 16 w + lane / 4 + 8 i, column 8 n + 2 (lane % 4) + j.
AccessorFn emitWgmmaLoop(OpBuilder &b, Location loc, const GemmGeometry &g, const GemmValues &v, Value nk,
              Value token) {
  MLIRContext *ctx = b.getContext();
  Ix ix{b, loc};
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  const int64_t nRegs = g.tileN / 2;
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(nRegs, f32));
  Value acc = b.create<LLVM::UndefOp>(loc, accType);
  Value zero = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f));
  for (int64_t r = 0; r < nRegs; ++r)
    acc = b.create<LLVM::InsertValueOp>(loc, acc, zero, ArrayRef<int64_t>{r});
  auto base = [&](Value tile) {
    Value p = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, tile);
    return b.create<arith::IndexCastOp>(loc, i64, p).getResult();
  };
  Value baseX = base(v.sx), baseW = base(v.sw);
  Value warpgroup = ix.div(v.tid, 128);
  // Shared-memory matrix descriptor (PTX ISA 9.7.15.5.1): start address >> 4 in bits
  // [0, 14), leading-dimension byte offset >> 4 in [16, 30) (unused by K-major swizzled
  // layouts: 1), stride byte offset >> 4 in [32, 46) (8 rows of 128 bytes: 1024),
  // swizzle mode in [62, 64) (1: 128-byte).
  const int64_t descBits = (int64_t(1) << 62) | (int64_t(1024 >> 4) << 32) | (int64_t(1) << 16);
  auto i64c = [&](OpBuilder &ob, Location l, int64_t x) {
    return ob.create<arith::ConstantOp>(l, ob.getI64IntegerAttr(x)).getResult();
  };
  auto loop = b.create<scf::ForOp>(
      loc, ix.c(0), nk, ix.c(1), ValueRange{acc},
      [&](OpBuilder &lb, Location l, Value kt, ValueRange accs) {
        Ix li{lb, l};
        Value st = beginKTile(lb, l, g, v, kt, nk, token, /*asyncProxy=*/true);
        // Byte offsets of this stage's tiles (rows of tile_k halves = 128 bytes).
        Value rowA = li.add(li.mul(st, g.tileM), li.mul(warpgroup, 64));
        Value offA = lb.create<arith::IndexCastOp>(l, i64, li.mul(rowA, 2 * g.tileK));
        Value offB = lb.create<arith::IndexCastOp>(l, i64, li.mul(st, g.tileN * 2 * g.tileK));
        Value addrA = lb.create<arith::AddIOp>(l, baseX, offA);
        Value addrB = lb.create<arith::AddIOp>(l, baseW, offB);
        auto desc = [&](Value addr, int64_t kk) {
          Value a = lb.create<arith::AddIOp>(l, addr, i64c(lb, l, 2 * kk));
          Value field = lb.create<arith::ShRUIOp>(
              l, lb.create<arith::AndIOp>(l, a, i64c(lb, l, 0x3FFFF)), i64c(lb, l, 4));
          return lb.create<arith::OrIOp>(l, field, i64c(lb, l, descBits)).getResult();
        };
        lb.create<NVVM::WgmmaFenceAlignedOp>(l);
        Value a = accs[0];
        for (int64_t kk = 0; kk < g.tileK; kk += 16)
          a = lb.create<NVVM::WgmmaMmaAsyncOp>(
              l, accType, a, desc(addrA, kk), desc(addrB, kk),
              NVVM::MMAShapeAttr::get(ctx, 64, int(g.tileN), 16), NVVM::WGMMATypes::f16,
              NVVM::WGMMATypes::f16, NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
              NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
              NVVM::MMALayout::col, NVVM::MMAIntOverflowAttr{});
        lb.create<NVVM::WgmmaGroupSyncAlignedOp>(l);
        lb.create<NVVM::WgmmaWaitGroupSyncOp>(l, lb.getI32IntegerAttr(g.wgmmaInFlight));
        lb.create<scf::YieldOp>(l, a);
      });
  if (g.wgmmaInFlight > 0)
    b.create<NVVM::WgmmaWaitGroupSyncOp>(loc, b.getI32IntegerAttr(0));
  Value result = loop.getResult(0);
  return [result, loc](OpBuilder &eb, int64_t m, int64_t n, int64_t i, int64_t j) -> Value {
    (void)m; // one 16-row slice a warp
    return eb.create<LLVM::ExtractValueOp>(loc, result, ArrayRef<int64_t>{4 * n + 2 * i + j});
  };
}

/// The mma.sync K loop: per k tile, beginKTile, then per 16-wide k step the warp's
/// ldmatrix.x4 fragments (lane l gives one row address of one 8x8 matrix: x row l % 16,
/// k offset 8 (l / 16) -> a0..a3 of m16n8k16; W row 8 (l / 16) + l % 8, k offset
/// 8 ((l / 8) % 2) -> b0, b1 of two n8 tiles) and fragsM x tilesN mma.sync.m16n8k16.
/// Returns the accessor of the accumulators (the m16n8 fragments themselves).
AccessorFn emitMmaSyncLoop(OpBuilder &b, Location loc, const GemmGeometry &g, const GemmValues &v,
                           Value nk, Value token) {
  Ix ix{b, loc};
  Type f16 = b.getF16Type(), f32 = b.getF32Type();
  Value lh = ix.div(v.lane, 16);
  Value aK = ix.mul(lh, 8);
  Value aRow = ix.add(v.wrow, ix.rem(v.lane, 16));
  Value bK = ix.mul(ix.rem(ix.div(v.lane, 8), 2), 8);
  Value bRow = ix.add(v.wcol, ix.add(ix.mul(lh, 8), ix.rem(v.lane, 8)));
  const int64_t nAcc = g.fragsM * g.tilesN;
  auto accType = VectorType::get({2, 2}, f32);
  auto fragA = VectorType::get({4, 2}, f16), fragB = VectorType::get({2, 2}, f16);
  Value zero = b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(accType, 0.0f));
  Value zeroB = b.create<arith::ConstantOp>(
      loc, DenseElementsAttr::get(fragB, b.getF16FloatAttr(0.0).getValue()));
  SmallVector<Value> accInit(nAcc, zero);
  auto mainLoop = b.create<scf::ForOp>(
      loc, ix.c(0), nk, ix.c(1), accInit,
      [&](OpBuilder &lb, Location l, Value kt, ValueRange accs) {
        Ix li{lb, l};
        Value st = beginKTile(lb, l, g, v, kt, nk, token, /*asyncProxy=*/false);
        Value ar = li.add(li.mul(st, g.tileM), aRow);
        Value br = li.add(li.mul(st, g.tileN), bRow);
        auto kLoop = lb.create<scf::ForOp>(
            l, li.c(0), li.c(g.tileK), li.c(16), accs,
            [&](OpBuilder &kb, Location kl, Value kk, ValueRange acc) {
              Ix ki{kb, kl};
              Value ak = ki.add(kk, aK), bk = ki.add(kk, bK);
              SmallVector<Value> fa, fb;
              for (int64_t m = 0; m < g.fragsM; ++m)
                fa.push_back(kb.create<nvgpu::LdMatrixOp>(kl, fragA, v.sx,
                                                          ValueRange{ki.add(ar, 16 * m), ak},
                                                          false, 4));
              for (int64_t p = 0; p < g.tilesN / 2; ++p) {
                Value four = kb.create<nvgpu::LdMatrixOp>(
                    kl, fragA, v.sw, ValueRange{ki.add(br, 16 * p), bk}, false, 4);
                for (int64_t half = 0; half < 2; ++half) {
                  Value frag = zeroB;
                  for (int64_t r = 0; r < 2; ++r) {
                    Value row = kb.create<vector::ExtractOp>(kl, four, ArrayRef<int64_t>{2 * half + r});
                    frag = kb.create<vector::InsertOp>(kl, row, frag, ArrayRef<int64_t>{r});
                  }
                  fb.push_back(frag);
                }
              }
              SmallVector<Value> out;
              for (int64_t m = 0; m < g.fragsM; ++m)
                for (int64_t n = 0; n < g.tilesN; ++n)
                  out.push_back(kb.create<nvgpu::MmaSyncOp>(
                      kl, fa[m], fb[n], acc[m * g.tilesN + n], ArrayRef<int64_t>{16, 8, 16}));
              kb.create<scf::YieldOp>(kl, out);
            });
        lb.create<scf::YieldOp>(l, kLoop.getResults());
      });
  SmallVector<Value> accs(mainLoop.getResults());
  return [&g, accs, loc](OpBuilder &eb, int64_t m, int64_t n, int64_t i, int64_t j) -> Value {
    return eb.create<vector::ExtractOp>(loc, accs[m * g.tilesN + n], ArrayRef<int64_t>{i, j});
  };
}

/// Writes the kernel of `op` into `gm`: gpu.func @<op's name>, its shared tiles
/// @gemm_x / @gemm_w (a shape class's: @gemm_<class>_x / _w, beside its base kernel's).
void emitGemmKernel(GemmTileOp op, const GemmGeometry &g, gpu::GPUModuleOp gm) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(gm.getBody());
  Type f16 = b.getF16Type(), f32 = b.getF32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto smemType = [&](int64_t rows) {
    return MemRefType::get({g.stages * rows, g.tileK}, f16, MemRefLayoutAttrInterface{}, wg);
  };
  auto global = [&](StringRef name, MemRefType type) {
    // wgmma's 128-byte swizzle repeats every 8 rows of 128 bytes: tiles on 1024 bytes.
    auto gl = b.create<memref::GlobalOp>(loc, name, b.getStringAttr("private"), type,
                                         Attribute{}, false,
                                         b.getI64IntegerAttr(g.smemAlign));
    if (auto layout = op.getSmemLayoutAttr())
      gl->setAttr("swz.smem_layout", layout);
    if (op.getConflictFree())
      gl->setAttr("swz.conflict_free", b.getUnitAttr());
    return gl;
  };
  MemRefType sxType = smemType(g.tileM), swType = smemType(g.tileN);
  std::string cls; // "_<class>" (appended: see runOnOperation on GCC 12's -Wrestrict)
  if (op.getShapeClass())
    cls.append("_").append(op.getShapeClass()->str());
  const std::string xName = "gemm" + cls + "_x", wName = "gemm" + cls + "_w";
  global(xName, sxType);
  global(wName, swType);

  auto dyn2 = [&](Type t) {
    return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, t);
  };
  auto fnType = b.getFunctionType(
      {dyn2(f16), dyn2(f16), dyn2(f32), MemRefType::get({ShapedType::kDynamic}, f32), dyn2(f32),
       b.getI32Type()},
      {});
  auto fn = b.create<gpu::GPUFuncOp>(loc, op.getSymName(), fnType);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(g.threads), 1, 1}));
  fn->setAttr("swz.grid", b.getStringAttr("ceil(N/" + std::to_string(g.tileN) + "), ceil(T/" +
                                          std::to_string(g.tileM) + "), 1"));
  // The schedule entry the kernel follows (compile_gpu.cpp checks its tiles against it).
  fn->setAttr("swz.schedule",
              b.getStringAttr(op.getShapeClass() ? "gemm." + op.getShapeClass()->str() : "gemm"));
  if (g.dynamicSmem > 0)
    fn->setAttr("swz.dynamic_smem", b.getStringAttr(std::to_string(g.dynamicSmem)));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Ix ix{b, loc};
  GemmValues v;
  v.x = entry.getArgument(0);
  v.w = entry.getArgument(1);
  v.y = entry.getArgument(2);
  v.bias = entry.getArgument(3);
  v.res = entry.getArgument(4);
  v.flags = entry.getArgument(5);
  v.sx = b.create<memref::GetGlobalOp>(loc, sxType, xName);
  v.sw = b.create<memref::GetGlobalOp>(loc, swType, wName);
  v.tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value by = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  v.row0 = ix.mul(by, g.tileM);
  v.col0 = ix.mul(bx, g.tileN);
  v.T = b.create<memref::DimOp>(loc, v.x, 0);
  v.K = b.create<memref::DimOp>(loc, v.x, 1);
  v.N = b.create<memref::DimOp>(loc, v.w, 0);
  v.Km8 = b.create<arith::SubIOp>(loc, v.K, ix.c(8));
  Value nk = ix.div(ix.add(v.K, g.tileK - 1), g.tileK);

  // Copy role: thread tid moves chunk tid % chunksPerRow of rows tid / chunksPerRow +
  // rowsPerPass i (consecutive lanes fill one row's chunks: whole 16-byte lines a warp).
  v.cpRow = ix.div(v.tid, g.chunksPerRow);
  v.cpCol = ix.mul(ix.rem(v.tid, g.chunksPerRow), 8);
  // The warp's sub-tile of y.
  Value warp = ix.div(v.tid, 32);
  v.lane = ix.rem(v.tid, 32);
  v.wrow = ix.mul(ix.div(warp, g.warpCols), g.warpM);
  v.wcol = ix.mul(ix.rem(warp, g.warpCols), g.warpN);

  // Prologue: k tiles 0 .. lookahead-1 into stages 0 .. lookahead-1, one group each
  // (tile 0 always exists: K >= 8).
  Value token;
  for (int64_t s = 0; s < g.lookahead; ++s) {
    if (s == 0) {
      emitStageCopy(b, loc, g, v, ix.c(0), ix.c(0));
    } else {
      b.create<scf::IfOp>(loc, ix.ult(ix.c(s), nk), [&](OpBuilder &tb, Location l) {
        emitStageCopy(tb, l, g, v, Ix{tb, l}.c(s), Ix{tb, l}.c(s));
        tb.create<scf::YieldOp>(l);
      });
    }
    token = createGroup(b, loc);
  }

  // Main loop: beginKTile, then multiply k tile kt's stage.
  const AccessorFn value = g.wgmma ? emitWgmmaLoop(b, loc, g, v, nk, token)
                                   : emitMmaSyncLoop(b, loc, g, v, nk, token);
  // Nothing may be left in flight when the block exits (the tail groups are empty).
  b.create<nvgpu::DeviceAsyncWaitOp>(loc, token, b.getI32IntegerAttr(0));

  // Epilogue. Accumulator fragment of m16n8 tile (m, n): element [i][j] is
  // y[row0 + wrow + 16 m + lane / 4 + 8 i][col0 + wcol + 8 n + 2 (lane % 4) + j].
  Value erow = ix.add(ix.add(v.row0, v.wrow), ix.div(v.lane, 4));
  Value ecol = ix.add(ix.add(v.col0, v.wcol), ix.mul(ix.rem(v.lane, 4), 2));
  // flags bit 0: add bias[n]; bit 1: add res[t, n] (the residual stream: read, then y
  // written, by the same thread, so res may be y). y = (acc + bias) + res, the bits of the
  // GEMM followed by add_f32 (f32 addition commutes exactly).
  auto flagSet = [&](int32_t bit) {
    Value i32Bit = b.create<arith::ConstantIntOp>(loc, bit, 32);
    Value masked = b.create<arith::AndIOp>(loc, v.flags, i32Bit);
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, masked,
                                   b.create<arith::ConstantIntOp>(loc, 0, 32));
  };
  Value useBias = flagSet(1), useRes = flagSet(2);
  Value Nm1 = b.create<arith::SubIOp>(loc, v.N, ix.c(1));
  struct Col { Value col, in, bias; };
  SmallVector<Col> cols;
  for (int64_t n = 0; n < g.tilesN; ++n)
    for (int64_t j = 0; j < 2; ++j) {
      Col c;
      c.col = ix.add(ecol, 8 * n + j);
      c.in = ix.ult(c.col, v.N);
      Value clamped = ix.min(c.col, Nm1);
      auto ifOp = b.create<scf::IfOp>(
          loc, useBias, // result type: the yields' (f32)
          [&](OpBuilder &tb, Location l) {
            Value bv = tb.create<memref::LoadOp>(l, v.bias, ValueRange{clamped});
            tb.create<scf::YieldOp>(l, bv);
          },
          [&](OpBuilder &eb, Location l) {
            Value z = eb.create<arith::ConstantOp>(l, eb.getF32FloatAttr(0.0f));
            eb.create<scf::YieldOp>(l, z);
          });
      c.bias = ifOp.getResult(0);
      cols.push_back(c);
    }
  struct Row { Value row, in; };
  SmallVector<Row> rows;
  for (int64_t m = 0; m < g.fragsM; ++m)
    for (int64_t i = 0; i < 2; ++i) {
      Value row = ix.add(erow, 16 * m + 8 * i);
      rows.push_back({row, ix.ult(row, v.T)});
    }
  // The residuals before the stores: y may be res, so a load after a store to y could
  // alias it and would wait for it (each load's latency in turn). In chunks of at most
  // kResidualChunk elements in store order: a chunk's loads (one branch on the flag, each
  // element's under its bounds: 0 outside, never stored) and then its stores, so that a
  // 128 x 128 warpgroup tile's 64 accumulators do not hold 64 more registers.
  struct Elem { int64_t m, i, n, j; };
  SmallVector<Elem> elems;
  for (int64_t m = 0; m < g.fragsM; ++m)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t n = 0; n < g.tilesN; ++n)
        for (int64_t j = 0; j < 2; ++j)
          elems.push_back({m, i, n, j});
  constexpr size_t kResidualChunk = 32;
  for (size_t c0 = 0; c0 < elems.size(); c0 += kResidualChunk) {
    const ArrayRef<Elem> chunk = ArrayRef<Elem>(elems).slice(c0, std::min(kResidualChunk, elems.size() - c0));
    auto resIf = b.create<scf::IfOp>(
        loc, useRes,
        [&](OpBuilder &tb, Location l) {
          SmallVector<Value> loaded;
          for (const Elem &el : chunk) {
            const Row &r = rows[size_t(2 * el.m + el.i)];
            const Col &c = cols[size_t(2 * el.n + el.j)];
            auto ld = tb.create<scf::IfOp>(
                l, Ix{tb, l}.both(r.in, c.in),
                [&](OpBuilder &lb, Location ll) {
                  lb.create<scf::YieldOp>(ll, ValueRange{lb.create<memref::LoadOp>(ll, v.res, ValueRange{r.row, c.col})});
                },
                [&](OpBuilder &eb, Location el2) {
                  eb.create<scf::YieldOp>(el2, ValueRange{eb.create<arith::ConstantOp>(el2, eb.getF32FloatAttr(0.0f))});
                });
            loaded.push_back(ld.getResult(0));
          }
          tb.create<scf::YieldOp>(l, loaded);
        },
        [&](OpBuilder &eb, Location l) {
          Value z = eb.create<arith::ConstantOp>(l, eb.getF32FloatAttr(0.0f));
          eb.create<scf::YieldOp>(l, SmallVector<Value>(chunk.size(), z));
        });
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Elem &el = chunk[k];
      const Row &r = rows[size_t(2 * el.m + el.i)];
      const Col &c = cols[size_t(2 * el.n + el.j)];
      Value val = value(b, el.m, el.n, el.i, el.j);
      Value res = resIf.getResult(unsigned(k));
      b.create<scf::IfOp>(loc, ix.both(r.in, c.in), [&](OpBuilder &tb, Location l) {
        Value sum = tb.create<arith::AddFOp>(l, val, c.bias);
        Value withRes = tb.create<arith::AddFOp>(l, sum, res);
        Value out = tb.create<arith::SelectOp>(l, useRes, withRes, sum);
        tb.create<memref::StoreOp>(l, out, v.y, ValueRange{r.row, c.col});
        tb.create<scf::YieldOp>(l);
      });
    }
  }
  b.create<gpu::ReturnOp>(loc);
}

struct LowerTiles : impl::SwzLowerTilesBase<LowerTiles> {
  using SwzLowerTilesBase::SwzLowerTilesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    bool failedAny = false;
    for (GemmTileOp op : llvm::make_early_inc_range(module.getOps<GemmTileOp>())) {
      // The dequantizing variant (weights = "<type>") is LowerSkinnyGemm.cpp's.
      FailureOr<GemmGeometry> g = op.getWeights() ? GemmGeometry{} : gemmGeometry(op);
      if (failed(g)) {
        failedAny = true;
        continue;
      }
      // A shape class's kernel goes into its base kernel's module (one module, one PTX file
      // a kernel source): @swz_<base> for @<base>_<class>; so does each block format's
      // dequantizing kernel: @swz_<base> for @<base>_<weights>.
      std::string base = op.getSymName().str();
      if (auto cls = op.getShapeClass() ? op.getShapeClass() : op.getWeights()) {
        // (Appended rather than "_" + str: GCC 12's -Wrestrict misreads that inlined
        // insert, a false positive, GCC bug 105329.)
        std::string tail = "_";
        tail += cls->str();
        if (base.size() <= tail.size() || base.compare(base.size() - tail.size(), tail.size(), tail) != 0) {
          op.emitError() << "swz-lower-tiles: @" << base << " has "
                         << (op.getShapeClass() ? "shape_class" : "weights") << " \"" << *cls
                         << "\" but is not named <base>" << tail;
          failedAny = true;
          continue;
        }
        base.resize(base.size() - tail.size());
      }
      std::string name = "swz_" + base;
      auto gm = dyn_cast_or_null<gpu::GPUModuleOp>(SymbolTable::lookupSymbolIn(module, name));
      if (!gm) {
        if (SymbolTable::lookupSymbolIn(module, name)) {
          op.emitError() << "swz-lower-tiles: @" << name << " already exists in the module";
          failedAny = true;
          continue;
        }
        OpBuilder b(op);
        gm = b.create<gpu::GPUModuleOp>(op.getLoc(), name);
      } else if (SymbolTable::lookupSymbolIn(gm, op.getSymName())) {
        op.emitError() << "swz-lower-tiles: @" << name << " already has a kernel @" << op.getSymName();
        failedAny = true;
        continue;
      }
      if (!op.getWeights())
        emitGemmKernel(op, *g, gm);
      else if (failed(emitSkinnyGemmKernel(op, gm))) {
        failedAny = true;
        continue;
      }
      // The generator asks for constants and lane indices where it needs them; one of
      // each is left (readable output, fewer ops for the SIMT interpreter).
      IRRewriter rewriter(ctx);
      DominanceInfo dominance;
      eliminateCommonSubExpressions(rewriter, dominance, gm);
      op.erase();
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    }
    // Attention tile specs, also inside a gpu.module (LowerAttention.cpp).
    SmallVector<AttentionTileOp> attention;
    module.walk([&](AttentionTileOp op) { attention.push_back(op); });
    for (AttentionTileOp op : attention)
      failedAny |= failed(lowerAttentionTile(op));
    // Decode GEMV tile specs (LowerGemv.cpp).
    SmallVector<GemvTileOp> gemvs;
    module.walk([&](GemvTileOp op) { gemvs.push_back(op); });
    for (GemvTileOp op : gemvs)
      failedAny |= failed(lowerGemvTile(op));
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
} // namespace swz
