// Numeric cases for codegen/kernels/attention_f16kv.mlir (module swz_attention_f16kv):
// kv_store_f16, flash_attention_f16kv (prefill: one split; decode: split-K partials)
// and attention_split_reduce, against float64 references. Plain C++ (see cases.h).
//
// The paged KV cache of every case has more pages than the context needs, a
// shuffled block table (block b -> a random page), and every slot that holds no
// position of the context (unused pages, the tail of the last page) set to f16 NaN:
// a kernel that reads a wrong page, a slot past the context or ignores the block
// table produces NaN or a wrong value, not a near miss.
#include "cases.h"
#include "cases_gemv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <limits>
#include <stdexcept>

namespace swz::check {
namespace {

constexpr int kPage = 64;             // tokens per page (runtime/kvcache/block_manager.h)
constexpr uint16_t kF16NaN = 0x7E00;  // quiet NaN

/// f32 -> f16 bits, round to nearest even (as cvt.rn.f16.f32), and back: the float64
/// conversions every case group shares (cases_gemv.h).
uint16_t f16FromFloat(float f) { return gemv::doubleToHalf(double(f)); }
double f16ToDouble(uint16_t h) { return gemv::halfToDouble(h); }

/// A paged KV cache for one layer in the GPU layout
/// [page][n_head_kv][64][head_dim] f16, with a shuffled block table.
struct PagedKV {
  int nKv = 0, hd = 0, ctx = 0, nPages = 0;
  std::vector<int32_t> table;   // block -> page
  std::vector<uint16_t> k, v;   // f16 bits, NaN where no position lives

