//===- LowerSkinnyGemm.cpp - the dequantizing prefill GEMM (swz-lower-tiles) ===//
//
// The kernel of a `swz.gemm_tile` with `weights = "<type>"`: the prefill GEMM of prompt
// passes of few rows, y[T, N] = f16(x)[T, K] . f16(dequant(W))[N, K]^T (+ bias), reading
// the GGUF blocks themselves instead of dequant_<type>_f16's f16 copy of the weight.
// Each output's sum is the same mma.sync.m16n8k16 chain over the same f16 operands as
// dequant_<type>_f16 + gemm_f16's, so a prompt row's bits do not depend on which path
// its pass took.
//
// Geometry (the schedule's gemm.skinny, applied by swz-apply-schedule): warp w of
// workgroup b owns weight rows 8 (warps b + w) .. + 7 (one n8 tile) for every prompt row
// (tile_m / 16 m-tiles), over the whole of K. The workgroup's rows move through
// workgroup memory 256 weights (a stage: a Q4_K / Q6_K super-block, eight Q8_0 blocks)
// at a time in a `stages`-deep cp.async ring of 16-byte chunks of each row's stage
// window; each thread dequantizes the four weights of its mma B fragment per k16 step
// (row g, k 2q, 2q+1, 2q+8, 2q+9) with dequant_f16.mlir's f32 arithmetic rounded to f16.
//
// This is a port, op for op in the same order, of the generator that used to write
// codegen/kernels/gemm_skinny.mlir as text (gen_quant_kernels.py, gemm_skinny), so the
// kernel and its PTX are the ones that file held.
//
//===----------------------------------------------------------------------===//
#include "compiler/mlir/LowerSkinnyGemm.h"
#include "compiler/mlir/Schedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace mlir;

namespace swz {
namespace {

/// Static shared memory a block may declare (CUDA: 48 KiB).
using schedule::kStaticSmemBytes;

/// A block format's layout in the ring. Format facts (ggml's block structs), not
/// schedule choices:
///  * sb: bytes of a 256-weight stage of one row: a Q4_K super-block (d, dmin: 2 + 2,
///    scales 12, qs 128 = 144), a Q6_K super-block (ql 128, qh 64, scales 16, d 2 =
///    210), eight Q8_0 blocks (8 x (d 2 + qs 32) = 272);
///  * aligned: every stage starts on a 16-byte boundary (sb % 16 == 0 and K % 256 == 0,
///    so every row does too): Q4_K's and Q8_0's; Q6_K's start on 2-byte boundaries only;
///  * chunks: 16-byte chunks a row's stage window spans (sb / 16 aligned, else the
///    worst case of a window starting 14 bytes into a chunk);
///  * stride: the window's row stride in workgroup memory, an odd number of 16-byte
///    units (the 8 rows a warp reads sit in 8 different bank quadruples).
struct BlockFormat {
  int64_t sb = 0, chunks = 0, stride = 0;
  bool aligned = false;
};

BlockFormat blockFormat(StringRef ty) {
  BlockFormat f;
  f.sb = ty == "q4_k" ? 2 + 2 + 12 + 128 : ty == "q6_k" ? 128 + 64 + 16 + 2 : 8 * (2 + 32);
  f.aligned = f.sb % 16 == 0;
  f.chunks = f.aligned ? f.sb / 16 : (f.sb + 14 + 15) / 16;
  f.stride = 16 * (f.chunks | 1);
  return f;
}

/// The kernel's geometry from the scheduled op.
struct SkinnyGeometry {
  std::string type;                 ///< "q4_k", "q6_k", "q8_0"
  BlockFormat fmt;
  int64_t warps = 0, rows = 0, mTiles = 0, stages = 0;
  int64_t smemBytes = 0;
};

FailureOr<SkinnyGeometry> skinnyGeometry(GemmTileOp op) {
  if (!op.isScheduled())
    return op.emitError() << "swz-lower-tiles: @" << op.getSymName()
                          << " has no schedule (run swz-apply-schedule first)";
  SkinnyGeometry g;
  g.type = op.getWeights()->str();
  g.fmt = blockFormat(g.type);
  g.warps = *op.getWarps();
  g.stages = *op.getStages();
  g.rows = *op.getTileN();
  const int64_t tileM = *op.getTileM(), tileK = *op.getTileK();
  auto refuse = [&]() {
    return op.emitError() << "swz-lower-tiles: the dequantizing GEMM @" << op.getSymName()
                          << " (gemm.skinny): ";
  };
  const StringRef mma = op.getMma().value_or(""), copy = op.getCopy().value_or("");
  if (mma != "mma.sync.m16n8k16" || copy != "cp.async.cg.16")
    return refuse() << "emits mma.sync.m16n8k16 with cp.async.cg.16 copies; the op asks for "
                    << "mma \"" << mma << "\" with copy \"" << copy << "\"";
  if (tileK != 256)
    return refuse() << "a stage is 256 weights of a row (tile_k 256), got tile_k " << tileK;
  if (!llvm::isPowerOf2_64(g.warps) || g.rows != 8 * g.warps)
    return refuse() << "warps must be a power of two, each owning one n8 tile (tile_n = 8 x "
                       "warps); got warps "
                    << g.warps << ", tile_n " << g.rows;
  if (tileM % 16 != 0 || !llvm::isPowerOf2_64(tileM / 16))
    return refuse() << "m_tiles must be a power of two (tile_m 16 x m_tiles), got tile_m " << tileM;
  g.mTiles = tileM / 16;
  if (g.stages < 2)
    return refuse() << "the cp.async ring needs stages >= 2 (gemm.skinny.stages." << g.type
                    << "), got " << g.stages;
  g.smemBytes = g.stages * g.rows * g.fmt.stride;
  if (g.smemBytes > kStaticSmemBytes)
    return refuse() << "gemm.skinny.stages." << g.type << " = " << g.stages << " needs "
                    << g.smemBytes << " bytes of workgroup memory (" << g.stages << " stages x "
                    << g.rows << " rows x " << g.fmt.stride << " bytes), more than the "
                    << kStaticSmemBytes << " bytes of static shared memory this kernel may declare";
  return g;
}

/// The ops of the kernel body on one builder, constants at the top of the entry block
/// (one of each, as the text generator's), with gen_quant_kernels.py's helper names.
struct Em {
  OpBuilder &b;
  Location loc;
  Block *entry;
  std::map<std::pair<int, int64_t>, Value> consts;
  Type idx, i32, i16, f16, f32;

