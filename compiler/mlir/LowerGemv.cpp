//===- LowerGemv.cpp - the decode GEMVs and embedding lookups (swz-lower-tiles) ===//
//
// The kernels of `swz.gemv_tile`: the int8 GEMV (activations "q8x", PTX), the f32 GEMV
// (activations "f32", every target), F16's tensor-core GEMV (`mma`, PTX; emitF16MmaKernel
// describes it) and the embedding lookup (`lookup`).
//
// int8 (activations "q8x"): the decode GEMV of a
// few tokens against a GGUF weight read in its own blocks, on int8 activations
// (quantize_q8_x: blocks of 32 with their scale and sums), each unit's dot product PTX
// dp4a. matmul_<type>_q8x(w0, w1, w2, xq, xds, y0, y1, y2, bias0, bias1, bias2, res,
// N0, N1, N2, K, T, flags): up to three matrices of one input (merged q/k/v, gate/up),
// yo[t, n] = sum_k x[t, k] Wo[n, k] (+ biaso[n]) (+ res[t, n] on output 0); flags 1
// bias0, 2 res, 4 bias1, 8 bias2. gemv_q8x.mlir's header describes the block layouts.
//
// Geometry (the schedule's gemv.q8x.<type>, applied by swz-apply-schedule): a workgroup
// is 4 warps; warp w of workgroup b takes rows_per_warp (P) consecutive rows from
// 4 P b + P w, its output picked per row (rows [0, N0) -> 0, [N0, N0 + N1) -> 1, the rest
// -> 2); a lane takes the units lane, lane + 32, ... of its rows, units_in_flight of them
// with all their loads issued before any is used, each unit's activation loads shared by
// the P rows. grid.y covers the tokens in blocks of 8. One token accumulates in
// registers, 2..8 in each thread's own workgroup-memory slots; the reduction (8-lane
// shuffles, then (s0 + s1) + (s2 + s3)) adds the same terms in the same order either way,
// so a token's output has the same bits in any batch (speculative verification).
//
// f32 (activations "f32", gemv.f32.<type>): matmul_<type>(w, x, y, bias, res, N, K, T,
// flags), one matrix, one row a warp, units_in_flight units' loads a lane first, each unit
// (8 weights of a 32-weight block or F16, 16 of a k-quant super-block) dequantized once as
// ggml's dequantize_row_<type> and dotted with every token's x (T <= 8 a workgroup); the
// same slots and reduction as the int8 kernel, one row. get_rows_<type> (`lookup`, no
// schedule fields) writes the rows of W named by `tokens`, dequantized the same way.
//
// This is a port, op for op in the same order, of the generator that used to write the
// kernels into codegen/kernels/gemv_q8x.mlir, gemv_<type>.mlir and gemv_f16_mma.mlir as
// text (gen_quant_kernels.py: gemv_q8x, gemv, get_rows, dequant_unit, gemv_f16_mma), so
// the kernels and their PTX are the ones that file held (only the constants at the top of
// the entry block come in another order; the PTX for sm_80, sm_86, sm_89 and sm_90 is the
// same bytes, the SPIR-V the same but for the order of its constants). The shipped gemv.q8x values and the measurements behind them:
// docs/compiler-guide.md (the int8 path) and bench/RESULTS.md (bench/tune_q8x.sh runs).
//
//===----------------------------------------------------------------------===//
#include "compiler/mlir/LowerGemv.h"
#include "compiler/mlir/KernelEmitter.h"
#include "compiler/mlir/LowerAttention.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <vector>

using namespace mlir;

namespace swz {
namespace {

/// Tokens a workgroup covers (grid.y = ceil(T / 8)).
constexpr int64_t kTok = 8;

/// A block format's int8-path facts (ggml-common.h's block structs; not schedule choices):
/// weights a block (qk), units a block (one lane's share: a Q4_K / Q6_K 32-weight
/// sub-block, 16 Q8_0 weights, a Q4_1 / Q5_0 block), and for Q4_K the block's 16-byte
/// vectors (the weight is bound as memref<?xvector<4xi32>>; the others as memref<?xi32>).
struct Q8xFormat {
  int64_t qk = 0, units = 0, vecs = 0;
};

Q8xFormat q8xFormat(StringRef ty) {
  if (ty == "q4_k")
    return {256, 8, 9};
  if (ty == "q6_k")
    return {256, 8, 0};
  if (ty == "q8_0")
    return {32, 2, 0};
  return {32, 1, 0}; // q4_1, q5_0
}

/// A block format's f32-path facts (ggml-common.h): bytes and weights a block, units a
/// block (one lane's share: 8 weights of Q4_0 / Q4_1 / Q5_0 / Q8_0 blocks, 16 of a Q4_K or
/// Q6_K super-block's 256; F16's unit is 8 consecutive elements), and whether every block
/// starts on a 4-byte boundary (then a word is one load, else two and a funnel shift).
struct F32Format {
  int64_t bs = 0, qk = 0, units = 0;
  bool aligned = false;
};

F32Format f32Format(StringRef ty) {
  if (ty == "q4_0")
    return {18, 32, 4, false};
  if (ty == "q4_1")
    return {20, 32, 4, true};
  if (ty == "q5_0")
    return {22, 32, 4, false};
  if (ty == "q8_0")
    return {34, 32, 4, false};
  if (ty == "q4_k")
    return {144, 256, 16, true};
  if (ty == "q6_k")
    return {210, 256, 16, false};
  return {0, 8, 1, false}; // f16
}

/// The kernel's geometry from the scheduled op.
struct GemvGeometry {
  std::string type;
  bool q8x = false;  ///< activations "q8x" (else "f32")
  Q8xFormat fmt;     ///< q8x
  F32Format ffmt;    ///< f32
  int64_t rowsPerWarp = 0, unitsInFlight = 0, minCtas = 0;
};

FailureOr<GemvGeometry> gemvGeometry(GemvTileOp op) {
  if (!op.isScheduled())
    return op.emitError() << "swz-lower-tiles: @" << op.getSymName()
                          << " has no schedule (run swz-apply-schedule first)";
  GemvGeometry g;
  g.type = op.getWeights().str();
  g.q8x = op.getActivations() == "q8x";
  if (g.q8x)
    g.fmt = q8xFormat(g.type);
  else
    g.ffmt = f32Format(g.type);
  g.rowsPerWarp = op.getRowsPerWarpAttr().getInt();
  g.unitsInFlight = op.getUnitsInFlightAttr().getInt();
  g.minCtas = op.getMinCtasPerSmAttr() ? op.getMinCtasPerSmAttr().getInt() : 0;
  return g; // (the verifier bounds the fields: rows_per_warp 1 for f32, at most 8)
}

/// Emitter arithmetic plus the block-format helpers of gen_quant_kernels.py's Emitter.
struct Em : KernelEmitter {
  using KernelEmitter::KernelEmitter;