  PagedKV(int nKv_, int hd_, int ctx_, int extraPages, Rng &rng) : nKv(nKv_), hd(hd_), ctx(ctx_) {
    int nBlocks = std::max(1, (ctx + kPage - 1) / kPage);
    nPages = nBlocks + extraPages;
    std::vector<int32_t> perm(nPages);
    for (int i = 0; i < nPages; ++i)
      perm[i] = i;
    for (int i = nPages - 1; i > 0; --i)  // Fisher-Yates
      std::swap(perm[i], perm[size_t((rng.next() + 1.0) * 0.5 * (i + 1)) % size_t(i + 1)]);
    table.assign(perm.begin(), perm.begin() + nBlocks);
    k.assign(size_t(nPages) * nKv * kPage * hd, kF16NaN);
    v = k;
  }
  size_t index(int pos, int kvh, int d) const {
    int page = table[pos / kPage], slot = pos % kPage;
    return ((size_t(page) * nKv + kvh) * kPage + slot) * hd + d;
  }
  /// Fills positions [0, ctx) with random f16 values in [-1, 1).
  void fill(Rng &rng) {
    for (int p = 0; p < ctx; ++p)
      for (int h = 0; h < nKv; ++h)
        for (int d = 0; d < hd; ++d) {
          k[index(p, h, d)] = f16FromFloat(float(rng.next()));
          v[index(p, h, d)] = f16FromFloat(float(rng.next()));
        }
  }
  double K(int pos, int kvh, int d) const { return f16ToDouble(k[index(pos, kvh, d)]); }
  double V(int pos, int kvh, int d) const { return f16ToDouble(v[index(pos, kvh, d)]); }
};

struct AttnShape {
  int T, pos0, nHead, nKv, hd;
  int splitLen = 0;  // 0: one split (prefill launch)
  /// One split only: the float64 reference covers row 0 and rows rowStep - 1, 2 rowStep -
  /// 1, ... (the timing cases' long prompts; every row otherwise).
  int rowStep = 1;
};

/// float64 attention of query row (t, h) over keys [lo, hi) (already clipped to the
/// causal limit by the caller): returns lse = log sum exp(s) (-inf if empty) and the
/// normalised output in `o`.
/// With `roundQ` (the tensor-core kernel's input precision), q * scale is formed in
/// f32 and rounded to f16 as the kernel does, and the scores use it unscaled.
double referenceRow(const PagedKV &kv, const std::vector<float> &q, const AttnShape &s, int t,
                    int h, int lo, int hi, std::vector<double> &o, bool roundQ = false) {
  const int G = s.nHead / s.nKv, kvh = h / G;
  const double scale = 1.0 / std::sqrt(double(s.hd));
  const float scaleF = float(scale);
  o.assign(s.hd, 0.0);
  if (hi <= lo)
    return -std::numeric_limits<double>::infinity();
  std::vector<double> sc(hi - lo);
  double m = -std::numeric_limits<double>::infinity();
  const float *qr = &q[(size_t(t) * s.nHead + h) * s.hd];
  for (int j = lo; j < hi; ++j) {
    double dot = 0;
    for (int d = 0; d < s.hd; ++d)
      dot += (roundQ ? f16ToDouble(f16FromFloat(qr[d] * scaleF)) : double(qr[d])) * kv.K(j, kvh, d);
    sc[j - lo] = roundQ ? dot : dot * scale;
    m = std::max(m, sc[j - lo]);
  }
  double l = 0;
  for (int j = lo; j < hi; ++j) {
    double p = std::exp(sc[j - lo] - m);
    l += p;
    for (int d = 0; d < s.hd; ++d)
      o[d] += p * kv.V(j, kvh, d);
  }
  for (double &x : o)
    x /= l;
  return m + std::log(l);
}

std::string shapeLabel(const AttnShape &s) {
  std::string l = "T=" + std::to_string(s.T) + " pos0=" + std::to_string(s.pos0) +
                  " ctx=" + std::to_string(s.pos0 + s.T) + " heads=" + std::to_string(s.nHead) +
                  "/" + std::to_string(s.nKv) + " hd=" + std::to_string(s.hd);
  if (s.splitLen)
    l += " split_len=" + std::to_string(s.splitLen) + " n_split=" +
         std::to_string((s.pos0 + s.T + s.splitLen - 1) / s.splitLen);
  return l;
}

// Tolerance of the attention outputs. Scores are f32 dot products of length
// head_dim (<= 128) of |scale q| <= 4/sqrt(hd) and |k| <= 1 (fma chain: error ~1e-6);
// exp is ex2.approx-based on PTX (2 ulp) and GLSL.std.450 Exp on Vulkan (3 + 2|x|
// ulp); the online softmax rescales once per 32-key tile. Outputs are convex
// combinations of |v| <= 1, so their error is of the order of the score error,
// ~1e-6. 1e-4 leaves a 100x margin, while one key too many or too few moves an
// output by about |v - out| / ctx >= 1e-3 at the longest context here (300) and a
// wrong page or slot gives NaN or O(0.1).
constexpr double kOutTol = 1e-4;
const char *kOutNote = "|out - ref| <= 1e-4 (f32 scores and online softmax vs float64 over "
                       "f16 K/V; outputs bounded by max|v| = 1)";

double attentionFlops(const AttnShape &s) {
  double keys = 0;  // sum over rows of visible keys
  for (int t = 0; t < s.T; ++t)
    keys += s.pos0 + t + 1;
  return 4.0 * keys * s.nHead * s.hd;  // q.k and p.v, 2 flops per multiply-add each
}

double attentionBytes(const AttnShape &s, double outBytes) {
  const int ctx = s.pos0 + s.T;
  return double(s.T) * s.nHead * s.hd * 4 +        // q
         double(ctx) * s.nKv * s.hd * 2 * 2 +      // K and V, f16, each once
         double((ctx + kPage - 1) / kPage) * 4 +   // block table
         outBytes;
}

// The tensor-core variant (flash_attention_f16kv_mma) takes q * scale rounded to f16
// (the reference does the same) and rounds P to f16 for the P.V product: each weight
// is off by at most 2^-11 relatively, so an output (a weighted mean of |v| <= 1) by
// at most 2^-11 = 4.9e-4, plus f32 accumulation (~1e-6). 1e-3 covers that bound,
// while one key too many or too few moves an output by ~1e-2 at context 37.
constexpr double kMmaTol = 1e-3;
const char *kMmaNote = "|out - ref| <= 1e-3 (reference over f16(q * scale) as the kernel; "
                       "P rounded to f16 for mma.sync: <= 2^-11 relative per weight)";

/// Threads a workgroup of flash_decode_f16kv_hd128: 32 x the shipped schedules'
/// attention.decode.warps (8), or SWZ_CHECK_DEC_WARPS for a kernel generated from a schedule
/// with other warps (bench/tune_attention.sh, test_simt_interp.py).
unsigned decodeBlock() {
  const char *w = std::getenv("SWZ_CHECK_DEC_WARPS");
  return 32u * unsigned(w ? std::atoi(w) : 8);
}

/// The decode kernel's split rule (LowerAttentionDecode.cpp, launch_bindings.cpp splitLet):
/// split_len = ceil(ctx / (min(ceil(ctx / 32), max_splits) 32)) 32 and as many splits as
/// hold keys.
int decodeSplitLen(int ctx, int maxSplits) {
  const int nsm = std::min((ctx + 31) / 32, maxSplits);
  return (ctx + nsm * 32 - 1) / (nsm * 32) * 32;
}
/// The max_splits (1..64) for which that rule splits a context into `splitLen`-key splits.
int decodeMaxSplits(int ctx, int splitLen) {
  for (int ms = 1; ms <= 64; ++ms)
    if (decodeSplitLen(ctx, ms) == splitLen)
      return ms;
  throw std::logic_error("no max_splits splits a context of " + std::to_string(ctx) + " into " +
                         std::to_string(splitLen) + "-key splits");
}

/// flash_attention_f16kv (portable), its tensor-core variants (`mma`), or with `decode`
/// the PTX decode kernel flash_decode_f16kv_hd128 (attention_decode.mlir's tile spec) on one
/// sequence: the same outputs (it merges the splits into out itself; f32 throughout, so
/// the portable kernel's tolerance).
Case flashCase(const AttnShape &s, uint64_t seed, bool mma = false, bool decode = false) {
  Rng rng{seed};
  const int ctx = s.pos0 + s.T, G = s.nHead / s.nKv;
  PagedKV kv(s.nKv, s.hd, ctx, 2, rng);
  kv.fill(rng);
  std::vector<float> q(size_t(s.T) * s.nHead * s.hd);
  for (float &x : q)
    x = float(4.0 * rng.next());
  const int nSplit = s.splitLen ? (ctx + s.splitLen - 1) / s.splitLen : 1;
  const int splitLen = s.splitLen ? s.splitLen : ((ctx + 31) / 32) * 32;
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  const size_t nOut = size_t(s.T) * s.nHead * s.hd;

  Case c;
  c.module = "swz_attention_f16kv";
  c.entry = "flash_attention_f16kv";
  if (mma) {
    c.module = "swz_attention_f16kv_mma";
    c.entry = s.hd == 64 ? "flash_attention_f16kv_mma" : "flash_attention_f16kv_mma_hd128";
  }
  if (decode) {
    c.module = "swz_attention_decode";
    c.entry = "flash_decode_f16kv_hd128";
  }
  c.label = shapeLabel(s);
  c.buffers.push_back(makeBuffer(q, {int64_t(q.size())}));
  c.buffers.push_back(makeBuffer(kv.k, {int64_t(kv.k.size())}));
  c.buffers.push_back(makeBuffer(kv.v, {int64_t(kv.v.size())}));
  c.buffers.push_back(makeBuffer(kv.table, {int64_t(kv.table.size())}));
  c.buffers.push_back(makeBuffer(std::vector<float>(nOut, sentinel), {int64_t(nOut)}));
  const size_t nPart = s.splitLen ? size_t(nSplit) * nOut : 4;
  const size_t nLse = s.splitLen ? size_t(nSplit) * s.T * s.nHead : 4;
  c.buffers.push_back(makeBuffer(std::vector<float>(nPart, sentinel), {int64_t(nPart)}));
  c.buffers.push_back(makeBuffer(std::vector<float>(nLse, sentinel), {int64_t(nLse)}));
  const int rowsPerGroup = mma ? 64 : 8;
  c.grid = {unsigned((s.T * G + rowsPerGroup - 1) / rowsPerGroup), unsigned(s.nKv),
            unsigned(nSplit)};
  if (decode) {
    // The decode kernel: the split counters (zero before, and zero again after, the
    // launch), one sequence's record {first row, rows, first position, table offset},
    // and the most splits that make the kernel's own rule choose splitLen.
    const size_t nCount = size_t(s.T) * s.nHead;
    c.buffers.push_back(makeBuffer(std::vector<int32_t>(nCount, 0), {int64_t(nCount)}));
    c.buffers.push_back(makeBuffer(std::vector<int32_t>{0, s.T, s.pos0, 0}, {4}));
    for (int b = 0; b < 9; ++b)
      c.args.push_back(Arg::memref(b));
    c.args.push_back(Arg::i(s.T));
    c.args.push_back(Arg::i(int(c.grid[0])));  // seq_tiles
    c.args.push_back(Arg::i(s.nHead));
    c.args.push_back(Arg::i(s.hd));
    c.args.push_back(Arg::i(decodeMaxSplits(ctx, splitLen)));
  } else {
    for (int b = 0; b < 7; ++b)
      c.args.push_back(Arg::memref(b));
    c.args.push_back(Arg::i(s.T));
    c.args.push_back(Arg::i(s.pos0));
    c.args.push_back(Arg::i(s.nHead));
    c.args.push_back(Arg::i(s.hd));
    c.args.push_back(Arg::i(splitLen));
  }
  c.args.push_back(Arg::f(float(1.0 / std::sqrt(double(s.hd)))));
  c.block = {decode ? decodeBlock() : 128u, 1, 1};
  c.flops = attentionFlops(s);
  c.bytesMoved = attentionBytes(
      s, s.splitLen ? double(nPart + nLse) * 4 : double(nOut) * 4);

  const double tol = mma ? kMmaTol : kOutTol;
  const std::string note = mma ? kMmaNote : kOutNote;
  c.check = [s, kv, q, nSplit, splitLen, nOut, mma, tol, note,
             decode](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    std::vector<double> o;
    auto got = asVector<float>(out[4]);
    auto part = asVector<float>(out[5]);
    auto lse = asVector<float>(out[6]);
    if (!s.splitLen) {
      v.note = note;
      if (s.rowStep > 1)
        v.note += "; reference on row 0 and every " + std::to_string(s.rowStep) + "th row";
      for (int t = 0; t < s.T; ++t) {
        if (t != 0 && t % s.rowStep != s.rowStep - 1)
          continue;
        for (int h = 0; h < s.nHead; ++h) {
          referenceRow(kv, q, s, t, h, 0, s.pos0 + t + 1, o, mma);
          for (int d = 0; d < s.hd; ++d)
            compare(v, got[(size_t(t) * s.nHead + h) * s.hd + d], o[d], tol);
        }
      }
      // o_part and lse_part are not written with one split.
      for (float x : part)
        compare(v, std::isnan(x) ? 0.0 : 1.0, 0.0, 0.0);
      for (float x : lse)
        compare(v, std::isnan(x) ? 0.0 : 1.0, 0.0, 0.0);
      return v;
    }
    v.note = note +
             " per split; |lse - ref| <= 1e-4 (1 + |ref|), -inf exactly where a split holds "
             "no visible key; out untouched";
    for (int sp = 0; sp < nSplit; ++sp)
      for (int t = 0; t < s.T; ++t)
        for (int h = 0; h < s.nHead; ++h) {
          const int lo = sp * splitLen, hi = std::min((sp + 1) * splitLen, s.pos0 + t + 1);
          double ref = referenceRow(kv, q, s, t, h, lo, hi, o, mma);
          size_t row = (size_t(sp) * s.T + t) * s.nHead + h;
          double g = lse[row];
          if (std::isinf(ref))
            compare(v, g == ref ? 0.0 : 1.0, 0.0, 0.0);
          else
            compare(v, g, ref, 1e-4 * (1 + std::fabs(ref)));
          for (int d = 0; d < s.hd; ++d)
            compare(v, part[row * s.hd + d], o[d], tol);
        }
    if (!decode) {
      for (size_t i = 0; i < nOut; ++i)
        compare(v, std::isnan(got[i]) ? 0.0 : 1.0, 0.0, 0.0);
      return v;
    }
    // The decode kernel's last split merged the partials into out (the whole row's
    // attention) and left every counter at 0.
    v.note += "; out: the merged splits against the whole row's reference, counters back to 0";
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.nHead; ++h) {
        referenceRow(kv, q, s, t, h, 0, s.pos0 + t + 1, o, mma);
        for (int d = 0; d < s.hd; ++d)
          compare(v, got[(size_t(t) * s.nHead + h) * s.hd + d], o[d], tol);
      }
    for (int32_t n : asVector<int32_t>(out[7]))
      compare(v, double(n), 0.0, 0.0);
    return v;
  };
  return c;
}

/// One decode sequence of decodeBatchCase: rows T at positions pos0.. .
struct DecodeSeq {
  int T, pos0;
};

/// flash_decode_f16kv_hd128 over several sequences in one launch (a decode step of a
/// batch): one KV pool, each sequence with its own pages (blocks [b_k, b_k + n_k) of one
/// shuffled table, so its own keys) and its own block table, at k * stride in
/// block_table with the entries between tables -1; each sequence sees keys up to its own
/// positions and splits its own context (max_splits 16, as the decode records). The
/// merged out of every row against float64, the counters back to 0.
Case decodeBatchCase(const std::vector<DecodeSeq> &seqs, int nHead, int nKv, uint64_t seed,
                     int maxSplits = 16) {
  Rng rng{seed};
  const int hd = 128, G = nHead / nKv;
  int rows = 0, maxCtx = 0, maxT = 0, nSplit = 0;
  std::vector<int32_t> info;
  for (const DecodeSeq &q : seqs) {
    const int ctx = q.pos0 + q.T, sl = decodeSplitLen(ctx, maxSplits);
    maxCtx = std::max(maxCtx, ctx), maxT = std::max(maxT, q.T);
    nSplit = std::max(nSplit, (ctx + sl - 1) / sl);
    rows += q.T;
  }
  // Sequence k's blocks start at block b_k of the pool's table (positions 64 b_k.. of it).
  std::vector<int> firstBlock;
  int nBlocks = 0;
  for (const DecodeSeq &q : seqs) {
    firstBlock.push_back(nBlocks);
    nBlocks += (q.pos0 + q.T + kPage - 1) / kPage;
  }
  PagedKV kv(nKv, hd, nBlocks * kPage, 2, rng);
  // Keys only at each sequence's own positions (NaN in the rest of its last page, as
  // in every other case: a key past a sequence's context poisons its rows).
  for (size_t k = 0; k < seqs.size(); ++k)
    for (int p = firstBlock[k] * kPage; p < firstBlock[k] * kPage + seqs[k].pos0 + seqs[k].T; ++p)
      for (int h = 0; h < nKv; ++h)
        for (int d = 0; d < hd; ++d) {
          kv.k[kv.index(p, h, d)] = f16FromFloat(float(rng.next()));
          kv.v[kv.index(p, h, d)] = f16FromFloat(float(rng.next()));
        }
  const int stride = (maxCtx + kPage - 1) / kPage + 3;
  std::vector<int32_t> tables(size_t(stride) * seqs.size(), -1);
  for (size_t k = 0, r0 = 0; k < seqs.size(); r0 += size_t(seqs[k].T), ++k) {
    const int nb = (seqs[k].pos0 + seqs[k].T + kPage - 1) / kPage;
    std::copy(kv.table.begin() + firstBlock[k], kv.table.begin() + firstBlock[k] + nb,
              tables.begin() + ptrdiff_t(k * stride));
    for (int x : {int(r0), seqs[k].T, seqs[k].pos0, int(k) * stride})
      info.push_back(x);
  }
  std::vector<float> q(size_t(rows) * nHead * hd);
  for (float &x : q)
    x = float(4.0 * rng.next());
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  const size_t nOut = q.size();
  const unsigned seqTiles = unsigned((maxT * G + 7) / 8);
  Case c;
  c.module = "swz_attention_decode";
  c.entry = "flash_decode_f16kv_hd128";
  c.label = std::to_string(seqs.size()) + " sequences (T/pos0";
  const bool same = std::all_of(seqs.begin(), seqs.end(),
                                [&](const DecodeSeq &q) { return q.T == seqs[0].T && q.pos0 == seqs[0].pos0; });
  for (const DecodeSeq &q : seqs) {
    c.label += " " + std::to_string(q.T) + "/" + std::to_string(q.pos0);
    if (same && seqs.size() > 1) {
      c.label += " each";
      break;
    }
  }
  c.label += ") heads=" + std::to_string(nHead) + "/" + std::to_string(nKv) + " hd=128";
  if (maxSplits != 16)
    c.label += " max_splits=" + std::to_string(maxSplits);
  c.buffers.push_back(makeBuffer(q, {int64_t(q.size())}));
  c.buffers.push_back(makeBuffer(kv.k, {int64_t(kv.k.size())}));
  c.buffers.push_back(makeBuffer(kv.v, {int64_t(kv.v.size())}));
  c.buffers.push_back(makeBuffer(tables, {int64_t(tables.size())}));
  c.buffers.push_back(makeBuffer(std::vector<float>(nOut, sentinel), {int64_t(nOut)}));
  const size_t nLse = size_t(nSplit) * rows * nHead;
  c.buffers.push_back(makeBuffer(std::vector<float>(nLse * hd, sentinel), {int64_t(nLse * hd)}));
  c.buffers.push_back(makeBuffer(std::vector<float>(nLse, sentinel), {int64_t(nLse)}));
  c.buffers.push_back(makeBuffer(std::vector<int32_t>(size_t(rows) * nHead, 0), {int64_t(rows) * nHead}));
  c.buffers.push_back(makeBuffer(info, {int64_t(info.size())}));
  for (int b = 0; b < 9; ++b)
    c.args.push_back(Arg::memref(b));
  for (int x : {rows, int(seqTiles), nHead, hd, maxSplits})
    c.args.push_back(Arg::i(x));
  c.args.push_back(Arg::f(float(1.0 / std::sqrt(double(hd)))));
  c.grid = {unsigned(seqs.size()) * seqTiles, unsigned(nKv), unsigned(nSplit)};
  c.block = {decodeBlock(), 1, 1};
  double flops = 0, bytes = double(nOut) * 8;
  for (const DecodeSeq &q : seqs) {
    const AttnShape s{q.T, q.pos0, nHead, nKv, hd};
    flops += attentionFlops(s);
    bytes += attentionBytes(s, 0) - double(q.T) * nHead * hd * 4;
  }
  c.flops = flops;
  c.bytesMoved = bytes;
  c.check = [seqs, firstBlock, kv, q, nHead, nKv, hd](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = std::string(kOutNote) + "; each row against its own sequence's keys; counters back to 0";
    std::vector<double> o;
    auto got = asVector<float>(out[4]);
    int r0 = 0;
    for (size_t k = 0; k < seqs.size(); ++k) {
      const DecodeSeq &sq = seqs[k];
      const int base = firstBlock[k] * kPage;  // its position 0 in the pool's table
      // The sequence's rows as a one-sequence batch of the reference (its q rows first).
      const AttnShape s{sq.T, sq.pos0, nHead, nKv, hd};
      std::vector<float> qs(q.begin() + ptrdiff_t(size_t(r0) * nHead * hd),
                            q.begin() + ptrdiff_t(size_t(r0 + sq.T) * nHead * hd));
      for (int t = 0; t < sq.T; ++t)
        for (int h = 0; h < nHead; ++h) {
          referenceRow(kv, qs, s, t, h, base, base + sq.pos0 + t + 1, o);
          for (int d = 0; d < hd; ++d)
            compare(v, got[(size_t(r0 + t) * nHead + h) * hd + d], o[d], kOutTol);
        }
      r0 += sq.T;
    }
    for (int32_t n : asVector<int32_t>(out[7]))
      compare(v, double(n), 0.0, 0.0);
    return v;
  };
  return c;
}

/// attention_split_reduce over synthetic partials: lse_s in [-3, 3) with some
/// splits empty (-inf, o = 0), o in [-1, 1).
Case reduceCase(int T, int nHead, int hd, int nSplit, uint64_t seed) {
  Rng rng{seed};
  const size_t rows = size_t(T) * nHead;
  std::vector<float> part(size_t(nSplit) * rows * hd), lse(size_t(nSplit) * rows);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int sp = 0; sp < nSplit; ++sp)
    for (size_t r = 0; r < rows; ++r) {
      // Split sp is empty for row r when sp > 0 and (r + sp) % 3 == 0 (split 0 never is:
      // it holds key 0, visible to every row).
      bool empty = sp > 0 && (r + sp) % 3 == 0;
      lse[sp * rows + r] = empty ? ninf : float(3.0 * rng.next());
      for (int d = 0; d < hd; ++d)
        part[(sp * rows + r) * hd + d] = empty ? 0.f : float(rng.next());
    }
  Case c;
  c.module = "swz_attention_f16kv";
  c.entry = "attention_split_reduce";
  c.label = "T=" + std::to_string(T) + " heads=" + std::to_string(nHead) +
            " hd=" + std::to_string(hd) + " n_split=" + std::to_string(nSplit);
  c.buffers.push_back(makeBuffer(part, {int64_t(part.size())}));
  c.buffers.push_back(makeBuffer(lse, {int64_t(lse.size())}));
  c.buffers.push_back(makeBuffer(std::vector<float>(rows * hd, std::nanf("")),
                                 {int64_t(rows * hd)}));
  c.args = {Arg::memref(0), Arg::memref(1), Arg::memref(2), Arg::i(nSplit), Arg::i(hd)};
  c.grid = {unsigned(T), unsigned(nHead), 1};
  c.block = {64, 1, 1};
  c.bytesMoved = double(part.size() + lse.size() + rows * hd) * 4;
  c.flops = double(nSplit) * rows * hd * 2;
  c.check = [=](const std::vector<std::vector<uint8_t>> &out) {
    Verdict v;
    v.note = "|out - ref| <= 1e-5 (1 + |ref|) (f32 weights exp(lse_s - max), <= 16 splits)";
    auto got = asVector<float>(out[2]);
    for (size_t r = 0; r < rows; ++r) {
      double m = -INFINITY;
      for (int sp = 0; sp < nSplit; ++sp)
        m = std::max(m, double(lse[sp * rows + r]));
      double den = 0;
      for (int sp = 0; sp < nSplit; ++sp)
        den += std::exp(double(lse[sp * rows + r]) - m);
      for (int d = 0; d < hd; ++d) {
        double num = 0;
        for (int sp = 0; sp < nSplit; ++sp)
          num += std::exp(double(lse[sp * rows + r]) - m) * part[(sp * rows + r) * hd + d];
        double ref = num / den;
        compare(v, got[r * hd + d], ref, 1e-5 * (1 + std::fabs(ref)));
      }
    }
    return v;
  };
  return c;
}

