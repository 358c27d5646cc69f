// Helpers shared by the ggml unit tests: test-vector files and float64 references.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <cmath>

#include "ggml/blocks.h"
#include "ggml/fp16.h"
#include "ggml/quants.h"

namespace swz::ggml::test {

inline std::string data_path(const std::string& name) { return std::string(SWZ_SOURCE_DIR) + "/test/data/ggml/" + name; }

inline std::vector<uint8_t> read_bytes(const std::string& name) {
  std::ifstream f(data_path(name), std::ios::binary);
  if (!f) throw std::runtime_error("missing test vector " + data_path(name) + " (run gen_ggml_vectors.py)");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline std::vector<float> read_f32(const std::string& name) {
  const std::vector<uint8_t> b = read_bytes(name);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

constexpr int kRows = 16;    // gen_ggml_vectors.py N_ROWS
constexpr int kCols = 1024;  // gen_ggml_vectors.py N_COLS

/// Float64 value of the dot product ggml defines for (weight row, activation row), and the
/// sum of |products| (the scale of fp32 rounding). It is dequant(w) . dequant(a), except that
/// for Q4_1/Q5_1 x Q8_1 the min term uses Q8_1's stored s = fp16(d*sum q) in place of
/// d_fp16*sum q (ggml_vec_dot_q4_1_q8_1: sum_b d_w*d_a*sum(q_w*q_a) + m_w*s_a).
struct Exact {
  double value = 0, magnitude = 0;
};
inline Exact exact_dot(Type wt, int64_t n, const void* w, const void* a) {
  const Type at = vec_dot_type(wt);
  std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
  dequantize_row(wt, w, wf.data(), n);
  dequantize_row(at, a, af.data(), n);
  Exact e;
  for (int64_t i = 0; i < n; ++i) {
    e.value += double(wf[i]) * af[i];
    e.magnitude += std::fabs(double(wf[i]) * af[i]);
  }
  if (at == Type::Q8_1) {
    const auto* ab = static_cast<const BlockQ8_1*>(a);
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint16_t m = wt == Type::Q4_1 ? static_cast<const BlockQ4_1*>(w)[b].m : static_cast<const BlockQ5_1*>(w)[b].m;
      double qsum = 0;
      for (int j = 0; j < 32; ++j) qsum += ab[b].qs[j];
      const double diff = double(fp16_to_fp32(ab[b].s)) - double(fp16_to_fp32(ab[b].d)) * qsum;
      e.value += double(fp16_to_fp32(m)) * diff;
    }
  }
  return e;
}

}  // namespace swz::ggml::test