  /// f16 bits in the low (or upper) half of an i32 word, as f32 (exact).
  Value half(Value word, bool upper) {
    if (upper)
      word = shr(word, ci(16));
    Value t = b.create<arith::TruncIOp>(loc, i16, word);
    Value h = b.create<arith::BitcastOp>(loc, f16, t);
    return b.create<arith::ExtFOp>(loc, f32, h);
  }
  /// A small non-negative integer (< 2^23) to f32, exactly: 2^23 + q has q in the
  /// mantissa, so an OR and a subtraction instead of a conversion.
  Value u2f(Value q) {
    Value o = ori(q, ci(0x4B000000));
    Value f = b.create<arith::BitcastOp>(loc, f32, o);
    return fsub(f, cf(8388608.0f));
  }
  /// The little-endian 32-bit word at byte offset `byte` (index; even) of w
  /// (memref<?xi32>) for a format whose blocks start on 2-byte boundaries: hi is the next
  /// word when the offset is 2 mod 4 and the same word otherwise (never out of bounds).
  Value word(Value byte, Value w, bool aligned = false) {
    Value wi = shr(byte, c(2));
    Value lo = load(w, wi);
    if (aligned)
      return lo;
    Value b2 = add(byte, c(2));
    Value hiI = shr(b2, c(2));
    Value hi = load(w, hiI);
    Value bi = toI32(byte);
    Value odd = andi(bi, ci(2));
    Value sh = shl(odd, ci(3));
    Value loS = shr(lo, sh);
    Value rest = sub(ci(16), sh);
    Value hi16 = shl(hi, ci(16));
    Value hiS = shl(hi16, rest);
    return ori(loS, hiS);
  }
  /// (word >> shift) & mask, the shift left out when 0.
  Value bits(Value word, int64_t shift, int64_t mask) {
    Value x = shift ? shr(word, ci(shift)) : word;
    return andi(x, ci(mask));
  }
  /// The low or high nibble of byte `byte` (0..3) of a word.
  Value nib(Value word, int64_t byte, bool high) { return bits(word, 8 * byte + (high ? 4 : 0), 15); }
  Value xori(Value a, Value d) { return b.create<arith::XOrIOp>(loc, a, d); }
  Value negf(Value a) { return b.create<arith::NegFOp>(loc, a); }
  /// `count` little-endian 32-bit words from byte offset `byte` (index, even) of w
  /// (memref<?xi32>): count + 1 aligned loads and a funnel shift when byte is 2 mod 4.
  /// tailInside: the aligned word after the last lies inside the tensor; else the last
  /// load is that word only when the run straddles it (a run may end the tensor).
  std::vector<Value> wordsAt(Value w, Value byte, int64_t count, bool tailInside = true) {
    Value wi = shr(byte, c(2));
    Value bi = toI32(byte);
    Value two = andi(bi, ci(2));
    Value odd = cmp(arith::CmpIPredicate::ne, two, ci(0));
    std::vector<Value> idx;
    for (int64_t i = 0; i <= count; ++i)
      idx.push_back(i ? add(wi, c(i)) : wi);
    if (!tailInside)
      idx[count] = select(odd, idx[count], idx[count - 1]);
    std::vector<Value> raw;
    for (Value i : idx)
      raw.push_back(load(w, i));
    std::vector<Value> out;
    for (int64_t i = 0; i < count; ++i) {
      Value lo = shr(raw[i], ci(16));
      Value hi = shl(raw[i + 1], ci(16));
      Value fun = ori(lo, hi);
      out.push_back(select(odd, fun, raw[i]));
    }
    return out;
  }
  /// The 16 bits at byte offset `byte` (index, even) of w (memref<?xi32>) in the low half
  /// of an i32 (the upper half: what follows, or 0): one load of the aligned word holding
  /// them (weights are zero-padded to whole words; the runtime pads to 16 bytes).
  Value halfAt(Value w, Value byte) {
    Value wi = shr(byte, c(2));
    Value wd = load(w, wi);
    Value bi = toI32(byte);
    Value two = andi(bi, ci(2));
    Value sh = shl(two, ci(3));
    return shr(wd, sh);
  }
  /// acc + the sum of the four int8 products of a and d (d signed; a unsigned bytes when
  /// aUnsigned): PTX dp4a as inline assembly (MLIR 19 has no NVVM op for it).
  Value dp4a(Value a, Value d, Value acc, bool aUnsigned) {
    const char *text = aUnsigned ? "dp4a.u32.s32 $0, $1, $2, $3;" : "dp4a.s32.s32 $0, $1, $2, $3;";
    return b.create<LLVM::InlineAsmOp>(loc, i32, ValueRange{a, d, acc}, text, "=r,r,r,r",
                                       /*has_side_effects=*/false, /*is_align_stack=*/false,
                                       LLVM::AsmDialectAttr{}, ArrayAttr{})
        .getResult(0);
  }
  /// v plus its partners' values by gpu.shuffle xor at each offset in turn (width 32).
  Value shuffleXorSum(Value v, ArrayRef<int64_t> offsets) {
    for (int64_t off : offsets) {
      Value sh = b.create<gpu::ShuffleOp>(loc, f32, b.getI1Type(), v, ci(off), ci(32),
                                          gpu::ShuffleMode::XOR)
                     .getShuffleResult();
      v = fadd(v, sh);
    }
    return v;
  }
  /// `cond ? the segment sum of v (shuffles xor 4, 2, 1) : 0` (a token j > 0 of the block:
  /// only while it is one of the block's tokens).
  Value segmentSumIf(Value cond, Value v) {
    auto op = b.create<scf::IfOp>(loc, TypeRange{f32}, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    b.create<scf::YieldOp>(loc, shuffleXorSum(v, {4, 2, 1}));
    b.setInsertionPointToStart(op.elseBlock());
    b.create<scf::YieldOp>(loc, cf(0.0f));
    return op.getResult(0);
  }
  /// The GEMVs' epilogue term: `flags & flag ? base + ref[i] : base` (bias or residual).
  Value addIfFlag(Value flags, Value flag, Value base, Value ref, Value i) {
    Value bits = andi(flags, flag);
    Value cond = cmp(arith::CmpIPredicate::ne, bits, ci(0));
    return addIf(cond, base, ref, i);
  }
  /// `cond ? base + ref[i] : base`.
  Value addIf(Value cond, Value base, Value ref, Value i) {
    auto op = b.create<scf::IfOp>(loc, TypeRange{f32}, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(op.thenBlock());
    Value v = load(ref, i);
    b.create<scf::YieldOp>(loc, fadd(base, v));
    b.setInsertionPointToStart(op.elseBlock());
    b.create<scf::YieldOp>(loc, base);
    return op.getResult(0);
  }
  /// block_q4_K's scale and min of sub-block j (i32, 0..7) from the header words s0, s1,
  /// s2 (scales[0..11]; get_scale_min_k4 of ggml-quants.c): (d sc, dmin m) as f32.
  std::pair<Value, Value> q4kScale(Value d, Value dmin, Value s0, Value s1, Value s2, Value j) {
    Value small = ult(j, ci(4));
    Value j3 = andi(j, ci(3));
    Value sh = shl(j3, ci(3));
    auto byteOf = [&](Value s) {
      Value x = shr(s, sh);
      return andi(x, ci(255));
    };
    Value b0 = byteOf(s0), b1 = byteOf(s1);
    Value b2 = byteOf(s2);
    Value b2lo = andi(b2, ci(15));
    Value b0hi = shr(b0, ci(6));
    Value b0hiS = shl(b0hi, ci(4));
    Value scHi = ori(b2lo, b0hiS);
    Value b2hi = shr(b2, ci(4));
    Value b1hi = shr(b1, ci(6));
    Value b1hiS = shl(b1hi, ci(4));
    Value mHi = ori(b2hi, b1hiS);
    Value sc = select(small, andi(b0, ci(63)), scHi);
    Value m = select(small, andi(b1, ci(63)), mHi);
    Value scf = u2f(sc);
    Value scale = fmul(d, scf);
    Value mf = u2f(m);
    return {scale, fmul(dmin, mf)};
  }
};

/// A unit's int8 activations of one token (q8x_acts): the activation vector(s) and the
/// block's (d, d sum lo, d sum hi) where the format uses them.
struct Acts {
  std::array<Value, 2> xv;
  Value dx, sLo, sHi;
};

/// One row's weight loads for unit (b, q); dot(act) emits the unit's dp4a sums with the
/// activations `act` and returns the f32 contribution.
using Dot = std::function<Value(const Acts &)>;

Dot q8xWeights(Em &e, StringRef fmt, Value b, Value q, Value w, Value rowbase) {
  auto c = [&](int64_t v) { return e.c(v); };
  if (fmt == "q4_k") {
    // Unit r of block b: sub-block r = 2p + jj, the low (jj = 0) or high (jj = 1) nibbles
    // of the 32-byte qs chunk p. The two lanes of a chunk load the same weight bytes (one
    // access), each lane its sub-block's 32 int8 activations.
    Value bm = e.mul(b, c(9));
    Value vb = e.add(rowbase, bm);
    Value hdr = e.load(w, vb);
    Value p = e.divu(q, c(2));
    Value vb1 = e.add(vb, c(1));
    Value p2 = e.mul(p, c(2));
    Value qb = e.add(vb1, p2);
    Value qv0 = e.load(w, qb);
    Value qb1 = e.add(qb, c(1));
    Value qv1 = e.load(w, qb1);
    return [&e, hdr, q, qv0, qv1](const Acts &a) {
      std::array<Value, 4> hw;
      for (int64_t i = 0; i < 4; ++i)
        hw[i] = e.extract(hdr, i);
      Value j = e.toI32(q);
      Value d = e.half(hw[0], false);
      Value dmin = e.half(hw[0], true);
      auto [scale, mins] = e.q4kScale(d, dmin, hw[1], hw[2], hw[3], j);
      Value j1 = e.andi(j, e.ci(1));
      Value nsh = e.shl(j1, e.ci(2)); // 0: low nibbles, 4: high
      Value acc = e.ci(0);
      const std::array<Value, 2> qv{qv0, qv1};
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 4; ++i) {
          Value wd = e.extract(qv[h], i);
          Value xw = e.extract(a.xv[h], i);
          Value s = e.shr(wd, nsh);
          Value nib = e.andi(s, e.ci(0x0F0F0F0F));
          acc = e.dp4a(nib, xw, acc, true);
        }
      Value accf = e.sitofp(acc);
      Value sd = e.fmul(scale, a.dx);
      Value t = e.fmul(sd, accf);
      Value sums = e.fadd(a.sLo, a.sHi);
      Value mt = e.fmul(mins, sums);
      return e.fsub(t, mt);
    };
  }
  if (fmt == "q4_1") {
    // Unit: block b, 20 bytes (4-byte aligned): word 0 = d | m (f16 each), words 1..4 =
    // qs; weight j < 16 the low nibble of qs[j], j + 16 the high one; value d q + m.
    Value rb = e.add(rowbase, b);
    Value wb = e.mul(rb, c(5));
    std::array<Value, 5> words;
    for (int64_t i = 0; i < 5; ++i) {
      Value at = i ? e.add(wb, c(i)) : wb;
      words[i] = e.load(w, at);
    }
    Value d = e.half(words[0], false);
    Value m = e.half(words[0], true);
    return [&e, words, d, m](const Acts &a) {
      Value acc = e.ci(0);
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t i = 0; i < 4; ++i) {
          Value wd = words[1 + i];
          Value src = half ? e.shr(wd, e.ci(4)) : wd;
          Value nib = e.andi(src, e.ci(0x0F0F0F0F));
          Value xw = e.extract(a.xv[half], i);
          acc = e.dp4a(nib, xw, acc, true);
        }
      Value accf = e.sitofp(acc);
      Value xa = e.fmul(a.dx, accf);
      Value dt = e.fmul(d, xa);
      Value sums = e.fadd(a.sLo, a.sHi);
      Value mt = e.fmul(m, sums);
      return e.fadd(dt, mt);
    };
  }
  if (fmt == "q5_0") {
    // Unit: block b, 22 bytes (2-byte aligned): d f16 | qh (bit j: 5th bit of weight j) |
    // qs[16]; value d (q - 16). The 5th bits spread into bit 4 of each byte as llama.cpp's
    // vec_dot_q5_0_q8_1 does.
    Value rb = e.add(rowbase, b);
    Value bb = e.mul(rb, c(22));
    Value d = e.half(e.halfAt(w, bb), false);
    Value qhByte = e.add(bb, c(2));
    Value qh = e.word(qhByte, w);
    Value qsByte = e.add(bb, c(6));
    std::vector<Value> qs = e.wordsAt(w, qsByte, 4, /*tailInside=*/false);
    std::array<Value, 8> vals;
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < 4; ++i) {
        Value src = half ? e.shr(qs[i], e.ci(4)) : qs[i];
        Value v = e.andi(src, e.ci(0x0F0F0F0F));
        const int64_t s = 4 * i + 16 * half;
        Value h = s ? e.shr(qh, e.ci(s)) : qh;
        for (auto [sh, mask] : {std::pair<int64_t, int64_t>{4, 0x10}, {11, 0x1000}, {18, 0x100000},
                                {25, 0x10000000}}) {
          Value hs = e.shl(h, e.ci(sh));
          Value hm = e.andi(hs, e.ci(mask));
          v = e.ori(v, hm);
        }
        vals[4 * half + i] = v;
      }
    return [&e, vals, d](const Acts &a) {
      Value acc = e.ci(0);
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t i = 0; i < 4; ++i) {
          Value xw = e.extract(a.xv[half], i);
          acc = e.dp4a(vals[4 * half + i], xw, acc, true);
        }
      Value accf = e.sitofp(acc);
      Value xa = e.fmul(a.dx, accf);
      Value sums = e.fadd(a.sLo, a.sHi);
      Value off = e.fmul(e.cf(16.0f), sums);
      Value diff = e.fsub(xa, off);
      return e.fmul(d, diff);
    };
  }
  if (fmt == "q6_k") {
    // Unit q = 4 h + k of block b: the 32 weights 128 h + 32 k .. + 31 (one activation
    // block; dequantize_row_q6_K of ggml-quants.c): low 4 bits from ql[64 h + 32 (k & 1)
    // ..] (low nibbles for k < 2, high ones after), high 2 bits from qh[32 h ..] >> 2 k,
    // scales[8 h + 2 k] for weights 0..15 and scales[8 h + 2 k + 1] for 16..31, value
    // d sc (q - 32). Blocks are 210 bytes (2-byte aligned): funnel-shifted words.
    Value h = e.divu(q, c(4));
    Value k = e.remu(q, c(4));
    Value rb = e.add(rowbase, b);
    Value blockbyte = e.mul(rb, c(210));
    Value k1 = e.andi(k, c(1));
    Value kodd = e.mul(k1, c(32));
    Value h64 = e.mul(h, c(64));
    Value qlOff = e.add(h64, kodd);
    Value qlByte = e.add(blockbyte, qlOff);
    std::vector<Value> ql = e.wordsAt(w, qlByte, 8);
    Value h32 = e.mul(h, c(32));
    Value qhOff = e.add(h32, c(128));
    Value qhByte = e.add(blockbyte, qhOff);
    std::vector<Value> qh = e.wordsAt(w, qhByte, 8);
    Value h8 = e.mul(h, c(8));
    Value k2 = e.mul(k, c(2));
    Value scOff0 = e.add(h8, k2);
    Value scOff = e.add(scOff0, c(192));
    Value scByte = e.add(blockbyte, scOff);
    Value scw = e.halfAt(w, scByte);
    Value dByte = e.add(blockbyte, c(208));
    Value d = e.half(e.halfAt(w, dByte), false);
    Value ki = e.toI32(k);
    Value kh = e.shr(ki, e.ci(1));
    Value nsh = e.shl(kh, e.ci(2)); // 0 (k < 2) or 4
    Value hsh = e.shl(ki, e.ci(1));
    std::array<Value, 8> qs;
    for (int64_t i = 0; i < 8; ++i) {
      Value l = e.shr(ql[i], nsh);
      Value lo = e.andi(l, e.ci(0x0F0F0F0F));
      Value hh = e.shr(qh[i], hsh);
      Value hm = e.andi(hh, e.ci(0x03030303));
      Value hi = e.shl(hm, e.ci(4));
      qs[i] = e.ori(lo, hi);
    }
    std::array<Value, 2> sc;
    for (int64_t i = 0; i < 2; ++i) {
      Value up = e.shl(scw, e.ci(24 - 8 * i));
      Value s = e.sar(up, e.ci(24));
      sc[i] = e.sitofp(s);
    }
    return [&e, qs, sc, d](const Acts &a) {
      std::array<Value, 2> terms;
      for (int64_t half = 0; half < 2; ++half) {
        const Value sx = half ? a.sHi : a.sLo;
        Value acc = e.ci(0);
        for (int64_t i = 0; i < 4; ++i) {
          Value xw = e.extract(a.xv[half], i);
          acc = e.dp4a(qs[4 * half + i], xw, acc, true);
        }
        Value accf = e.sitofp(acc);
        // sc (dx sum(q xq) - 32 dx sum(xq)): the -32 offset through the block's sums.
        Value xa = e.fmul(a.dx, accf);
        Value off = e.fmul(e.cf(32.0f), sx);
        Value diff = e.fsub(xa, off);
        terms[half] = e.fmul(sc[half], diff);
      }
      Value sum = e.fadd(terms[0], terms[1]);
      return e.fmul(d, sum);
    };
  }
  // q8_0. Unit q of block b: weights 16q .. 16q+15 (qs bytes 2 + 16q ..), 4 words from 5
  // aligned loads and a funnel shift when the block is 2 mod 4 (the fifth only when the
  // unit straddles it: a block ending on a word boundary may end the tensor).
  Value rb = e.add(rowbase, b);
  Value blockbyte = e.mul(rb, c(34));
  Value d = e.half(e.word(blockbyte, w), false);
  Value q16 = e.mul(q, c(16));
  Value qOff = e.add(q16, c(2));
  Value qByte = e.add(blockbyte, qOff);
  std::vector<Value> words = e.wordsAt(w, qByte, 4, /*tailInside=*/false);
  return [&e, words, d](const Acts &a) {
    Value acc = e.ci(0);
    for (int64_t i = 0; i < 4; ++i) {
      Value xw = e.extract(a.xv[0], i);
      acc = e.dp4a(words[i], xw, acc, false);
    }
    Value accf = e.sitofp(acc);
    Value ddx = e.fmul(d, a.dx);
    return e.fmul(ddx, accf);
  };
}