/// RoPE applied by rope_kv_store_f16 (the graph rope op's attributes), on k and, with
/// nQ > 0, on nQ query heads in place; with `norm`, Qwen3's head RMSNorm first.
struct RopeK {
  int nRot;
  float theta;
  bool neox;
  int nQ = 0;
  bool norm = false;
};

/// kv_store_f16 (or, with `rope`, rope_kv_store_f16): T new rows at pos0.. into a cache
/// whose other slots hold a pattern that must survive unchanged. With `secondFrom` > 0,
/// rows from it on belong to a second sequence in the same launch, with pages of its own
/// (the pool's pages the first one's table does not name) and its own block table at
/// `stride` (entries between the tables -1): a kernel that ignores row_tables writes the
/// second sequence's rows into the first one's pages, and the check sees both.
Case kvStoreCase(int T, int pos0, int nKv, int hd, bool exactRounding, uint64_t seed,
                 std::optional<RopeK> rope = std::nullopt, int secondFrom = 0) {
  Rng rng{seed};
  const int ctx = pos0 + T, nBlocks = (ctx + kPage - 1) / kPage;
  PagedKV kv(nKv, hd, ctx, secondFrom ? nBlocks + 1 : 1, rng);
  // The second sequence's table: the pages the first one's does not name, last first.
  std::vector<int32_t> table2;
  for (int p = kv.nPages - 1; secondFrom && p >= 0 && int(table2.size()) < nBlocks; --p)
    if (std::find(kv.table.begin(), kv.table.end(), p) == kv.table.end())
      table2.push_back(p);
  // Where row t's position p lives (its sequence's table).
  auto slotIndex = [kv, table2, secondFrom](int t, int p, int h, int d) {
    const std::vector<int32_t> &tb = secondFrom && t >= secondFrom ? table2 : kv.table;
    return ((size_t(tb[p / kPage]) * kv.nKv + h) * kPage + p % kPage) * kv.hd + d;
  };
  for (size_t i = 0; i < kv.k.size(); ++i) {  // old contents: distinct finite f16 values
    kv.k[i] = uint16_t(0x3000 + (i * 7) % 0x0C00);
    kv.v[i] = uint16_t(0xB000 + (i * 11) % 0x0C00);
  }
  std::vector<float> k(size_t(T) * nKv * hd), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = float(2.0 * rng.next());
    v[i] = float(2.0 * rng.next());
  }
  const int nQ = rope ? rope->nQ : 0;
  const bool norm = rope && rope->norm;
  const float eps = 1e-6f;
  std::vector<float> q(size_t(T) * std::max(nQ, 1) * hd), qGamma(static_cast<size_t>(hd)), kGamma(static_cast<size_t>(hd));
  for (float &x : q)
    x = float(3.0 * rng.next());
  for (int d = 0; d < hd; ++d) {
    qGamma[d] = float(1.0 + 0.5 * rng.next());
    kGamma[d] = float(1.0 + 0.5 * rng.next());
  }
  Case c;
  c.module = "swz_attention_f16kv";
  c.entry = rope ? "rope_kv_store_f16" : "kv_store_f16";
  c.label = "T=" + std::to_string(T) + " pos0=" + std::to_string(pos0) +
            " kv_heads=" + std::to_string(nKv) + " hd=" + std::to_string(hd);
  if (rope)
    c.label += std::string(rope->neox ? " neox" : " norm") + " n_rot=" + std::to_string(rope->nRot) +
               (nQ ? " q_heads=" + std::to_string(nQ) : "") + (norm ? " head_norm" : "");
  // Float64 references: each head row normalised (norm: x / sqrt(mean x^2 + eps) *
  // gamma), then rotated (rope_f32's reference: angle pos theta^(-2i/n_rot)), with the
  // per-feature tolerance of the f32 angle (see rope_f32's cases) and of the f32 norm
  // (relative 4e-6: the f32 sum of squares and rsqrt.approx's 2^-22.9).
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t)
    positions[t] = pos0 + t;
  auto reference = [&](const std::vector<float> &x, int heads, const std::vector<float> &gamma,
                       std::vector<double> &ref, std::vector<double> &tol) {
    ref.assign(x.begin(), x.end());
    tol.assign(x.size(), 0.0);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < heads; ++h) {
        const size_t base = (size_t(t) * heads + h) * hd;
        if (norm) {
          double ss = 0;
          for (int d = 0; d < hd; ++d)
            ss += double(x[base + d]) * x[base + d];
          const double inv = 1.0 / std::sqrt(ss / hd + eps);
          for (int d = 0; d < hd; ++d) {
            ref[base + d] = x[base + d] * inv * gamma[d];
            tol[base + d] = 4e-6 * std::fabs(ref[base + d]) + 1e-7;
          }
        }
        if (!rope)
          continue;
        for (int i = 0; i < rope->nRot / 2; ++i) {
          double ang = double(positions[t]) * std::pow(double(rope->theta), -2.0 * i / rope->nRot);
          size_t j0 = base + (rope->neox ? i : 2 * i);
          size_t j1 = base + (rope->neox ? i + rope->nRot / 2 : 2 * i + 1);
          double x0 = ref[j0], x1 = ref[j1], t0 = tol[j0], t1 = tol[j1];
          ref[j0] = x0 * std::cos(ang) - x1 * std::sin(ang);
          ref[j1] = x0 * std::sin(ang) + x1 * std::cos(ang);
          tol[j0] = tol[j1] =
              t0 + t1 + 1e-6 + (std::fabs(x0) + std::fabs(x1)) * (ang * std::ldexp(1.0, -21) + 1e-6);
        }
      }
  };
  std::vector<double> kRef, kTol, qRef, qTol;
  reference(k, nKv, kGamma, kRef, kTol);
  if (nQ)
    reference(q, nQ, qGamma, qRef, qTol);
  if (rope) {
    c.buffers.push_back(makeBuffer(q, {int64_t(q.size())}));
  }
  c.buffers.push_back(makeBuffer(k, {int64_t(k.size())}));
  c.buffers.push_back(makeBuffer(v, {int64_t(v.size())}));
  c.buffers.push_back(makeBuffer(kv.k, {int64_t(kv.k.size())}));
  c.buffers.push_back(makeBuffer(kv.v, {int64_t(kv.v.size())}));
  const int stride = secondFrom ? int(kv.table.size()) + 3 : 0;
  std::vector<int32_t> tables(kv.table);
  std::vector<int32_t> rowTables(static_cast<size_t>(T), 0);
  if (secondFrom) {
    tables.resize(size_t(stride), -1);
    tables.insert(tables.end(), table2.begin(), table2.end());
    std::fill(rowTables.begin() + secondFrom, rowTables.end(), stride);
    c.label += " two sequences (rows " + std::to_string(secondFrom) + "..)";
  }
  c.buffers.push_back(makeBuffer(tables, {int64_t(tables.size())}));
  c.buffers.push_back(makeBuffer(rowTables, {int64_t(T)}));
  c.buffers.push_back(makeBuffer(positions, {int64_t(T)}));
  const int o = rope ? 1 : 0;  // buffer index of k
  for (int i = 0; i < 6 + o; ++i)
    c.args.push_back(Arg::memref(i));
  if (!rope)
    c.args.push_back(Arg::memref(6));  // positions
  c.args.push_back(Arg::i(hd));
  if (rope) {
    c.buffers.push_back(makeBuffer(qGamma, {int64_t(hd)}));
    c.buffers.push_back(makeBuffer(kGamma, {int64_t(hd)}));
    c.args.push_back(Arg::memref(7));  // positions
    c.args.push_back(Arg::i(rope->nRot));
    c.args.push_back(Arg::f(rope->theta));
    c.args.push_back(Arg::i(rope->neox ? 1 : 0));
    c.args.push_back(Arg::memref(8));
    c.args.push_back(Arg::memref(9));
    c.args.push_back(Arg::f(eps));
    c.args.push_back(Arg::i(norm ? 1 : 0));
    c.args.push_back(Arg::i(nQ));
  }
  c.grid = {unsigned(T), unsigned(nQ + nKv), 1};
  c.block = {64, 1, 1};
  c.bytesMoved = double(k.size()) * 2 * (4 + 2) + double(T) * 8 + (nQ ? double(T) * nQ * hd * 8 : 0.0);
  c.flops = 0;
  c.check = [=](const std::vector<std::vector<uint8_t>> &out) {
    Verdict res;
    res.note = exactRounding
                   ? "written f16 bits == round-to-nearest-even(x) (cvt.rn.f16.f32); all other "
                     "slots unchanged"
                   : "written f16 within 1 ulp of round-to-nearest-even(x) (Vulkan leaves "
                     "OpFConvert's rounding to the implementation); all other slots unchanged";
    if (rope)
      res.note += std::string("; ") + (norm ? "normalised and " : "") +
                  "rotated k: |f16 - ref| <= the f32 angle's bound (rope_f32's)" +
                  (norm ? " + 4e-6 |ref| (the f32 norm)" : "") +
                  " + 2^-10 |ref| (one f16 rounding), ref in float64" +
                  (nQ ? "; q the same in f32, in place, without the f16 term" : "");
    auto gk = asVector<uint16_t>(out[2 + o]);
    auto gv = asVector<uint16_t>(out[3 + o]);
    std::vector<uint8_t> written(kv.k.size(), 0);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < nKv; ++h)
        for (int d = 0; d < hd; ++d) {
          size_t i = slotIndex(t, pos0 + t, h, d), src = (size_t(t) * nKv + h) * hd + d;
          written[i] = 1;
          for (int which = 0; which < 2; ++which) {
            if (rope && which == 0) {
              double got = f16ToDouble(gk[i]);
              compare(res, got, kRef[src], kTol[src] + std::ldexp(std::fabs(kRef[src]), -10));
              continue;
            }
            uint16_t want = f16FromFloat(which ? v[src] : k[src]);
            uint16_t got = which ? gv[i] : gk[i];
            double ulps = std::fabs(double(int(got) - int(want)));
            if ((got ^ want) & 0x8000)
              ulps = 1e9;  // sign differs
            compare(res, ulps, 0.0, exactRounding ? 0.0 : 1.0);
          }
        }
    for (size_t i = 0; i < written.size(); ++i)
      if (!written[i]) {
        compare(res, gk[i] == kv.k[i] ? 0.0 : 1.0, 0.0, 0.0);
        compare(res, gv[i] == kv.v[i] ? 0.0 : 1.0, 0.0, 0.0);
      }
    if (rope) {
      auto gq = asVector<float>(out[0]);
      for (size_t i = 0; i < gq.size(); ++i)
        if (nQ)
          compare(res, gq[i], qRef[i], qTol[i]);
        else  // n_q = 0: q untouched
          compare(res, gq[i] == q[i] ? 0.0 : 1.0, 0.0, 0.0);
    }
    return res;
  };
  return c;
}