  Em(OpBuilder &b, Location loc, Block *entry)
      : b(b), loc(loc), entry(entry), idx(b.getIndexType()), i32(b.getI32Type()),
        i16(b.getI16Type()), f16(b.getF16Type()), f32(b.getF32Type()) {}

  Value constant(int kind, int64_t key, TypedAttr attr) {
    auto it = consts.find({kind, key});
    if (it != consts.end())
      return it->second;
    OpBuilder cb(b.getContext());
    cb.setInsertionPointToStart(entry);
    Value v = cb.create<arith::ConstantOp>(loc, attr);
    consts[{kind, key}] = v;
    return v;
  }
  Value c(int64_t v) { return constant(0, v, b.getIndexAttr(v)); }
  Value ci(int64_t v) { return constant(1, v, b.getI32IntegerAttr(int32_t(v))); }
  Value zeroF32() { return constant(2, 0, b.getF32FloatAttr(0.0f)); }
  Value zeros(VectorType t, int64_t key) {
    TypedAttr a = t.getElementType().isF16()
                      ? DenseElementsAttr::get(t, b.getF16FloatAttr(0.0).getValue())
                      : DenseElementsAttr::get(t, b.getF32FloatAttr(0.0f).getValue());
    return constant(3, key, a);
  }

  // index / i32 arithmetic
  Value add(Value a, Value d) { return b.create<arith::AddIOp>(loc, a, d); }
  Value sub(Value a, Value d) { return b.create<arith::SubIOp>(loc, a, d); }
  Value mul(Value a, Value d) { return b.create<arith::MulIOp>(loc, a, d); }
  Value divu(Value a, Value d) { return b.create<arith::DivUIOp>(loc, a, d); }
  Value remu(Value a, Value d) { return b.create<arith::RemUIOp>(loc, a, d); }
  Value minu(Value a, Value d) { return b.create<arith::MinUIOp>(loc, a, d); }
  Value cmp(arith::CmpIPredicate p, Value a, Value d) {
    return b.create<arith::CmpIOp>(loc, p, a, d);
  }
  Value ult(Value a, Value d) { return cmp(arith::CmpIPredicate::ult, a, d); }
  Value select(Value cond, Value t, Value f) { return b.create<arith::SelectOp>(loc, cond, t, f); }
  Value andi(Value a, Value d) { return b.create<arith::AndIOp>(loc, a, d); }
  Value ori(Value a, Value d) { return b.create<arith::OrIOp>(loc, a, d); }
  Value shr(Value a, Value d) { return b.create<arith::ShRUIOp>(loc, a, d); }
  Value sar(Value a, Value d) { return b.create<arith::ShRSIOp>(loc, a, d); }
  Value shl(Value a, Value d) { return b.create<arith::ShLIOp>(loc, a, d); }
  /// (word >> shift) & mask, the shift left out when 0.
  Value bits(Value word, int64_t shift, int64_t mask) {
    Value x = shift ? shr(word, ci(shift)) : word;
    return andi(x, ci(mask));
  }
  // f32
  Value fmul(Value a, Value d) { return b.create<arith::MulFOp>(loc, a, d); }
  Value fsub(Value a, Value d) { return b.create<arith::SubFOp>(loc, a, d); }
  Value fadd(Value a, Value d) { return b.create<arith::AddFOp>(loc, a, d); }
  Value uitofp(Value a) { return b.create<arith::UIToFPOp>(loc, f32, a); }
  Value sitofp(Value a) { return b.create<arith::SIToFPOp>(loc, f32, a); }
  Value truncf(Value a) { return b.create<arith::TruncFOp>(loc, f16, a); }
  Value load(Value m, ValueRange ix) { return b.create<memref::LoadOp>(loc, m, ix); }
};

/// Builds `if (cond) { body() }` (no results) at the builder's insertion point.
template <typename Fn> void emitIf(Em &e, Value cond, Fn body) {
  auto op = e.b.create<scf::IfOp>(e.loc, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPoint(op.thenBlock()->getTerminator());
  body();
}

/// Builds `cond ? thenFn() : elseFn()` (the values each yields, of `types`).
template <typename Then, typename Else>
scf::IfOp emitIfElse(Em &e, TypeRange types, Value cond, Then thenFn, Else elseFn) {
  auto op = e.b.create<scf::IfOp>(e.loc, types, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPointToStart(op.thenBlock());
  SmallVector<Value> t = thenFn();
  e.b.create<scf::YieldOp>(e.loc, t);
  e.b.setInsertionPointToStart(op.elseBlock());
  SmallVector<Value> f = elseFn();
  e.b.create<scf::YieldOp>(e.loc, f);
  return op;
}

/// One thread's copy role: the chunk of a stage it moves (row `row` of the workgroup's,
/// f16 column `col8` of the row's window), `valid` when not every thread has one, the
/// row's byte offset `rs` (clamped in bounds) and `cnt` (8 halves, or 0 past N).
struct CopyRole {
  Value valid, row, col8, rs, cnt;
};

void emitSkinny(GemmTileOp op, const SkinnyGeometry &geo, gpu::GPUModuleOp gm) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  OpBuilder b(ctx);
  const BlockFormat &p = geo.fmt;
  const int64_t S = geo.stages, SB = p.sb, CW = p.chunks, STRIDE = p.stride;
  const int64_t W = geo.warps, ROWS = geo.rows, MT = geo.mTiles;
  const int64_t COLS = STRIDE / 2;
  const StringRef fmt = geo.type;
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto smemType = MemRefType::get({S * ROWS, COLS}, f16, MemRefLayoutAttrInterface{}, wg);
  auto v22h = VectorType::get({2, 2}, f16), v42h = VectorType::get({4, 2}, f16);
  auto v22f = VectorType::get({2, 2}, f32), v2h = VectorType::get({2}, f16);

  // The ring's global after the module's other globals; the kernel at its end.
  Operation *lastGlobal = nullptr;
  for (auto gl : gm.getOps<memref::GlobalOp>())
    lastGlobal = gl;
  if (lastGlobal)
    b.setInsertionPointAfter(lastGlobal);
  else
    b.setInsertionPointToStart(gm.getBody());
  const std::string smemName = "skinny_" + fmt.str();
  b.create<memref::GlobalOp>(loc, smemName, b.getStringAttr("private"), smemType, Attribute{},
                             false, b.getI64IntegerAttr(16));
  if (gm.getBody()->mightHaveTerminator())
    b.setInsertionPoint(gm.getBody()->getTerminator());
  else
    b.setInsertionPointToEnd(gm.getBody());
  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  auto fnType = b.getFunctionType({dyn(f32), dyn(f16), dyn(f32), dyn(f32), dyn(f32), i32, i32, i32, i32}, {});
  auto fn = b.create<gpu::GPUFuncOp>(loc, op.getSymName(), fnType);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(32 * W), 1, 1}));
  fn->setAttr("swz.grid", b.getStringAttr("ceil(N/" + std::to_string(ROWS) + "), 1, 1"));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  Value x = entry.getArgument(0), w = entry.getArgument(1), y = entry.getArgument(2),
        bias = entry.getArgument(3), resid = entry.getArgument(4);
  Value T = entry.getArgument(5), N = entry.getArgument(6), K = entry.getArgument(7),
        flags = entry.getArgument(8);