/// The int8 activations unit (b, q) dots with, of token tg (index); every row of the warp
/// uses them.
Acts q8xActs(Em &e, StringRef fmt, int64_t units, Value xq, Value xds, Value k32, Value b,
             Value q, Value tg) {
  auto c = [&](int64_t v) { return e.c(v); };
  Acts a;
  if (fmt != "q8_0") { // unit q of block b: activation block units b + q
    Value tk = e.mul(tg, k32);
    Value off = b;
    if (units > 1) {
      Value bu = e.mul(b, c(units));
      off = e.add(bu, q);
    }
    Value sb = e.add(tk, off);
    Value s2 = e.mul(sb, c(2));
    a.xv[0] = e.load(xq, s2);
    Value s21 = e.add(s2, c(1));
    a.xv[1] = e.load(xq, s21);
    Value ds = e.load(xds, sb);
    a.dx = e.extract(ds, 0);
    a.sLo = e.extract(ds, 1);
    a.sHi = e.extract(ds, 2);
    return a;
  }
  Value tk = e.mul(tg, k32);
  Value blk = e.add(tk, b);
  Value b2 = e.mul(blk, c(2));
  Value at = e.add(b2, q);
  a.xv[0] = e.load(xq, at);
  Value ds = e.load(xds, blk);
  a.dx = e.extract(ds, 0);
  return a;
}

/// Units u, u + 32, ..., u + 32 (R - 1) of a lane, each with `load(unit)`'s loads issued
/// before any of them is used: (whether the unit lies inside the row, its loads) a unit;
/// the first is always inside (no condition), a unit past the row loads unit u again
/// (cached) and the caller selects its contribution away.
template <typename Load>
auto unitsInFlight(Em &e, Value u, int64_t R, Value units, Load load) {
  std::vector<std::pair<Value, decltype(load(u))>> us;
  for (int64_t r = 0; r < R; ++r) {
    if (r == 0) {
      us.push_back({Value{}, load(u)});
      continue;
    }
    Value ur = e.add(u, e.c(32 * r));
    Value vr = e.ult(ur, units);
    Value uc = e.select(vr, ur, u);
    us.push_back({vr, load(uc)});
  }
  return us;
}

/// One of the warp's rows: live (inside N0 + N1 + N2), in0 / in1 (its output), its
/// weight memref, local row n, first element of its weight (rowbase), and its output's
/// y, bias, row count and flag bits (selected after the loop).
struct Row {
  Value live, in0, in1, w, n, rowbase;
  Value y, bias, ni, bflag, rflag;
};