/// kv_move_rope_f16 (graph.kv_move, the approx cache mode): T moves, move t from the
/// slot of position src0 + t to the slot of position dst0 + t, each through its own pages
/// (the pool's first pages hold the sources, the rest the destinations), K rotated by
/// `delta` (move t by delta + t % 3 - 1 when `varied`), V copied. Every other slot keeps
/// its value.
Case kvMoveCase(int T, int src0, int dst0, int nKv, int hd, int nRot, float theta, bool neox, int delta, bool varied,
                uint64_t seed) {
  Rng rng{seed};
  const int srcPages = (src0 + T + kPage - 1) / kPage, dstPages = (dst0 + T + kPage - 1) / kPage;
  const int nPages = srcPages + dstPages;
  std::vector<uint16_t> k(size_t(nPages) * nKv * kPage * hd), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {  // finite f16 values in [-2, 2)
    k[i] = f16FromFloat(float(2.0 * rng.next()));
    v[i] = f16FromFloat(float(2.0 * rng.next()));
  }
  auto slotOf = [](int pagesBefore, int pos) { return int32_t((pagesBefore + pos / kPage) * kPage + pos % kPage); };
  std::vector<int32_t> moves;
  for (int t = 0; t < T; ++t) {
    moves.push_back(slotOf(0, src0 + t));
    moves.push_back(slotOf(srcPages, dst0 + t));
    moves.push_back(varied ? delta + t % 3 - 1 : delta);
  }
  auto at = [nKv, hd](int32_t slot, int h, int d) { return ((size_t(slot / kPage) * nKv + h) * kPage + slot % kPage) * hd + d; };
  Case c;
  c.module = "swz_attention_f16kv";
  c.entry = "kv_move_rope_f16";
  c.label = "T=" + std::to_string(T) + " slots " + std::to_string(src0) + ".. -> " + std::to_string(dst0) +
            ".. kv_heads=" + std::to_string(nKv) + " hd=" + std::to_string(hd) + (neox ? " neox" : " norm") +
            " n_rot=" + std::to_string(nRot) + " delta=" + std::to_string(delta) + (varied ? " (+-1 a move)" : "");
  c.buffers.push_back(makeBuffer(k, {int64_t(k.size())}));
  c.buffers.push_back(makeBuffer(v, {int64_t(v.size())}));
  c.buffers.push_back(makeBuffer(moves, {int64_t(moves.size())}));
  for (int i = 0; i < 3; ++i)
    c.args.push_back(Arg::memref(i));
  c.args.push_back(Arg::i(hd));
  c.args.push_back(Arg::i(nRot));
  c.args.push_back(Arg::f(theta));
  c.args.push_back(Arg::i(neox ? 1 : 0));
  c.grid = {unsigned(T), unsigned(nKv), 1};
  c.block = {64, 1, 1};
  c.bytesMoved = double(T) * nKv * hd * 2 * 2 * 2 + double(moves.size()) * 4;
  c.flops = 0;
  c.check = [=](const std::vector<std::vector<uint8_t>> &out) {
    Verdict res;
    res.note = "V and K past n_rot copied bitwise; K's rotated pairs: |f16 - ref| <= the f32 angle's bound "
               "(rope_f32's) + 2^-10 |ref| (one f16 rounding), ref the source's f16 values rotated in float64; "
               "all other slots unchanged";
    auto gk = asVector<uint16_t>(out[0]);
    auto gv = asVector<uint16_t>(out[1]);
    std::vector<uint8_t> written(k.size(), 0);
    for (int t = 0; t < T; ++t) {
      const int32_t from = moves[3 * t], to = moves[3 * t + 1], dl = moves[3 * t + 2];
      for (int h = 0; h < nKv; ++h) {
        for (int d = 0; d < hd; ++d) {
          written[at(to, h, d)] = 1;
          compare(res, gv[at(to, h, d)] == v[at(from, h, d)] ? 0.0 : 1.0, 0.0, 0.0);
          if (d >= nRot)
            compare(res, gk[at(to, h, d)] == k[at(from, h, d)] ? 0.0 : 1.0, 0.0, 0.0);
        }
        for (int i = 0; i < nRot / 2; ++i) {
          const int j0 = neox ? i : 2 * i, j1 = neox ? i + nRot / 2 : 2 * i + 1;
          const double ang = double(dl) * std::pow(double(theta), -2.0 * i / nRot);
          const double x0 = f16ToDouble(k[at(from, h, j0)]), x1 = f16ToDouble(k[at(from, h, j1)]);
          const double r0 = x0 * std::cos(ang) - x1 * std::sin(ang), r1 = x0 * std::sin(ang) + x1 * std::cos(ang);
          const double tol = 1e-6 + (std::fabs(x0) + std::fabs(x1)) * (std::fabs(ang) * std::ldexp(1.0, -21) + 1e-6);
          compare(res, f16ToDouble(gk[at(to, h, j0)]), r0, tol + std::ldexp(std::fabs(r0), -10));
          compare(res, f16ToDouble(gk[at(to, h, j1)]), r1, tol + std::ldexp(std::fabs(r1), -10));
        }
      }
    }
    for (size_t i = 0; i < written.size(); ++i)
      if (!written[i]) {
        compare(res, gk[i] == k[i] ? 0.0 : 1.0, 0.0, 0.0);
        compare(res, gv[i] == v[i] ? 0.0 : 1.0, 0.0, 0.0);
      }
    return res;
  };
  return c;
}

} // namespace