  Value sm = b.create<memref::GetGlobalOp>(loc, smemType, smemName);
  // mma_thread_ids: tid, bx, by, warp, lane; g = lane / 4, q = lane % 4.
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  (void)b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value warp = e.divu(tid, c(32));
  Value lane = e.remu(tid, c(32));
  Value g = e.divu(lane, c(4));
  Value q = e.remu(lane, c(4));
  Value Ni = b.create<arith::IndexCastOp>(loc, e.idx, N);
  Value Ki = b.create<arith::IndexCastOp>(loc, e.idx, K);
  Value Ti = b.create<arith::IndexCastOp>(loc, e.idx, T);
  Value nlast = e.sub(Ni, c(1));
  Value tlast = e.sub(Ti, c(1));
  // K % 256 == 0 (Q8_0 too: Codegen.cpp's kernelKey), so the stages are whole and the k16
  // steps are exactly gemm_f16's (its k tiles of 64, none zero-filled).
  Value nst = e.divu(Ki, c(256));
  Value rowbytes;
  if (fmt == "q8_0") {
    Value kb = e.divu(Ki, c(32));
    rowbytes = e.mul(kb, c(34));
  } else {
    Value kb = e.divu(Ki, c(256));
    rowbytes = e.mul(kb, c(SB));
  }
  Value n0 = e.mul(bx, c(ROWS));
  Value zf = e.zeros(v22f, 0), za = e.zeros(v42h, 1), zb = e.zeros(v22h, 2), z2 = e.zeros(v2h, 3);
  Value zx = e.zeroF32();