/// Writes the kernel of `op` (geometry `g`) at `b`'s insertion point in a gpu.module: the
/// globals @acc_<type> and @slots_<type>, then `gpu.func @<name>`.
void emitGemvKernel(GemvTileOp op, const GemvGeometry &g, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  const int64_t P = g.rowsPerWarp, R = g.unitsInFlight, NA = P * kTok;
  const int64_t rowsWg = 4 * P, units = g.fmt.units;
  const StringRef fmt = g.type;
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), idx = b.getIndexType(), i1 = b.getI1Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto accType = MemRefType::get({128 * P}, f32, MemRefLayoutAttrInterface{}, wg);
  auto slotsType = MemRefType::get({1024 * P}, f32, MemRefLayoutAttrInterface{}, wg);
  const std::string accName = "acc_" + g.type, slotsName = "slots_" + g.type;
  b.create<memref::GlobalOp>(loc, accName, b.getStringAttr("private"), accType, Attribute{},
                             false, IntegerAttr{});
  b.create<memref::GlobalOp>(loc, slotsName, b.getStringAttr("private"), slotsType, Attribute{},
                             false, IntegerAttr{});

  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  const Type ivec = dyn(VectorType::get({4}, i32)), xvec = dyn(VectorType::get({4}, f32));
  const Type wq = g.fmt.vecs ? ivec : dyn(i32), yty = dyn(f32);
  auto fnType = b.getFunctionType({wq, wq, wq, ivec, xvec, yty, yty, yty, yty, yty, yty, yty, i32,
                                   i32, i32, i32, i32, i32},
                                  {});
  // nvvm.minctasm: without it the driver's JIT took 122 registers for the Q4_K kernel, 4
  // workgroups an SM, so a 7B Q/O projection (896 workgroups) ran in two waves on the
  // H200's 132 SMs.
  auto fn = createKernel(b, loc, op.getSymName(), fnType, 128,
                         "ceil((N0+N1+N2)/" + std::to_string(rowsWg) + "), ceil(T/8), 1", g.minCtas);

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  using IP = arith::CmpIPredicate;
  std::array<Value, 3> w, y, bias;
  for (int k = 0; k < 3; ++k) {
    w[k] = entry.getArgument(k);
    y[k] = entry.getArgument(5 + k);
    bias[k] = entry.getArgument(8 + k);
  }
  Value xq = entry.getArgument(3), xds = entry.getArgument(4), res = entry.getArgument(11);
  Value argK = entry.getArgument(15), argT = entry.getArgument(16), flags = entry.getArgument(17);

  Value acc = b.create<memref::GetGlobalOp>(loc, accType, accName);
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value by = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value grp = e.divu(tid, c(32));
  Value lane = e.remu(tid, c(32));
  Value rowwg = e.mul(bx, c(rowsWg));
  Value rowgrp = e.mul(grp, c(P));
  Value row0 = e.add(rowwg, rowgrp);
  std::array<Value, 3> ni;
  for (int k = 0; k < 3; ++k)
    ni[k] = e.toIndex(entry.getArgument(12 + k));
  Value n01 = e.add(ni[0], ni[1]);
  Value ntot = e.add(n01, ni[2]);
  Value ki = e.toIndex(argK);
  Value ti = e.toIndex(argT);
  Value t0 = e.mul(by, c(kTok));
  Value tleft = e.sub(ti, t0);
  Value tb = e.minu(tleft, c(kTok));
  Value nb = e.divu(ki, c(g.fmt.qk));
  Value unitsAll = e.mul(nb, c(units));
  Value k32 = e.divu(ki, c(32));
  Value rowstride = g.fmt.vecs ? e.mul(nb, c(g.fmt.vecs)) : nb; // rowbase in vectors / blocks

  // The warp's rows r = 0..P-1: global row ng_r picks its output, whose weight the warp
  // loads with local row n_r; y, bias, row count and flags are selected after the loop
  // (no registers across it). A row past the last (live false) reads the warp's first
  // row again and writes nothing; a warp whose first row is past the last has no units.
  std::vector<Row> rows(P);
  for (int64_t r = 0; r < P; ++r) {
    Row &rw = rows[r];
    Value ng = r == 0 ? row0 : e.add(row0, c(r));
    rw.live = e.ult(ng, ntot);
    Value ngc = r == 0 ? ng : e.select(rw.live, ng, row0);
    rw.in0 = e.ult(ngc, ni[0]);
    rw.in1 = e.ult(ngc, n01);
    Value w12 = e.select(rw.in1, w[1], w[2]);
    rw.w = e.select(rw.in0, w[0], w12);
    Value nb12 = e.select(rw.in1, ni[0], n01);
    Value nbase = e.select(rw.in0, c(0), nb12);
    rw.n = e.sub(ngc, nbase);
    rw.rowbase = e.mul(rw.n, rowstride);
  }
  Value unitsLive = e.select(rows[0].live, unitsAll, c(0));
  // Token j < tb of the block (uniform over the block; token 0 always is).
  std::array<Value, kTok> tok;
  for (int64_t j = 1; j < kTok; ++j)
    tok[j] = e.ult(c(j), tb);
  Value zero = e.cf(0.0f);

  // Unit u's weight loads for every row; contrib(tg): the activation loads of token tg and
  // each row's f32 contribution.
  using Contrib = std::function<std::vector<Value>(Value)>;
  auto unit = [&](Value u) -> Contrib {
    Value ub = e.divu(u, c(units));
    Value uq = e.remu(u, c(units));
    std::vector<Dot> dots;
    for (const Row &rw : rows)
      dots.push_back(q8xWeights(e, fmt, ub, uq, rw.w, rw.rowbase));
    return [&e, fmt, units, xq, xds, k32, ub, uq, dots](Value tg) {
      Acts a = q8xActs(e, fmt, units, xq, xds, k32, ub, uq, tg);
      std::vector<Value> out;
      for (const Dot &dot : dots)
        out.push_back(dot(a));
      return out;
    };
  };

  // Per-thread partial sums of (row, token), accR[r * 8 + t] (0 for t >= tb). One token
  // (decode): register accumulators. More (speculative verification, batches): one
  // workgroup-memory slot per (row, token, thread), read and written by its thread only
  // (no barrier), so the register count stays that of one token.
  const SmallVector<Type> naTypes(NA, f32), pTypes(P, f32);
  Value one = e.cmp(IP::eq, tb, c(1));
  auto ifAcc = b.create<scf::IfOp>(loc, naTypes, one, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifAcc.thenBlock());
    const SmallVector<Value> inits(P, zero);
    auto loop = b.create<scf::ForOp>(loc, lane, unitsLive, c(32 * R), inits);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(loop.getBody());
      Value u = loop.getInductionVar();
      auto us = unitsInFlight(e, u, R, unitsLive, unit);
      SmallVector<Value> accs(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
      for (auto &[vk, contrib] : us) {
        std::vector<Value> cs = contrib(t0);
        for (int64_t r = 0; r < P; ++r) {
          Value cr = cs[r];
          if (vk)
            cr = e.select(vk, cr, zero);
          accs[r] = e.fadd(accs[r], cr);
        }
      }
      b.create<scf::YieldOp>(loc, accs);
    }
    SmallVector<Value> outs;
    for (int64_t r = 0; r < P; ++r)
      for (int64_t t = 0; t < kTok; ++t)
        outs.push_back(t == 0 ? loop.getResult(r) : zero);
    b.create<scf::YieldOp>(loc, outs);

    b.setInsertionPointToStart(ifAcc.elseBlock());
    Value slots = b.create<memref::GetGlobalOp>(loc, slotsType, slotsName);
    auto clear = b.create<scf::ForOp>(loc, c(0), c(P * kTok), c(1));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(clear.getBody()->getTerminator());
      Value s = e.mul(clear.getInductionVar(), c(128));
      Value si = e.add(s, tid);
      e.store(zero, slots, si);
    }
    auto uloop = b.create<scf::ForOp>(loc, lane, unitsLive, c(32));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(uloop.getBody()->getTerminator());
      Contrib contrib = unit(uloop.getInductionVar());
      auto tloop = b.create<scf::ForOp>(loc, c(0), tb, c(1));
      b.setInsertionPoint(tloop.getBody()->getTerminator());
      Value t = tloop.getInductionVar();
      Value tg = e.add(t0, t);
      std::vector<Value> cs = contrib(tg);
      for (int64_t r = 0; r < P; ++r) {
        Value tr = r ? e.add(t, c(kTok * r)) : t;
        Value tr128 = e.mul(tr, c(128));
        Value slot = e.add(tr128, tid);
        Value old = e.load(slots, slot);
        Value sum = e.fadd(old, cs[r]);
        e.store(sum, slots, slot);
      }
    }
    SmallVector<Value> sv;
    for (int64_t j = 0; j < NA; ++j) {
      Value at = j ? e.add(tid, c(128 * j)) : tid;
      sv.push_back(e.load(slots, at));
    }
    b.create<scf::YieldOp>(loc, sv);
  }
  ResultRange accR = ifAcc.getResults();

  // Each row's output: its y, bias, row count and flags (selected here, after the loop, at
  // the top level: a memref value must not cross the blocks scf.if lowers to).
  for (Row &rw : rows) {
    auto pick = [&](Value a0, Value a1, Value a2) {
      Value v12 = e.select(rw.in1, a1, a2);
      return e.select(rw.in0, a0, v12);
    };
    rw.y = pick(y[0], y[1], y[2]);
    rw.bias = pick(bias[0], bias[1], bias[2]);
    rw.ni = pick(ni[0], ni[1], ni[2]);
    rw.bflag = pick(e.ci(1), e.ci(4), e.ci(8));
    rw.rflag = pick(e.ci(2), e.ci(0), e.ci(0));
  }

  // The reduction: each 8-lane segment's partials by shuffle-xor 4, 2, 1, then the four
  // segment sums as (s0 + s1) + (s2 + s3), the same additions in the same order for one
  // token and for many. One token: shuffles xor 8 and 16, lane 0 writes (no workgroup
  // memory, no barrier). 2..8 tokens: segment leaders store acc[(grp P + r) 32 + 4 t +
  // seg]; after the barrier lane t < tb sums token t0 + t's four (lanes past 7 read token
  // 7's and write nothing). Both branches yield each row's total, the token and whether
  // this lane writes it; one write follows.
  SmallVector<Type> finTypes(P, f32);
  finTypes.push_back(idx);
  finTypes.append(P, i1);
  Value lane0 = e.cmp(IP::eq, lane, c(0));
  auto fin = b.create<scf::IfOp>(loc, finTypes, one, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(fin.thenBlock());
    SmallVector<Value> out;
    for (int64_t r = 0; r < P; ++r)
      out.push_back(e.shuffleXorSum(accR[r * kTok], {4, 2, 1, 8, 16}));
    out.push_back(t0);
    for (const Row &rw : rows)
      out.push_back(e.andi(lane0, rw.live));
    b.create<scf::YieldOp>(loc, out);

    b.setInsertionPointToStart(fin.elseBlock());
    Value seg = e.divu(lane, c(8));
    Value sl = e.remu(lane, c(8));
    Value lead = e.cmp(IP::eq, sl, c(0));
    Value pbase1 = e.mul(rowgrp, c(32));
    Value pbase = e.add(pbase1, seg);
    std::vector<Value> sums;
    for (int64_t r = 0; r < P; ++r)
      for (int64_t j = 0; j < kTok; ++j) {
        Value a = accR[r * kTok + j];
        if (j == 0) {
          sums.push_back(e.shuffleXorSum(a, {4, 2, 1}));
          continue;
        }
        sums.push_back(e.segmentSumIf(tok[j], a));
      }
    emitIf(e, lead, [&] {
      for (size_t i = 0; i < sums.size(); ++i) {
        const int64_t r = int64_t(i) / kTok, j = int64_t(i) % kTok, off = 32 * r + 4 * j;
        Value at = off ? e.add(pbase, c(off)) : pbase;
        e.store(sums[i], acc, at);
      }
    });
    b.create<gpu::BarrierOp>(loc);
    Value wr0 = e.ult(lane, tb);
    Value tg = e.add(t0, lane);
    Value lt = e.minu(lane, c(kTok - 1));
    Value l4 = e.mul(lt, c(4));
    Value si0 = e.add(pbase1, l4);
    SmallVector<Value> outs;
    for (int64_t r = 0; r < P; ++r) {
      Value si = r ? e.add(si0, c(32 * r)) : si0;
      std::array<Value, 4> ps;
      for (int64_t k = 0; k < 4; ++k) {
        Value at = k ? e.add(si, c(k)) : si;
        ps[k] = e.load(acc, at);
      }
      Value s01 = e.fadd(ps[0], ps[1]);
      Value s23 = e.fadd(ps[2], ps[3]);
      outs.push_back(e.fadd(s01, s23));
    }
    outs.push_back(tg);
    for (const Row &rw : rows)
      outs.push_back(e.andi(wr0, rw.live));
    b.create<scf::YieldOp>(loc, outs);
  }

  // Row r's output of token tg: total (+ its output's bias) (+ res on output 0).
  for (int64_t r = 0; r < P; ++r) {
    const Row &rw = rows[r];
    emitIf(e, fin.getResult(P + 1 + r), [&] {
      Value total = fin.getResult(r), tg = fin.getResult(P);
      Value tn = e.mul(tg, rw.ni);
      Value yi = e.add(tn, rw.n);
      Value withBias = e.addIfFlag(flags, rw.bflag, total, rw.bias, rw.n);
      Value o = e.addIfFlag(flags, rw.rflag, withBias, res, yi);
      e.store(o, rw.y, yi);
    });
  }
  b.create<gpu::ReturnOp>(loc);
}

