// matmul vs float64 references: tight against dequant(W) . dequant(quantized x) (the same
// integers the kernel multiplies), loose against dequant(W) . x (activation quantization).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml/kernels.h"
#include "ggml/matmul.h"
#include "ggml/quants.h"
#include "test_util.h"

namespace swz::ggml {
namespace {

struct Problem {
  int64_t n_out, n_in, n_tokens;
};

struct Data {
  std::vector<uint8_t> w;
  std::vector<float> wf;  // dequantized W
  std::vector<float> x;
};

Data make(Type t, const Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  Data d;
  const size_t rb = row_size(t, p.n_in);
  d.w.resize(rb * p.n_out);
  d.wf.resize(p.n_out * p.n_in);
  std::vector<float> row(p.n_in);
  for (int64_t r = 0; r < p.n_out; ++r) {
    for (auto& v : row) v = nd(rng) * 0.1f;
    quantize_row(t, row.data(), d.w.data() + r * rb, p.n_in);
    dequantize_row(t, d.w.data() + r * rb, d.wf.data() + r * p.n_in, p.n_in);
  }
  d.x.resize(p.n_tokens * p.n_in);
  for (auto& v : d.x) v = nd(rng);
  return d;
}

// Checks y against both float64 references for every (t, r).
void check(Type t, const Problem& p, const Data& d, const std::vector<float>& y) {
  const Type at = vec_dot_type(t);
  std::vector<uint8_t> xq(row_size(at, p.n_in));
  for (int64_t tok = 0; tok < p.n_tokens; ++tok) {
    const float* x = d.x.data() + tok * p.n_in;
    quantize_row_activation(at, x, xq.data(), p.n_in);
    double xn = 0;
    for (int64_t k = 0; k < p.n_in; ++k) xn += double(x[k]) * x[k];
    for (int64_t r = 0; r < p.n_out; ++r) {
      const float* w = d.wf.data() + r * p.n_in;
      const test::Exact ex = test::exact_dot(t, p.n_in, d.w.data() + r * row_size(t, p.n_in), xq.data());
      const double exact_q = ex.value, mag = ex.magnitude;
      double exact = 0, wn = 0;
      for (int64_t k = 0; k < p.n_in; ++k) {
        exact += double(w[k]) * x[k];
        wn += double(w[k]) * w[k];
      }
      const float got = y[tok * p.n_out + r];
      // Tight: same integers, only fp32 rounding of scales and sums differs.
      ASSERT_NEAR(got, exact_q, 2e-6 * mag + 1e-30)
          << type_info(t).name << " token " << tok << " row " << r << " (vs quantized-x float64)";
      // Loose: 8-bit activation quantization error, |err| <= 1% of ||w||*||x||
      // (observed ~0.1-0.3%; float activations are exact to ~1e-6).
      ASSERT_NEAR(got, exact, 0.01 * std::sqrt(wn * xn))
          << type_info(t).name << " token " << tok << " row " << r << " (vs raw-x float64)";
    }
  }
}

struct Case {
  Type type;
};

class Matmul : public ::testing::TestWithParam<Case> {};

TEST_P(Matmul, MatchesFloat64ReferencesOnOddShapes) {
  const Type t = GetParam().type;
  const int64_t bs = type_info(t).block_size;
  const int64_t k_unit = std::max<int64_t>(bs, 32);
  const Problem problems[] = {
      {1, k_unit, 1}, {7, 2 * k_unit, 1}, {5, k_unit, 3}, {33, 3 * k_unit, 5}, {130, 2 * k_unit, 9}, {64, 4 * k_unit, 1},
      {3, k_unit, 4}, {2, k_unit, 8},
  };
  ThreadPool pool1(1), pool3(3);
  std::vector<uint8_t> scratch;
  uint32_t seed = 11;
  for (const Problem& p : problems) {
    SCOPED_TRACE("n_out=" + std::to_string(p.n_out) + " n_in=" + std::to_string(p.n_in) +
                 " n_tokens=" + std::to_string(p.n_tokens));
    const Data d = make(t, p, seed++);
    std::vector<float> y1(p.n_tokens * p.n_out, NAN), y3(p.n_tokens * p.n_out, NAN);
    matmul(d.w.data(), t, p.n_out, p.n_in, d.x.data(), p.n_tokens, y1.data(), pool1, scratch);
    check(t, p, d, y1);
    matmul(d.w.data(), t, p.n_out, p.n_in, d.x.data(), p.n_tokens, y3.data(), pool3, scratch);
    // Thread count never changes the arithmetic of an output.
    ASSERT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * 4)) << "1 vs 3 threads differ";
    // Batch invariance: token t alone gives bit-identical outputs to token t in the batch.
    for (int64_t tok = 0; tok < p.n_tokens; ++tok) {
      std::vector<float> ys(p.n_out);
      matmul(d.w.data(), t, p.n_out, p.n_in, d.x.data() + tok * p.n_in, 1, ys.data(), pool3, scratch);
      ASSERT_EQ(0, std::memcmp(ys.data(), y1.data() + tok * p.n_out, p.n_out * 4)) << "token " << tok;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul,
                         ::testing::Values(Case{Type::F32}, Case{Type::F16}, Case{Type::BF16}, Case{Type::Q4_0},
                                           Case{Type::Q4_1}, Case{Type::Q5_0}, Case{Type::Q5_1}, Case{Type::Q8_0},
                                           Case{Type::Q4_K}, Case{Type::Q5_K}, Case{Type::Q6_K}),
                         [](const auto& info) { return std::string(type_info(info.param.type).name); });

TEST(MatmulMulti, MixedTypesAreBitIdenticalToSeparateCalls) {
  // Qwen-like: Q5_0 and Q8_0 share the Q8_0 activation; Q4_K needs Q8_K; F16 and F32 too.
  const int64_t n_in = 512, n_tokens = 5;
  const Type types[] = {Type::Q5_0, Type::Q8_0, Type::Q4_K, Type::F16, Type::F32, Type::Q4_1};
  const int64_t n_outs[] = {33, 8, 17, 3, 5, 0};
  ThreadPool pool(3);
  std::vector<uint8_t> scratch, scratch2;
  std::vector<Data> data;
  std::vector<std::vector<float>> ys, want;
  std::vector<MatmulJob> jobs;
  for (int i = 0; i < 6; ++i) data.push_back(make(types[i], {n_outs[i], n_in, n_tokens}, 100 + i));
  for (int i = 0; i < 6; ++i) {
    ys.emplace_back(n_outs[i] * n_tokens, NAN);
    want.emplace_back(n_outs[i] * n_tokens, NAN);
  }
  for (int i = 0; i < 6; ++i) jobs.push_back({data[i].w.data(), types[i], n_outs[i], ys[i].data()});
  const std::vector<float>& x = data[0].x;
  matmul_multi(jobs.data(), jobs.size(), n_in, x.data(), n_tokens, pool, scratch);
  for (int i = 0; i < 6; ++i) {
    matmul(data[i].w.data(), types[i], n_outs[i], n_in, x.data(), n_tokens, want[i].data(), pool, scratch2);
    if (!ys[i].empty()) {
      ASSERT_EQ(0, std::memcmp(ys[i].data(), want[i].data(), ys[i].size() * 4)) << type_info(types[i]).name;
    }
  }
  Data d0 = data[0];
  d0.x = x;
  check(types[0], {n_outs[0], n_in, n_tokens}, d0, ys[0]);
  // A bad job is reported before any output is written.
  std::vector<float> untouched(8 * n_tokens, 7.0f);
  MatmulJob bad[2] = {{data[1].w.data(), Type::Q8_0, 8, untouched.data()}, {data[2].w.data(), Type::Q2_K, 4, ys[2].data()}};
  EXPECT_THROW(matmul_multi(bad, 2, n_in, x.data(), n_tokens, pool, scratch), std::invalid_argument);
  EXPECT_EQ(untouched[0], 7.0f);
}

TEST(MatmulDecodeRows, OneOrTwoRowsATileGiveTheSameBits) {
  // Decode (one token) at one and two weight rows a tile, and while the choice is being
  // measured (blocks of calls at each), for every type with two-row tiles and the others.
  const int64_t n_in = 512;
  const Type types[] = {Type::Q5_0, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_1, Type::Q4_K, Type::F16};
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  for (Type t : types) {
    const Data d = make(t, {37, n_in, 1}, 7);
    std::vector<float> one(37, NAN), two(37, NAN), measured(37, NAN);
    set_decode_rows(1);
    matmul(d.w.data(), t, 37, n_in, d.x.data(), 1, one.data(), pool, scratch);
    set_decode_rows(2);
    matmul(d.w.data(), t, 37, n_in, d.x.data(), 1, two.data(), pool, scratch);
    ASSERT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * 4)) << type_info(t).name;
    check(t, {37, n_in, 1}, d, one);
    set_decode_rows(0);
    for (int i = 0; i < 600; ++i) {  // past the measuring calls (16 blocks of 32)
      matmul(d.w.data(), t, 37, n_in, d.x.data(), 1, measured.data(), pool, scratch);
      ASSERT_EQ(0, std::memcmp(one.data(), measured.data(), one.size() * 4)) << type_info(t).name << " call " << i;
    }
  }
  set_decode_rows(0);
  EXPECT_THROW(set_decode_rows(3), std::invalid_argument);
}