  // Copy roles: thread tid moves 16-byte chunks tid + 32 W i of a stage (row chunk / CW of
  // the workgroup's ROWS, chunk chunk % CW of that row's window). Rows past N copy nothing
  // (src-size 0: zero-filled) from a clamped in-bounds address.
  std::vector<CopyRole> copies;
  const int64_t total = ROWS * CW, threads = 32 * W;
  for (int64_t i = 0; i < (total + threads - 1) / threads; ++i) {
    Value ch = i ? e.add(tid, c(threads * i)) : tid;
    Value valid;
    if (threads * (i + 1) > total)
      valid = e.ult(ch, c(total));
    Value row = e.divu(ch, c(CW));
    Value col = e.remu(ch, c(CW));
    Value n = e.add(n0, row);
    Value nin = e.ult(n, Ni);
    Value nc = e.minu(n, nlast);
    Value rs = e.mul(nc, rowbytes);
    Value cnt = e.select(nin, c(8), c(0));
    Value col8 = e.mul(col, c(8));
    copies.push_back({valid, row, col8, rs, cnt});
  }

  // (aligned start of the stage's window in f16 units, the stage's offset in it in f16
  // units, none when the stages are aligned).
  auto window = [&](Value rs, Value kt) -> std::pair<Value, std::optional<Value>> {
    Value start = e.add(rs, e.mul(kt, c(SB)));
    if (p.aligned)
      return {e.divu(start, c(2)), std::nullopt};
    Value off = e.remu(start, c(16));
    Value a = e.sub(start, off);
    Value ws = e.divu(a, c(2));
    Value wo = e.divu(off, c(2));
    return {ws, wo};
  };
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  auto issue = [&](Value kt) {
    Value slot = e.remu(kt, c(S));
    Value srow0 = e.mul(slot, c(ROWS));
    for (const CopyRole &r : copies) {
      auto body = [&]() {
        Value ws = window(r.rs, kt).first;
        Value si = e.add(ws, r.col8);
        Value dr = e.add(srow0, r.row);
        b.create<nvgpu::DeviceAsyncCopyOp>(loc, tokenType, sm, ValueRange{dr, r.col8}, w,
                                           ValueRange{si}, b.getIndexAttr(8), r.cnt,
                                           b.getUnitAttr());
      };
      if (r.valid)
        emitIf(e, r.valid, body);
      else
        body();
    }
  };
  auto createGroup = [&]() {
    return b.create<nvgpu::DeviceAsyncCreateGroupOp>(loc, tokenType, ValueRange{}).getResult();
  };