/// One dequantized weight of a unit: its k offset from the unit's first weight, and q as
/// f32 (weight = scale q + offset).
struct Weight {
  int64_t k;
  Value q;
};
/// Weights of a unit sharing one scale and offset.
struct Group {
  Value scale, offset;
  std::vector<Weight> items;
};

/// The loads and integer unpacking of unit q (index, 0..units-1) of the block at byte
/// offset `blockbyte` of w (memref<?xi32>), as ggml's dequantize_row_<type>. Returns the
/// unit's first weight's index within its block (kbase) and its groups.
std::pair<Value, std::vector<Group>> dequantUnit(Em &e, StringRef fmt, bool aligned, Value w,
                                                 Value blockbyte, Value q) {
  auto c = [&](int64_t v) { return e.c(v); };
  auto word = [&](Value byte) { return e.word(byte, w, aligned); };
  if (fmt == "q4_0" || fmt == "q4_1" || fmt == "q5_0") {
    // block_q4_0: d | qs[16]; q4_1: d | m | qs[16]; q5_0: d | qh[4] | qs[16]. Unit q: qs
    // bytes 4q .. 4q + 3, weights 4q + i (low nibbles) and 16 + 4q + i (high).
    Value d0 = word(blockbyte);
    Value d = e.half(d0, false);
    const int64_t qoff = fmt == "q4_0" ? 2 : fmt == "q4_1" ? 4 : 6;
    Value bq = e.add(blockbyte, c(qoff));
    Value q4 = e.mul(q, c(4));
    Value qs = word(e.add(bq, q4));
    Value qhLo, qhHi;
    if (fmt == "q5_0") {
      Value qh = word(e.add(blockbyte, c(2)));
      Value qi = e.toI32(q);
      Value j4 = e.shl(qi, e.ci(2)); // 4q: first weight of the unit
      qhLo = e.shr(qh, j4);          // bit j of weight j
      qhHi = e.shr(qhLo, e.ci(16));  // bit j + 16 of weight j + 16
    }
    Group g;
    for (int64_t i = 0; i < 4; ++i) {
      Value lo = e.nib(qs, i, false);
      Value hi = e.nib(qs, i, true);
      if (fmt == "q5_0") {
        Value bl = e.bits(qhLo, i, 1);
        Value bls = e.shl(bl, e.ci(4));
        lo = e.ori(lo, bls);
        Value bh = e.bits(qhHi, i, 1);
        Value bhs = e.shl(bh, e.ci(4));
        hi = e.ori(hi, bhs);
      }
      Value lof = e.u2f(lo);
      g.items.push_back({i, lof});
      Value hif = e.u2f(hi);
      g.items.push_back({16 + i, hif});
    }
    g.scale = d;
    g.offset = fmt == "q4_1" ? e.half(d0, true) : e.fmul(d, e.cf(fmt == "q4_0" ? -8.0f : -16.0f));
    return {e.mul(q, c(4)), {g}};
  }
  if (fmt == "q8_0") {
    // block_q8_0: d | qs[32] int8. Unit q: weights 8q .. 8q + 7, as unsigned q ^ 0x80 =
    // q + 128 (the 128 goes into the offset).
    Value d = e.half(word(blockbyte), false);
    Value b2 = e.add(blockbyte, c(2));
    Value q8 = e.mul(q, c(8));
    Value bq = e.add(b2, q8);
    Group g;
    for (int64_t h = 0; h < 2; ++h) {
      Value wd = word(h ? e.add(bq, c(4 * h)) : bq);
      wd = e.xori(wd, e.ci(-2139062144)); // 0x80808080
      for (int64_t i = 0; i < 4; ++i) {
        Value by = e.bits(wd, 8 * i, 255);
        g.items.push_back({4 * h + i, e.u2f(by)});
      }
    }
    g.scale = d;
    g.offset = e.fmul(d, e.cf(-128.0f));
    return {e.mul(q, c(8)), {g}};
  }
  if (fmt == "q4_k") {
    // block_q4_K: d | dmin | scales[12] | qs[128]. Unit q = 4 p + r: qs bytes 32 p + 8 r
    // .. + 7, their low nibbles weights 64 p + 8 r + i of sub-block 2 p, high ones + 32 of
    // sub-block 2 p + 1.
    Value w0 = word(blockbyte);
    Value d = e.half(w0, false);
    Value dmin = e.half(w0, true);
    Value s0 = word(e.add(blockbyte, c(4)));
    Value s1 = word(e.add(blockbyte, c(8)));
    Value s2 = word(e.add(blockbyte, c(12)));
    Value p = e.divu(q, c(4)); // sub-block pair 0..3
    Value r = e.remu(q, c(4));
    Value l0 = e.mul(r, c(8)); // 0, 8, 16, 24
    Value pi = e.toI32(p);
    std::vector<Group> groups(2);
    for (int64_t jj = 0; jj < 2; ++jj) { // sub-blocks 2p (low nibbles) and 2p + 1 (high)
      Value p2 = e.shl(pi, e.ci(1));
      Value j = e.add(p2, e.ci(jj));
      auto [scale, mins] = e.q4kScale(d, dmin, s0, s1, s2, j);
      groups[jj].scale = scale;
      groups[jj].offset = e.negf(mins);
    }
    Value b16 = e.add(blockbyte, c(16));
    Value p32 = e.mul(p, c(32));
    Value off = e.add(p32, l0);
    Value qb = e.add(b16, off);
    Value qa = word(qb);
    Value qc = word(e.add(qb, c(4)));
    const std::array<Value, 2> qw{qa, qc};
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 4; ++i) {
        Value lo = e.u2f(e.nib(qw[h], i, false));
        groups[0].items.push_back({4 * h + i, lo});
        Value hi = e.u2f(e.nib(qw[h], i, true));
        groups[1].items.push_back({32 + 4 * h + i, hi});
      }
    Value p64 = e.mul(p, c(64));
    return {e.add(p64, l0), groups};
  }
  // q6_k. block_q6_K: ql[128] | qh[64] | scales[16] int8 | d. Unit q = 8 h + g: the four
  // 32-weight rows m of half h at columns 4 g .. 4 g + 3 (dequantize_row_q6_K).
  Value h = e.divu(q, c(8)); // half 0..1
  Value g = e.remu(q, c(8)); // 4-weight group 0..7
  Value g4 = e.mul(g, c(4));
  Value h64 = e.mul(h, c(64));
  Value bh = e.add(blockbyte, h64);
  Value qla = word(e.add(bh, g4));
  Value bh2 = e.add(blockbyte, h64);
  Value bhg = e.add(bh2, g4);
  Value qlb = word(e.add(bhg, c(32)));
  Value h32 = e.mul(h, c(32));
  Value b128 = e.add(blockbyte, c(128));
  Value bqh = e.add(b128, h32);
  Value qh = word(e.add(bqh, g4));
  Value d = e.half(word(e.add(blockbyte, c(208))), false);
  Value b192 = e.add(blockbyte, c(192));
  Value h8 = e.mul(h, c(8));
  Value scb = e.add(b192, h8);
  Value sw0 = word(scb);
  Value sw1 = word(e.add(scb, c(4)));
  Value isb = e.toI32(e.divu(g, c(4))); // is = l / 16
  // signed byte `is + 2m` of sw0 (m = 0, 1) or sw1 (m = 2, 3)
  std::vector<Group> groups(4);
  for (int64_t m = 0; m < 4; ++m) {
    Value sw = m < 2 ? sw0 : sw1;
    Value pos = e.add(isb, e.ci(2 * (m % 2)));
    Value pos8 = e.shl(pos, e.ci(3));
    Value left = e.sub(e.ci(24), pos8);
    Value up = e.shl(sw, left);
    Value scv = e.sar(up, e.ci(24));
    groups[m].scale = e.fmul(d, e.sitofp(scv));
    groups[m].offset = e.fmul(groups[m].scale, e.cf(-32.0f));
  }
  for (int64_t i = 0; i < 4; ++i) {
    Value qhi = e.bits(qh, 8 * i, 255);
    const std::array<std::tuple<Value, bool, int64_t>, 4> parts{
        std::tuple<Value, bool, int64_t>{qla, false, 0}, {qlb, false, 2}, {qla, true, 4}, {qlb, true, 6}};
    for (int64_t m = 0; m < 4; ++m) {
      auto [wd, high, hs] = parts[m];
      Value lo = e.nib(wd, i, high);
      Value hb = e.bits(qhi, hs, 3);
      Value hbs = e.shl(hb, e.ci(4));
      Value v = e.ori(lo, hbs);
      groups[m].items.push_back({32 * m + i, e.u2f(v)});
    }
  }
  Value h128 = e.mul(h, c(128));
  return {e.add(h128, g4), groups};
}