// The variant build selected by `use` against the base AVX2 build (vpmaddubsw + vpmaddwd):
// the same integers, so the same bits, decode and prefill tiles (and their tails) alike.
void same_bits_as_avx2(bool (*use)(bool), const char* what) {
  struct Restore {  // back to this CPU's default kernels however the test ends
    ~Restore() { swz::ggml::kern::use_default_kernels(); }
  } restore;
  if (!use(true)) GTEST_SKIP() << "this CPU or build has no " << what << " kernels";
  const int64_t n_in = 512;
  const Type types[] = {Type::Q5_0, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_1, Type::Q4_K, Type::Q6_K};
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  for (Type t : types)
    for (int64_t T : {int64_t(1), int64_t(5), int64_t(13)}) {
      const Data d = make(t, {21, n_in, T}, 11);
      std::vector<float> variant(21 * T, NAN), avx2(21 * T, NAN);
      use(true);
      matmul(d.w.data(), t, 21, n_in, d.x.data(), T, variant.data(), pool, scratch);
      use(false);
      matmul(d.w.data(), t, 21, n_in, d.x.data(), T, avx2.data(), pool, scratch);
      ASSERT_EQ(0, std::memcmp(variant.data(), avx2.data(), variant.size() * 4)) << type_info(t).name << " T=" << T;
      check(t, {21, n_in, T}, d, variant);
    }
}