std::vector<Case> attentionCases(const std::string &format) {
  const bool ptx = format == "ptx";
  std::vector<Case> cases;
  uint64_t seed = 0xA77E;
  // kv_store_f16: single row at a page's last slot; 37 rows crossing a page; hd 128.
  cases.push_back(kvStoreCase(1, 63, 3, 64, ptx, seed++));
  cases.push_back(kvStoreCase(37, 50, 3, 64, ptx, seed++));
  cases.push_back(kvStoreCase(8, 120, 2, 128, ptx, seed++));
  // rope_kv_store_f16 (RoPE fused into the KV write): SmolLM2 (norm, theta 1e5),
  // Qwen2.5 (neox, 1e6) and a partial rotation.
  cases.push_back(kvStoreCase(37, 50, 3, 64, ptx, seed++, RopeK{64, 100000.f, false}));
  cases.push_back(kvStoreCase(5, 300, 2, 64, ptx, seed++, RopeK{64, 1000000.f, true}));
  cases.push_back(kvStoreCase(3, 61, 2, 128, ptx, seed++, RopeK{96, 10000.f, true}));
  // With RoPE on q too (swz-fuse's q_rope): SmolLM2 (9/3 heads), Qwen2.5-7B (28/4, hd
  // 128); and with Qwen3's head norms (16/8, hd 128; a prefill batch of 37; hd 256 and a
  // partial rotation for the tree's 256-column form).
  cases.push_back(kvStoreCase(5, 60, 3, 64, ptx, seed++, RopeK{64, 100000.f, false, 9}));
  cases.push_back(kvStoreCase(1, 299, 4, 128, ptx, seed++, RopeK{128, 1000000.f, true, 28}));
  cases.push_back(kvStoreCase(1, 143, 8, 128, ptx, seed++, RopeK{128, 1000000.f, true, 16, true}));
  cases.push_back(kvStoreCase(37, 26, 8, 128, ptx, seed++, RopeK{128, 1000000.f, true, 16, true}));
  cases.push_back(kvStoreCase(2, 70, 2, 256, ptx, seed++, RopeK{192, 10000.f, false, 4, true}));
  // One launch for the rows of two sequences, each through its own block table.
  cases.push_back(kvStoreCase(37, 50, 3, 64, ptx, seed++, std::nullopt, 20));
  cases.push_back(kvStoreCase(5, 140, 8, 128, ptx, seed++, RopeK{128, 1000000.f, true, 16, true}, 2));
  // Prefill (one split). SmolLM2-135M: 9/3 heads (G 3), hd 64; Qwen2.5-0.5B: 14/2
  // (G 7), hd 64; qwen3-0.6B: 16/8 (G 2), hd 128. Contexts 1, 37, 63, 65, 128, 300;
  // pos0 > 0 means a prefix already in the cache.
  const AttnShape prefill[] = {
      {1, 0, 9, 3, 64},     {37, 0, 9, 3, 64},    {37, 26, 14, 2, 64}, {1, 64, 14, 2, 64},
      {37, 263, 16, 8, 128}, {5, 295, 9, 3, 64},  {8, 120, 14, 2, 128},
  };
  for (const AttnShape &s : prefill)
    cases.push_back(flashCase(s, seed++));
  // Decode with split-K partials (T 1..8, long context); the last one has rows whose
  // position is before split 1 (lse -inf, o 0).
  const AttnShape decode[] = {
      {1, 299, 14, 2, 64, 64},
      {4, 296, 9, 3, 64, 128},
      {8, 57, 16, 8, 128, 64},
      {1, 62, 9, 3, 64, 32},
      // The split the decode records choose at a 600-key context: 10 splits of 64 keys.
      {1, 599, 16, 8, 128, 64},
      // Decode at the Qwen3-0.6B and 7B shapes with the records' 32-key splits (the PTX
      // decode kernel's first two cases: their times side by side).
      {1, 143, 16, 8, 128, 32},
      {1, 299, 28, 4, 128, 32},
  };
  for (const AttnShape &s : decode)
    cases.push_back(flashCase(s, seed++));
  // Tensor-core variants (PTX only; head_dim 64 and 128, split_len a multiple of 64):
  // 64 rows per workgroup, so T = 100 at G = 7 is 11 row tiles; the split cases with
  // T = 8 have rows before split 1.
  if (ptx) {
    const AttnShape mmaShapes[] = {
        {37, 0, 9, 3, 64},      {37, 26, 14, 2, 64},      {1, 64, 14, 2, 64},
        {100, 200, 14, 2, 64},  {5, 295, 9, 3, 64},       {1, 299, 14, 2, 64, 64},
        {8, 57, 9, 3, 64, 64},  {37, 263, 16, 8, 128},    {8, 120, 14, 2, 128},
        {8, 57, 16, 8, 128, 64},
    };
    for (const AttnShape &s : mmaShapes)
      cases.push_back(flashCase(s, seed++, true));
    // Timing only on request (SWZ_CHECK_ATTN_PREFILL_TIMING=1): an 8k-token prompt in one
    // pass (causal, one split) at the Qwen2.5-7B (28/4 heads) and Qwen3-0.6B (16/8) shapes,
    // head_dim 128 (issue 16's prefill attention figure; reference on 17 rows of 8192).
    if (const char *t = std::getenv("SWZ_CHECK_ATTN_PREFILL_TIMING"); t && std::string(t) == "1")
      for (auto [nHead, nKv] : {std::pair{28, 4}, std::pair{16, 8}})
        cases.push_back(flashCase(AttnShape{8192, 0, nHead, nKv, 128, 0, 512}, seed++, true));
    // The PTX decode kernel (head_dim 128): Qwen3-0.6B (16/8) and Qwen2.5-7B (28/4, G 7:
    // a workgroup's 8 rows span two tokens at T > 1) at the decode records' 32-key
    // splits, one split (writes out), a verification batch of 17 rows (17 * 7 = 119
    // rows: 15 row tiles) and rows before split 1 (lse -inf, o 0).
    // Then the 7B shape at the splits the decode records choose at a 540-key context
    // (64 keys a split) and at 4,096 (16 splits of 256 keys): the timing shapes of a
    // decode step after pp512 and at a long agent context (the SIMT interpreter test
    // runs all but the 4,096-key case, which is long in Python).
    const AttnShape decodeShapes[] = {
        {1, 143, 16, 8, 128, 32}, {1, 299, 28, 4, 128, 32}, {1, 40, 28, 4, 128},
        {17, 40, 28, 4, 128, 32}, {8, 57, 16, 8, 128, 64},  {1, 539, 28, 4, 128, 64},
        {1, 4095, 28, 4, 128, 256},
    };
    for (const AttnShape &s : decodeShapes)
      cases.push_back(flashCase(s, seed++, false, true));
    // A decode step of a batch in one launch: sequences at different contexts (one
    // split, several, 16), a verification batch of 3 rows among single rows, the 7B
    // shape (G 7: a sequence of 3 rows spans 3 row tiles) and Qwen3-0.6B's (G 2).
    cases.push_back(decodeBatchCase({{1, 40}, {3, 299}, {1, 539}, {1, 5}}, 28, 4, seed++));
    cases.push_back(decodeBatchCase({{1, 143}, {1, 20}, {2, 70}}, 16, 8, seed++));
    // Timing only on request (SWZ_CHECK_ATTN_TIMING=1; bench/tune_attention.sh): a decode
    // step of 1, 8 and 32 sequences at a 640-token context (gpu_speed.sh's 512 + 128) at
    // the 7B and Qwen3-0.6B shapes, with the records' 16 splits at most and with 32 and 8.
    if (const char *t = std::getenv("SWZ_CHECK_ATTN_TIMING"); t && std::string(t) == "1")
      for (int ms : {16, 32, 8})
        for (int n : {1, 8, 32})
          for (auto [nHead, nKv] : {std::pair{28, 4}, std::pair{16, 8}})
            cases.push_back(decodeBatchCase(std::vector<DecodeSeq>(size_t(n), DecodeSeq{1, 639}), nHead, nKv,
                                            seed++, ms));
  }
  cases.push_back(reduceCase(1, 14, 64, 5, seed++));
  cases.push_back(reduceCase(3, 9, 128, 2, seed++));
  cases.push_back(reduceCase(2, 16, 128, 8, seed++));
  cases.push_back(reduceCase(1, 16, 128, 16, seed++));  // the decode records' most splits
  // kv_move_rope_f16: SmolLM2's shape (norm pairs, theta 1e5), a run crossing pages both
  // ways and moving back; Qwen3-0.6B's (neox, 1e6, 8 KV heads of 128) forward by 1,000
  // positions; a partial rotation with a different offset a move (and one of 0).
  cases.push_back(kvMoveCase(70, 10, 100, 3, 64, 64, 100000.f, false, -90, false, seed++));
  cases.push_back(kvMoveCase(40, 30, 1000, 8, 128, 128, 1000000.f, true, 970, false, seed++));
  cases.push_back(kvMoveCase(9, 60, 5, 2, 128, 96, 10000.f, true, 1, true, seed++));
  return cases;
}

} // namespace swz::check