/// Writes matmul_<type> (activations "f32", every target) at `b`'s insertion point in a
/// gpu.module: the globals @acc and @slots, then `gpu.func @<name>`. A workgroup is 4
/// warps, one row a warp; a lane takes units lane, lane + 32, ... of the row,
/// units_in_flight of them with all their loads issued before any is used, and
/// dequantizes each once for every token of the block (up to 8).
void emitF32GemvKernel(GemvTileOp op, const GemvGeometry &g, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  const int64_t R = g.unitsInFlight;
  const F32Format &f = g.ffmt;
  const StringRef fmt = g.type;
  const bool isF16 = fmt == "f16";
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto accType = MemRefType::get({128}, f32, MemRefLayoutAttrInterface{}, wg);
  auto slotsType = MemRefType::get({1024}, f32, MemRefLayoutAttrInterface{}, wg);
  b.create<memref::GlobalOp>(loc, "acc", b.getStringAttr("private"), accType, Attribute{}, false,
                             IntegerAttr{});
  b.create<memref::GlobalOp>(loc, "slots", b.getStringAttr("private"), slotsType, Attribute{},
                             false, IntegerAttr{});

  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  const Type wty = isF16 ? dyn(b.getF16Type()) : dyn(i32);
  const Type xty = isF16 ? dyn(f32) : dyn(VectorType::get({4}, f32)), yty = dyn(f32);
  auto fnType = b.getFunctionType({wty, xty, yty, yty, yty, i32, i32, i32, i32}, {});
  auto fn = createKernel(b, loc, op.getSymName(), fnType, 128, "ceil(N/4), ceil(T/8), 1", g.minCtas);
  fn->setAttr(spirv::getEntryPointABIAttrName(), spirv::getEntryPointABIAttr(ctx, {128, 1, 1}));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  using IP = arith::CmpIPredicate;
  Value w = entry.getArgument(0), x = entry.getArgument(1), y = entry.getArgument(2),
        bias = entry.getArgument(3), res = entry.getArgument(4), flags = entry.getArgument(8);

  Value acc = b.create<memref::GetGlobalOp>(loc, accType, "acc");
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value by = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value grp = e.divu(tid, c(32));
  Value lane = e.remu(tid, c(32));
  Value row4 = e.mul(bx, c(4));
  Value n = e.add(row4, grp);
  Value ni = e.toIndex(entry.getArgument(5));
  Value ki = e.toIndex(entry.getArgument(6));
  Value ti = e.toIndex(entry.getArgument(7));
  Value t0 = e.mul(by, c(kTok));
  Value tleft = e.sub(ti, t0);
  Value tb = e.minu(tleft, c(kTok));
  Value live = e.ult(n, ni);
  // Units of this row (0 for a padding group past N).
  Value unitsAll, rowbase;
  if (isF16) {
    Value k7 = e.add(ki, c(7));
    unitsAll = e.divu(k7, c(8));
  } else {
    Value nb = e.divu(ki, c(f.qk));
    unitsAll = e.mul(nb, c(f.units));
    Value rowbytes = e.mul(nb, c(f.bs));
    rowbase = e.mul(n, rowbytes);
  }
  Value units = e.select(live, unitsAll, c(0));
  // Token j < tb of the block (uniform over the block; token 0 always is).
  std::array<Value, kTok> tok;
  for (int64_t j = 1; j < kTok; ++j)
    tok[j] = e.ult(c(j), tb);
  Value zero = e.cf(0.0f);

  // Unit u's weight loads and dequantization; token(tg): token tg's x loads and the dot
  // product with the unit, its f32 contribution.
  using Token = std::function<Value(Value)>;
  auto unitBody = [&](Value u) -> Token {
    if (isF16) {
      Value kb = e.mul(u, c(8));
      Value wrow = e.mul(n, ki);
      Value klast = e.sub(ki, c(1));
      std::vector<std::pair<Value, Value>> vals;
      for (int64_t i = 0; i < 8; ++i) {
        Value k = i ? e.add(kb, c(i)) : kb;
        Value inb = e.ult(k, ki);
        Value kc = e.minu(k, klast);
        Value wi = e.add(wrow, kc);
        Value h = e.load(w, wi);
        Value hf = b.create<arith::ExtFOp>(loc, f32, h);
        vals.push_back({kc, e.select(inb, hf, zero)});
      }
      return [&e, ki, x, zero, vals](Value tg) {
        Value xrow = e.mul(tg, ki);
        Value s = zero;
        for (auto [kc, wv] : vals) {
          Value xi = e.add(xrow, kc);
          Value xv = e.load(x, xi);
          s = e.fma(xv, wv, s);
        }
        return s;
      };
    }
    Value ub = e.divu(u, c(f.units));
    Value uq = e.remu(u, c(f.units));
    Value boff = e.mul(ub, c(f.bs));
    Value blockbyte = e.add(rowbase, boff);
    auto [kbase, groups] = dequantUnit(e, fmt, f.aligned, w, blockbyte, uq);
    Value bk = e.mul(ub, c(f.qk));
    Value kb = e.add(bk, kbase);
    return [&e, ki, x, kb, groups](Value tg) {
      // x as 16-byte vectors (K % 4 == 0, every unit's weights come in aligned runs of 4):
      // one 128-bit load per 4 weights.
      Value tk = e.mul(tg, ki);
      Value xk = e.add(tk, kb);
      Value xk4 = e.shr(xk, e.c(2));
      std::map<int64_t, Value> vecs;
      Value contrib;
      for (const Group &gr : groups) {
        Value sxq, sx;
        for (const Weight &it : gr.items) {
          const int64_t v = it.k / 4;
          if (!vecs.count(v)) {
            Value xi = v ? e.add(xk4, e.c(v)) : xk4;
            vecs[v] = e.load(x, xi);
          }
          Value xv = e.extract(vecs[v], it.k % 4);
          sxq = sxq ? e.fma(xv, it.q, sxq) : e.fmul(xv, it.q);
          if (gr.offset)
            sx = sx ? e.fadd(sx, xv) : xv;
        }
        Value part = e.fmul(gr.scale, sxq);
        if (gr.offset)
          part = e.fma(gr.offset, sx, part);
        contrib = contrib ? e.fadd(contrib, part) : part;
      }
      return contrib;
    };
  };

  // Per-thread partial sums of the block's tokens, accR[t] (0 for t >= tb). One token
  // (decode): a register accumulator. More (speculative verification): one workgroup-
  // memory slot per (token, thread), read and written by its thread only (no barrier), so
  // the register count stays that of one token.
  const SmallVector<Type> tokTypes(kTok, f32);
  Value one = e.cmp(IP::eq, tb, c(1));
  auto ifAcc = b.create<scf::IfOp>(loc, tokTypes, one, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifAcc.thenBlock());
    auto loop = b.create<scf::ForOp>(loc, lane, units, c(32 * R), ValueRange{zero});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(loop.getBody());
      Value u = loop.getInductionVar();
      auto us = unitsInFlight(e, u, R, units, unitBody);
      Value a = loop.getRegionIterArgs()[0];
      for (auto &[vr, token] : us) {
        Value cr = token(t0);
        if (vr)
          cr = e.select(vr, cr, zero);
        a = e.fadd(a, cr);
      }
      b.create<scf::YieldOp>(loc, a);
    }
    SmallVector<Value> outs{loop.getResult(0)};
    outs.append(kTok - 1, zero);
    b.create<scf::YieldOp>(loc, outs);

    b.setInsertionPointToStart(ifAcc.elseBlock());
    Value slots = b.create<memref::GetGlobalOp>(loc, slotsType, "slots");
    auto clear = b.create<scf::ForOp>(loc, c(0), c(kTok), c(1));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(clear.getBody()->getTerminator());
      Value s = e.mul(clear.getInductionVar(), c(128));
      Value si = e.add(s, tid);
      e.store(zero, slots, si);
    }
    auto uloop = b.create<scf::ForOp>(loc, lane, units, c(32));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(uloop.getBody()->getTerminator());
      Token token = unitBody(uloop.getInductionVar());
      auto tloop = b.create<scf::ForOp>(loc, c(0), tb, c(1));
      b.setInsertionPoint(tloop.getBody()->getTerminator());
      Value t = tloop.getInductionVar();
      Value tg = e.add(t0, t);
      Value contrib = token(tg);
      Value slot0 = e.mul(t, c(128));
      Value slot = e.add(slot0, tid);
      Value old = e.load(slots, slot);
      Value sum = e.fadd(old, contrib);
      e.store(sum, slots, slot);
    }
    SmallVector<Value> sv;
    for (int64_t j = 0; j < kTok; ++j) {
      Value at = j ? e.add(tid, c(128 * j)) : tid;
      sv.push_back(e.load(slots, at));
    }
    b.create<scf::YieldOp>(loc, sv);
  }

  // Each 8-lane segment's partials by shuffle-xor 4, 2, 1 (width 32: the exchanges stay
  // inside aligned 8-lane segments, so any subgroup size >= 8 works); every lane of a
  // segment then holds the segment's sum.
  std::vector<Value> sums;
  for (int64_t j = 0; j < kTok; ++j) {
    Value a = ifAcc.getResult(j);
    if (j == 0) {
      sums.push_back(e.shuffleXorSum(a, {4, 2, 1}));
      continue;
    }
    sums.push_back(e.segmentSumIf(tok[j], a));
  }
  // Segment leaders store part[grp][token][seg] (4 rows x 8 tokens x 4 segments).
  Value seg = e.divu(lane, c(8));
  Value sl = e.remu(lane, c(8));
  Value lead = e.cmp(IP::eq, sl, c(0));
  Value pbase0 = e.mul(grp, c(32));
  Value pbase = e.add(pbase0, seg);
  emitIf(e, lead, [&] {
    for (int64_t j = 0; j < kTok; ++j) {
      Value pi = j ? e.add(pbase, c(4 * j)) : pbase;
      e.store(sums[j], acc, pi);
    }
  });
  b.create<gpu::BarrierOp>(loc);
  // Thread `lane` of the group sums token t0 + lane's 4 segment partials and writes it.
  Value wr0 = e.ult(lane, tb);
  Value wr = e.andi(wr0, live);
  emitIf(e, wr, [&] {
    Value l4 = e.mul(lane, c(4));
    Value si = e.add(pbase0, l4);
    Value si1 = e.add(si, c(1));
    Value si2 = e.add(si, c(2));
    Value si3 = e.add(si, c(3));
    Value p0 = e.load(acc, si);
    Value p1 = e.load(acc, si1);
    Value p2 = e.load(acc, si2);
    Value p3 = e.load(acc, si3);
    Value p01 = e.fadd(p0, p1);
    Value p23 = e.fadd(p2, p3);
    Value sum = e.fadd(p01, p23);
    Value tg = e.add(t0, lane);
    Value yrow = e.mul(tg, ni);
    Value yi = e.add(yrow, n);
    Value withBias = e.addIfFlag(flags, e.ci(1), sum, bias, n);
    Value out = e.addIfFlag(flags, e.ci(2), withBias, res, yi);
    e.store(out, y, yi);
  });
  b.create<gpu::ReturnOp>(loc);
}