  // Prologue: stages 0 .. S-2, a group each (possibly empty).
  Value lastGroup;
  for (int64_t s = 0; s < S - 1; ++s) {
    Value has = e.ult(c(s), nst);
    emitIf(e, has, [&]() { issue(c(s)); });
    lastGroup = createGroup();
  }

  // This thread's mma row: warp w's n8 tile, row g (B column g).
  Value wrow = e.mul(warp, c(8));
  Value mrow = e.add(wrow, g);
  Value mn = e.add(n0, mrow);
  Value mnc = e.minu(mn, nlast);
  Value mrs = e.mul(mnc, rowbytes);
  Value q2 = e.mul(q, c(2));
  // The x rows of m-tile m this thread feeds (A rows g and g + 8), clamped, with their
  // in-range flags, as element offsets t K.
  std::vector<std::array<std::pair<Value, Value>, 2>> xrows;
  for (int64_t m = 0; m < MT; ++m) {
    std::array<std::pair<Value, Value>, 2> pr;
    for (int64_t h = 0; h < 2; ++h) {
      Value t = 16 * m + 8 * h ? e.add(g, c(16 * m + 8 * h)) : g;
      Value tin = e.ult(t, Ti);
      Value tc = e.minu(t, tlast);
      pr[h] = {tin, e.mul(tc, Ki)};
    }
    xrows.push_back(pr);
  }