TEST(MatmulVnni, SameBitsAsTheAvx2Kernels) { same_bits_as_avx2(swz::ggml::kern::use_vnni, "AVX-VNNI"); }

TEST(MatmulAvx512, SameBitsAsTheAvx2Kernels) { same_bits_as_avx2(swz::ggml::kern::use_avx512, "AVX-512 VNNI"); }

TEST(MatmulPacked, SameBitsAsVecDotOnGgmlBlocks) {
  // matmul's packed activation rows (Q4_0 / Q5_0: unsigned codes plus the packed offset
  // term; kernels.h) against vec_dot on ggml's Q8_0 / Q8_1 blocks (signed codes, the sign
  // trick): the same integers per lane, so the same bits, in every tile shape.
  const int64_t n_in = 384, n_out = 11;
  const Type types[] = {Type::Q5_0, Type::Q4_0, Type::Q8_0, Type::Q4_1, Type::Q5_1};
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  for (Type t : types)
    for (int64_t T : {int64_t(1), int64_t(3), int64_t(9)}) {
      const Data d = make(t, {n_out, n_in, T}, 23);
      std::vector<float> y(n_out * T, NAN);
      matmul(d.w.data(), t, n_out, n_in, d.x.data(), T, y.data(), pool, scratch);
      const Type at = vec_dot_type(t);
      std::vector<uint8_t> xq(row_size(at, n_in));
      const size_t rb = row_size(t, n_in);
      for (int64_t tok = 0; tok < T; ++tok) {
        quantize_row_activation(at, d.x.data() + tok * n_in, xq.data(), n_in);
        for (int64_t r = 0; r < n_out; ++r) {
          const float want = vec_dot(t, n_in, d.w.data() + r * rb, xq.data());
          ASSERT_EQ(0, std::memcmp(&want, &y[tok * n_out + r], 4))
              << type_info(t).name << " T=" << T << " token " << tok << " row " << r << ": " << want << " vs "
              << y[tok * n_out + r];
        }
      }
    }
}

TEST(MatmulErrors, RejectsBadTypesAndShapes) {
  ThreadPool pool(2);
  std::vector<uint8_t> scratch;
  std::vector<uint8_t> w(4096);
  std::vector<float> x(512), y(512);
  EXPECT_THROW(matmul(w.data(), Type::Q2_K, 2, 256, x.data(), 1, y.data(), pool, scratch), std::invalid_argument);
  EXPECT_THROW(matmul(w.data(), Type::Q8_K, 2, 256, x.data(), 1, y.data(), pool, scratch), std::invalid_argument);
  EXPECT_THROW(matmul(w.data(), Type::Q4_1, 2, 48, x.data(), 1, y.data(), pool, scratch), std::invalid_argument);
  EXPECT_THROW(matmul(w.data(), Type::Q4_K, 2, 32, x.data(), 1, y.data(), pool, scratch), std::invalid_argument);
  EXPECT_THROW(matmul(w.data(), Type::F32, -1, 32, x.data(), 1, y.data(), pool, scratch), std::invalid_argument);
  // Empty problems are no-ops.
  EXPECT_NO_THROW(matmul(w.data(), Type::Q8_0, 0, 32, x.data(), 1, y.data(), pool, scratch));
  EXPECT_NO_THROW(matmul(w.data(), Type::Q8_0, 4, 32, x.data(), 0, y.data(), pool, scratch));
}

}  // namespace
}  // namespace swz::ggml