/// Writes get_rows_<type>, the embedding lookup out[t, :] = dequant(W[tokens[t], :]), at
/// `b`'s insertion point: one workgroup of 128 threads a token, each thread dequantizing
/// units tid, tid + 128, ... of the row as the f32 GEMV does.
void emitLookupKernel(GemvTileOp op, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  const StringRef fmt = op.getWeights();
  const F32Format f = f32Format(fmt);
  const bool isF16 = fmt == "f16";
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  auto fnType = b.getFunctionType({isF16 ? dyn(b.getF16Type()) : dyn(i32), dyn(i32), dyn(f32), i32}, {});
  auto fn = createKernel(b, loc, op.getSymName(), fnType, 128, "T, 1, 1");
  fn->setAttr(spirv::getEntryPointABIAttrName(), spirv::getEntryPointABIAttr(ctx, {128, 1, 1}));

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  Value w = entry.getArgument(0), tokens = entry.getArgument(1), out = entry.getArgument(2);
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value t = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value ki = e.toIndex(entry.getArgument(3));
  Value tok = e.load(tokens, t);
  Value row = e.toIndex(tok);
  Value orow = e.mul(t, ki);
  if (isF16) {
    Value wrow = e.mul(row, ki);
    auto loop = b.create<scf::ForOp>(loc, tid, ki, c(128));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value k = loop.getInductionVar();
    Value wi = e.add(wrow, k);
    Value h = e.load(w, wi);
    Value v = b.create<arith::ExtFOp>(loc, f32, h);
    Value oi = e.add(orow, k);
    e.store(v, out, oi);
  } else {
    Value nb = e.divu(ki, c(f.qk));
    Value units = e.mul(nb, c(f.units));
    Value rowbytes = e.mul(nb, c(f.bs));
    Value rowbase = e.mul(row, rowbytes);
    auto loop = b.create<scf::ForOp>(loc, tid, units, c(128));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    Value u = loop.getInductionVar();
    Value ub = e.divu(u, c(f.units));
    Value uq = e.remu(u, c(f.units));
    Value boff = e.mul(ub, c(f.bs));
    Value blockbyte = e.add(rowbase, boff);
    auto [kbase, groups] = dequantUnit(e, fmt, f.aligned, w, blockbyte, uq);
    Value bk = e.mul(ub, c(f.qk));
    Value kb = e.add(bk, kbase);
    Value ok = e.add(orow, kb);
    for (const Group &gr : groups)
      for (const Weight &it : gr.items) {
        Value wv = e.fmul(gr.scale, it.q);
        if (gr.offset)
          wv = e.fadd(wv, gr.offset);
        Value oi = it.k ? e.add(ok, c(it.k)) : ok;
        e.store(wv, out, oi);
      }
  }
  b.create<gpu::ReturnOp>(loc);
}