  // The K loop for a static number of m-tiles (1, 2, 4, ...): every k16 step of a stage
  // in one basic block, so ptxas overlaps one step's loads and dequantization with the
  // previous steps' mma.sync. Returns the accumulators.
  auto kloop = [&](int64_t mt) -> SmallVector<Value> {
    SmallVector<Value> init(mt, zf);
    auto loop = b.create<scf::ForOp>(loc, c(0), nst, c(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kt = loop.getInductionVar();
    b.create<nvgpu::DeviceAsyncWaitOp>(loc, lastGroup, b.getI32IntegerAttr(int32_t(S - 2)));
    b.create<gpu::BarrierOp>(loc);
    Value ktn = e.add(kt, c(S - 1));
    Value has = e.ult(ktn, nst);
    emitIf(e, has, [&]() { issue(ktn); });
    createGroup();
    Value slot = e.remu(kt, c(S));
    Value srow = e.add(e.mul(slot, c(ROWS)), mrow);
    std::optional<Value> off = window(mrs, kt).second;
    Value step0 = e.mul(kt, c(16));

    // The f16 column of byte `byte` (even) of this row's stage.
    auto colOf = [&](int64_t byte) { return off ? e.add(*off, c(byte / 2)) : c(byte / 2); };
    // The little-endian 16-bit word at byte `byte` of this row's stage, plus 2q with
    // `lane` (this thread's pair of B weights), zero-extended to i32.
    auto u16 = [&](int64_t byte, bool withLane = false) {
      Value col = colOf(byte);
      if (withLane)
        col = e.add(col, q);
      Value h = e.load(sm, ValueRange{srow, col});
      Value bi = b.create<arith::BitcastOp>(loc, e.i16, h);
      return b.create<arith::ExtUIOp>(loc, e.i32, bi).getResult();
    };
    auto f16at = [&](int64_t byte) {
      Value col = colOf(byte);
      Value h = e.load(sm, ValueRange{srow, col});
      return b.create<arith::ExtFOp>(loc, f32, h).getResult();
    };
    auto byteOf = [&](Value word, int64_t i, bool isSigned) {
      if (isSigned) { // bits 8i .. 8i+7 as a signed int8 in i32
        Value s = i < 3 ? e.shl(word, e.ci(24 - 8 * i)) : word;
        return e.sar(s, e.ci(24));
      }
      return e.bits(word, 8 * i, 0xFF);
    };
    auto pair = [&](Value h0, Value h1) {
      Value v = b.create<vector::InsertOp>(loc, h0, z2, ArrayRef<int64_t>{0});
      return b.create<vector::InsertOp>(loc, h1, v, ArrayRef<int64_t>{1}).getResult();
    };
    SmallVector<Value> acc(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());

    // k16 step j of this stage: B from the four f16 weights (k 2q, 2q+1, 2q+8, 2q+9 of
    // row g); A from x (rows g, g+8 of each live m-tile).
    auto mmaStep = [&](int64_t j, const SmallVector<Value> &bRegs) {
      Value st = j ? e.add(step0, c(j)) : step0;
      Value k0 = e.mul(st, c(16));
      Value p01 = pair(bRegs[0], bRegs[1]);
      Value bf = b.create<vector::InsertOp>(loc, p01, zb, ArrayRef<int64_t>{0});
      Value p23 = pair(bRegs[2], bRegs[3]);
      bf = b.create<vector::InsertOp>(loc, p23, bf, ArrayRef<int64_t>{1});
      Value kq = e.add(k0, q2);
      for (int64_t m = 0; m < mt; ++m) {
        // A registers: (row g, k), (row g + 8, k), (row g, k + 8), (row g + 8, k + 8).
        SmallVector<Value> regs;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t r = 0; r < 2; ++r) {
            auto [tin, trow] = xrows[m][r];
            Value kh = h ? e.add(kq, c(8 * h)) : kq;
            Value base = e.add(trow, kh);
            SmallVector<Value> vals;
            for (int64_t jj = 0; jj < 2; ++jj) {
              Value xi = jj ? e.add(base, c(jj)) : base;
              Value xv = e.load(x, ValueRange{xi});
              xv = e.select(tin, xv, zx);
              vals.push_back(e.truncf(xv));
            }
            regs.push_back(pair(vals[0], vals[1]));
          }
        Value a = za;
        for (int64_t i = 0; i < 4; ++i)
          a = b.create<vector::InsertOp>(loc, regs[i], a, ArrayRef<int64_t>{i});
        acc[m] = b.create<nvgpu::MmaSyncOp>(loc, a, bf, acc[m], ArrayRef<int64_t>{16, 8, 16});
      }
    };
    auto h16 = [&](Value v) { return e.truncf(v); };

    if (fmt == "q4_k") {
      // Element e of the super-block: group G = e / 64, l = e % 64, sub-block 2G + l / 32,
      // q = nibble l / 32 of qs[32G + l % 32]; x = (d * sc) * q - dmin * m (dequant_f16.mlir).
      Value d = f16at(0);
      Value dmin = f16at(2);
      SmallVector<Value> sw;
      for (int64_t i = 0; i < 6; ++i)
        sw.push_back(u16(4 + 2 * i));
      auto sbyte = [&](int64_t i) { return byteOf(sw[i / 2], i % 2, false); };
      auto scaleMin = [&](int64_t s) -> std::pair<Value, Value> {
        Value sc, mnv;
        if (s < 4) {
          sc = e.andi(sbyte(s), e.ci(63));
          mnv = e.andi(sbyte(s + 4), e.ci(63));
        } else {
          Value lo = e.andi(sbyte(s + 4), e.ci(15));
          Value hi = e.shl(e.shr(sbyte(s - 4), e.ci(6)), e.ci(4));
          sc = e.ori(lo, hi);
          Value mlo = e.shr(sbyte(s + 4), e.ci(4));
          Value mhi = e.shl(e.shr(sbyte(s), e.ci(6)), e.ci(4));
          mnv = e.ori(mlo, mhi);
        }
        Value scf_ = e.uitofp(sc);
        Value mnf = e.uitofp(mnv);
        Value ds = e.fmul(d, scf_);
        Value dm = e.fmul(dmin, mnf);
        return {ds, dm};
      };
      for (int64_t G = 0; G < 4; ++G) {
        auto lo = scaleMin(2 * G);
        auto hi = scaleMin(2 * G + 1);
        std::map<int64_t, SmallVector<Value>> steps;
        for (int64_t h = 0; h < 2; ++h) {
          Value v1 = u16(16 + 32 * G + 16 * h, true);
          Value v2 = u16(16 + 32 * G + 16 * h + 8, true);
          for (int64_t nib = 0; nib < 2; ++nib) {
            auto [d1, m1] = nib ? hi : lo;
            SmallVector<Value> ws;
            for (Value v : {v1, v2})
              for (int64_t bi = 0; bi < 2; ++bi) {
                Value qv = e.bits(v, 8 * bi + 4 * nib, 15);
                Value qf = e.uitofp(qv);
                ws.push_back(h16(e.fsub(e.fmul(d1, qf), m1)));
              }
            steps[4 * G + 2 * nib + h] = ws;
          }
        }
        for (auto &[j, ws] : steps)
          mmaStep(j, ws);
      }
    } else if (fmt == "q6_k") {
      // Element e: h = e / 128, r = e % 128, p = r / 32, l = r % 32; q = (nibble p / 2 of
      // ql[64h + l + 32(p % 2)]) | (bits 2p, 2p+1 of qh[32h + l]) << 4; x = d * scales[8h +
      // l / 16 + 2p] * (q - 32) (dequant_f16.mlir).
      Value d = f16at(208);
      for (int64_t h2 = 0; h2 < 2; ++h2) {
        std::map<int64_t, SmallVector<Value>> steps;
        for (int64_t s = 0; s < 2; ++s) {
          std::array<Value, 2> vh;
          for (int64_t i = 0; i < 2; ++i)
            vh[i] = u16(128 + 32 * h2 + 16 * s + 8 * i, true);
          std::array<std::array<Value, 2>, 2> vl;
          for (int64_t pp = 0; pp < 2; ++pp)
            for (int64_t i = 0; i < 2; ++i)
              vl[pp][i] = u16(64 * h2 + 32 * pp + 16 * s + 8 * i, true);
          for (int64_t p_ = 0; p_ < 4; ++p_) {
            Value sword = u16(192 + 8 * h2 + 2 * p_);
            Value sc = byteOf(sword, s, true);
            Value scf_ = e.sitofp(sc);
            Value ds = e.fmul(d, scf_);
            SmallVector<Value> ws;
            for (int64_t i = 0; i < 2; ++i)
              for (int64_t bi = 0; bi < 2; ++bi) {
                Value ql = e.bits(vl[p_ % 2][i], 8 * bi + 4 * (p_ / 2), 15);
                Value qh = e.bits(vh[i], 8 * bi + 2 * p_, 3);
                Value qv = e.ori(ql, e.shl(qh, e.ci(4)));
                Value qm = e.sub(qv, e.ci(32));
                Value qf = e.sitofp(qm);
                ws.push_back(h16(e.fmul(ds, qf)));
              }
            steps[8 * h2 + 2 * p_ + s] = ws;
          }
        }
        for (auto &[j, ws] : steps)
          mmaStep(j, ws);
      }
    } else { // q8_0: eight blocks of 34 bytes: d f16 | qs[32] int8; x = q * d
      for (int64_t blk = 0; blk < 8; ++blk) {
        Value d = f16at(34 * blk);
        for (int64_t s = 0; s < 2; ++s) {
          SmallVector<Value> ws;
          for (int64_t i = 0; i < 2; ++i) {
            Value v = u16(34 * blk + 2 + 16 * s + 8 * i, true);
            for (int64_t bi = 0; bi < 2; ++bi) {
              Value qv = byteOf(v, bi, true);
              Value qf = e.sitofp(qv);
              ws.push_back(h16(e.fmul(qf, d)));
            }
          }
          mmaStep(2 * blk + s, ws);
        }
      }
    }
    b.create<scf::YieldOp>(loc, acc);
    return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
  };

  // One loop per m-tile count (a uniform branch on T outside the loop): T <= 16, <= 32,
  // ... each power of two below m_tiles, else m_tiles.
  SmallVector<std::pair<Value, int64_t>> levels;
  for (int64_t mt = 1; mt < MT; mt *= 2)
    levels.push_back({e.cmp(arith::CmpIPredicate::ule, Ti, c(16 * mt)), mt});
  SmallVector<Type> v4(MT, v22f);
  auto yieldLoop = [&](int64_t mt) {
    SmallVector<Value> r = kloop(mt);
    r.append(MT - mt, zf);
    return r;
  };
  std::function<SmallVector<Value>(size_t)> choose = [&](size_t level) -> SmallVector<Value> {
    if (level == levels.size())
      return yieldLoop(MT);
    auto ifOp = emitIfElse(
        e, v4, levels[level].first, [&]() { return yieldLoop(levels[level].second); },
        [&]() { return choose(level + 1); });
    return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
  };
  SmallVector<Value> res = choose(0);
  b.create<nvgpu::DeviceAsyncWaitOp>(loc, lastGroup, b.getI32IntegerAttr(0));

  // Epilogue as gemm_f16's: y[t, n] = (acc + (bias[n] or 0.0)) (+ res[t, n] with flags
  // bit 1; res may be y), rows t < T and n < N only.
  Value useBias = e.cmp(arith::CmpIPredicate::ne, e.andi(flags, e.ci(1)), e.ci(0));
  Value useRes = e.cmp(arith::CmpIPredicate::ne, e.andi(flags, e.ci(2)), e.ci(0));
  struct Elem { Value v, bv, yi, ok; };
  SmallVector<Elem> elems;
  for (int64_t j = 0; j < 2; ++j) {
    Value qj = j ? e.add(q2, c(j)) : q2;
    Value n = e.add(n0, e.add(wrow, qj));
    Value nin = e.ult(n, Ni);
    Value nc = e.minu(n, nlast);
    Value bv = emitIfElse(
                   e, TypeRange{f32}, useBias,
                   [&]() { return SmallVector<Value>{e.load(bias, ValueRange{nc})}; },
                   [&]() { return SmallVector<Value>{zx}; })
                   .getResult(0);
    for (int64_t m = 0; m < MT; ++m)
      for (int64_t i = 0; i < 2; ++i) {
        Value t = 16 * m + 8 * i ? e.add(g, c(16 * m + 8 * i)) : g;
        Value tin = e.ult(t, Ti);
        elems.push_back({b.create<vector::ExtractOp>(loc, res[m], ArrayRef<int64_t>{i, j}), bv,
                         e.add(e.mul(t, Ni), n), e.andi(tin, nin)});
      }
  }
  // The residuals first, every load before any store (y may be res: gemm_f16's epilogue).
  SmallVector<Type> rt(elems.size(), f32);
  auto resIf = emitIfElse(
      e, rt, useRes,
      [&]() {
        SmallVector<Value> loaded;
        for (const Elem &el : elems)
          loaded.push_back(emitIfElse(
                               e, TypeRange{f32}, el.ok,
                               [&]() { return SmallVector<Value>{e.load(resid, ValueRange{el.yi})}; },
                               [&]() { return SmallVector<Value>{zx}; })
                               .getResult(0));
        return loaded;
      },
      [&]() { return SmallVector<Value>(elems.size(), zx); });
  for (size_t k = 0; k < elems.size(); ++k) {
    const Elem &el = elems[k];
    emitIf(e, el.ok, [&]() {
      Value sv = e.fadd(el.v, el.bv);
      Value out = b.create<arith::SelectOp>(loc, useRes, e.fadd(sv, resIf.getResult(unsigned(k))), sv);
      b.create<memref::StoreOp>(loc, out, y, ValueRange{el.yi});
    });
  }
  b.create<gpu::ReturnOp>(loc);
}

} // namespace

LogicalResult emitSkinnyGemmKernel(GemmTileOp op, gpu::GPUModuleOp gm) {
  FailureOr<SkinnyGeometry> g = skinnyGeometry(op);
  if (failed(g))
    return failure();
  emitSkinny(op, *g, gm);
  return success();
}

} // namespace swz