/// Writes F16's tensor-core GEMV (`mma`) at `b`'s insertion point: the global
/// @acc_<name> ([warps][m_tiles][16 rows][8 tokens] f32), then `gpu.func @<name>(w, x, y,
/// bias, res, N, K, T, flags)`: y[t, n] = sum_k x[t, k] W[n, k] by mma.sync.m16n8k16 (the
/// weights f16, the activations rounded to f16, f32 sums), the block's 8 tokens as the
/// mma's 8 columns. Thread (g = lane / 4, q = lane % 4) loads weights 8 q .. 8 q + 7 of each
/// 32-weight chunk of rows g and g + 8 (one 16-byte load) and the same 8 positions of its
/// token's x, so a chunk is two mma.sync with no shuffling; warp w takes the chunks w, w +
/// warps, ... (units_in_flight in flight); the warps' sums are added in a fixed order (a
/// pairwise tree), so a token's output never depends on the launch's other tokens.
void emitF16MmaKernel(GemvTileOp op, OpBuilder &b) {
  MLIRContext *ctx = op.getContext();
  const Location loc = op.getLoc();
  const int64_t W = op.getWarpsAttr().getInt(), mt = op.getMTilesAttr().getInt();
  const int64_t U = op.getUnitsInFlightAttr().getInt(), rowsWg = 16 * mt, outs = 128 * mt;
  Type f16 = b.getF16Type(), f32 = b.getF32Type(), i32 = b.getI32Type();
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto accType = MemRefType::get({outs * W}, f32, MemRefLayoutAttrInterface{}, wg);
  const std::string accName = ("acc_" + op.getSymName()).str();
  b.create<memref::GlobalOp>(loc, accName, b.getStringAttr("private"), accType, Attribute{}, false,
                             IntegerAttr{});
  auto dyn = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
  const auto v4i = VectorType::get({4}, i32), v4f = VectorType::get({4}, f32);
  const auto v8h = VectorType::get({8}, f16);
  const auto v42h = VectorType::get({4, 2}, f16), v22h = VectorType::get({2, 2}, f16);
  const auto v22f = VectorType::get({2, 2}, f32);
  const Type yty = dyn(f32);
  auto fnType = b.getFunctionType({dyn(v4i), dyn(v4f), yty, yty, yty, i32, i32, i32, i32}, {});
  auto fn = createKernel(b, loc, op.getSymName(), fnType, int32_t(32 * W),
                         "ceil(N/" + std::to_string(rowsWg) + "), ceil(T/8), 1");

  Block &entry = fn.getBody().front();
  b.setInsertionPointToStart(&entry);
  Em e(b, loc, &entry);
  auto c = [&](int64_t v) { return e.c(v); };
  Value w = entry.getArgument(0), x = entry.getArgument(1), y = entry.getArgument(2),
        bias = entry.getArgument(3), res = entry.getArgument(4), flags = entry.getArgument(8);
  Value acc = b.create<memref::GetGlobalOp>(loc, accType, accName);
  Value tid = b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value by = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value warp = e.divu(tid, c(32));
  Value lane = e.remu(tid, c(32));
  Value g = e.divu(lane, c(4));
  Value q = e.remu(lane, c(4));
  Value ni = e.toIndex(entry.getArgument(5));
  Value ki = e.toIndex(entry.getArgument(6));
  Value ti = e.toIndex(entry.getArgument(7));
  Value nlast = e.sub(ni, c(1));
  Value tlast = e.sub(ti, c(1));
  Value k8 = e.divu(ki, c(8));
  Value k4 = e.divu(ki, c(4));
  Value k31 = e.add(ki, c(31));
  Value nch = e.divu(k31, c(32));
  Value q8 = e.mul(q, c(8));
  // The rows this thread loads: m-tile m's rows g and g + 8 (a row past the last reads the
  // last row again; its outputs are not written), as 16-byte-vector offsets.
  Value row0 = e.mul(bx, c(rowsWg));
  Value rowg = e.add(row0, g);
  std::vector<std::array<Value, 2>> rowvec(mt);
  for (int64_t m = 0; m < mt; ++m)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t off = 16 * m + 8 * h;
      Value n = off ? e.add(rowg, c(off)) : rowg;
      Value nc = e.minu(n, nlast);
      rowvec[m][h] = e.mul(nc, k8);
    }
  // The token this thread feeds as column g (past the last: the last again, not written).
  Value t0 = e.mul(by, c(kTok));
  Value tok = e.add(t0, g);
  Value tokc = e.minu(tok, tlast);
  Value xrow = e.mul(tokc, k4);
  auto zeros = [&](VectorType t, int64_t key) {
    TypedAttr a = t.getElementType().isF16()
                      ? DenseElementsAttr::get(t, b.getF16FloatAttr(0.0).getValue())
                      : DenseElementsAttr::get(t, b.getF32FloatAttr(0.0f).getValue());
    return e.constant(3, key, a);
  };
  Value zf = zeros(v22f, 0), zh = zeros(v8h, 1), za = zeros(v42h, 2), zb = zeros(v22h, 3);

  // Warp w takes the chunks w, w + W, ... (k = 32 chunk + 8 q .. + 7 for this thread); the
  // trip count is the workgroup's (mma.sync is warp-wide); a chunk past the row multiplies
  // zero activations with the row's first weights.
  const SmallVector<Value> inits(mt, zf);
  auto loop = b.create<scf::ForOp>(loc, c(0), nch, c(W * U), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value c0 = loop.getInductionVar();
    struct Chunk {
      Value valid;
      std::vector<std::array<Value, 2>> ws;
      Value x8;
    };
    std::vector<Chunk> chunks;
    for (int64_t r = 0; r < U; ++r) {
      Value ch = r ? e.add(c0, c(W * r)) : c0;
      ch = e.add(ch, warp);
      Value ch32 = e.mul(ch, c(32));
      Value k = e.add(ch32, q8);
      Chunk cu;
      cu.valid = e.ult(k, ki);
      Value kc = e.select(cu.valid, k, c(0));
      Value kv = e.divu(kc, c(8));
      cu.ws.resize(mt);
      for (int64_t m = 0; m < mt; ++m)
        for (int64_t h = 0; h < 2; ++h) {
          Value wi = e.add(rowvec[m][h], kv);
          Value ld = e.load(w, wi);
          cu.ws[m][h] = b.create<vector::BitCastOp>(loc, v8h, ld);
        }
      Value kq = e.divu(kc, c(4));
      Value xi = e.add(xrow, kq);
      Value x0 = e.load(x, xi);
      Value xi1 = e.add(xi, c(1));
      Value x1 = e.load(x, xi1);
      cu.x8 = b.create<vector::ShuffleOp>(loc, x0, x1, ArrayRef<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
      chunks.push_back(std::move(cu));
    }
    // Elements i, i + 1 of a vector<8xf16>: one f16x2 register; an mma operand from them.
    auto pair = [&](Value v, int64_t i) -> Value {
      return b.create<vector::ShuffleOp>(loc, v, v, ArrayRef<int64_t>{i, i + 1});
    };
    auto frag = [&](Value zero, ArrayRef<Value> regs) {
      Value f = zero;
      for (size_t i = 0; i < regs.size(); ++i)
        f = b.create<vector::InsertOp>(loc, regs[i], f, ArrayRef<int64_t>{int64_t(i)});
      return f;
    };
    SmallVector<Value> accs(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    for (const Chunk &cu : chunks) {
      Value xh = b.create<arith::TruncFOp>(loc, v8h, cu.x8);
      xh = e.select(cu.valid, xh, zh);
      for (int64_t s = 0; s < 2; ++s) {
        // Registers (f16 pairs) of step s: weights / activations 4s, 4s+1 (k 2q, 2q+1 of the
        // mma) and 4s+2, 4s+3 (k 2q+8, 2q+9); A: row g, row g+8, row g, row g+8.
        Value b0 = pair(xh, 4 * s), b1 = pair(xh, 4 * s + 2);
        Value bf = frag(zb, {b0, b1});
        for (int64_t m = 0; m < mt; ++m) {
          Value a0 = pair(cu.ws[m][0], 4 * s), a1 = pair(cu.ws[m][1], 4 * s);
          Value a2 = pair(cu.ws[m][0], 4 * s + 2), a3 = pair(cu.ws[m][1], 4 * s + 2);
          Value a = frag(za, {a0, a1, a2, a3});
          accs[m] = b.create<nvgpu::MmaSyncOp>(loc, a, bf, accs[m], ArrayRef<int64_t>{16, 8, 16});
        }
      }
    }
    b.create<scf::YieldOp>(loc, accs);
  }
  // The warps' partial sums to acc[warp][m][row 0..15][token 0..7]: this thread holds rows
  // g, g + 8 and tokens 2q, 2q + 1 of each m-tile.
  Value wbase = e.mul(warp, c(outs));
  Value g8 = e.mul(g, c(8));
  Value q2 = e.mul(q, c(2));
  Value gq = e.add(g8, q2);
  Value sbase = e.add(wbase, gq);
  for (int64_t m = 0; m < mt; ++m)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        Value v = b.create<vector::ExtractOp>(loc, loop.getResult(m), ArrayRef<int64_t>{i, j});
        const int64_t off = 128 * m + 64 * i + j;
        Value at = off ? e.add(sbase, c(off)) : sbase;
        e.store(v, acc, at);
      }
  b.create<gpu::BarrierOp>(loc);
  // Thread tid writes outputs o = tid + 32 W j < 128 mt (row o / 8 of the workgroup's,
  // token o % 8): the W warps' sums by a pairwise tree, whatever T is, then bias and
  // residual.
  Value fb = e.andi(flags, e.ci(1));
  Value hb = e.cmp(arith::CmpIPredicate::ne, fb, e.ci(0));
  Value fr = e.andi(flags, e.ci(2));
  Value hr = e.cmp(arith::CmpIPredicate::ne, fr, e.ci(0));
  for (int64_t j = 0; j < (outs + 32 * W - 1) / (32 * W); ++j) {
    Value o = j ? e.add(tid, c(32 * W * j)) : tid;
    Value oin;
    if (32 * W * (j + 1) > outs) { // some threads have no output left
      oin = e.ult(o, c(outs));
      o = e.select(oin, o, c(0));
    }
    std::vector<Value> ps;
    for (int64_t wi = 0; wi < W; ++wi) {
      Value at = wi ? e.add(o, c(outs * wi)) : o;
      ps.push_back(e.load(acc, at));
    }
    while (ps.size() > 1) {
      std::vector<Value> next;
      for (size_t i = 0; i < ps.size(); i += 2)
        next.push_back(i + 1 < ps.size() ? e.fadd(ps[i], ps[i + 1]) : ps[i]);
      ps = std::move(next);
    }
    Value orow = e.divu(o, c(8));
    Value otok = e.remu(o, c(8));
    Value tg = e.add(t0, otok);
    Value tin = e.ult(tg, ti);
    Value n = e.add(row0, orow);
    Value nin = e.ult(n, ni);
    Value wr = e.andi(tin, nin);
    if (oin)
      wr = e.andi(wr, oin);
    emitIf(e, wr, [&] {
      Value tn = e.mul(tg, ni);
      Value yi = e.add(tn, n);
      Value withBias = e.addIf(hb, ps[0], bias, n);
      Value out = e.addIf(hr, withBias, res, yi);
      e.store(out, y, yi);
    });
  }
  b.create<gpu::ReturnOp>(loc);
}

} // namespace

LogicalResult lowerGemvTile(GemvTileOp op) {
  if (op.getMma()) {
    if (!op.isScheduled())
      return op.emitError() << "swz-lower-tiles: @" << op.getSymName()
                            << " has no schedule (run swz-apply-schedule first)";
    const std::string name = op.getSymName().str();
    return placeTileKernel(op, op.getSymName(), {"acc_" + name}, "",
                           [&](OpBuilder &b) { emitF16MmaKernel(op, b); });
  }
  if (op.getLookup())
    return placeTileKernel(op, op.getSymName(), {}, "",
                           [&](OpBuilder &b) { emitLookupKernel(op, b); });
  FailureOr<GemvGeometry> g = gemvGeometry(op);
  if (failed(g))
    return failure();
  if (!g->q8x)
    return placeTileKernel(op, op.getSymName(), {"acc", "slots"}, "one f32 GEMV a gpu.module",
                           [&](OpBuilder &b) { emitF32GemvKernel(op, *g, b); });
  return placeTileKernel(op, op.getSymName(), {"acc_" + g->type, "slots_" + g->type},
                         "one int8 GEMV of a block format a gpu.module",
                         [&](OpBuilder &b) { emitGemvKernel(op, *g, b); });
}

} // namespace swz
