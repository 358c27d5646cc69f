// Internal: register-tiled dot-product kernels shared by vec_dot and matmul.
//
// A tile kernel computes out[t*ldo + r] = dot(W row r, A row t) for r < R, t < T, where
// W rows are `w_stride` bytes apart (type wtype, n elements) and A rows are `a_stride` bytes
// apart (type vec_dot_type(wtype)). One weight block is unpacked once and used for all T
// activation rows, so n_tokens > 1 is compute-bound rather than bound by weight loads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml/ggml_types.h"

namespace swz::ggml::kern {

using TileFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, const uint8_t* a, size_t a_stride, float* out,
                        int64_t ldo);

inline constexpr int kMaxR = 4;
inline constexpr int kMaxT = 4;

/// Kernels for one weight type: fn[R-1][T-1] for the tile shapes it provides (others null;
/// fn[0][0] is always set). `rows_per_tile`/`toks_per_tile` is the preferred large tile.
struct KernelSet {
  TileFn fn[kMaxR][kMaxT] = {};
  int rows_per_tile = 1;
  int toks_per_tile = 1;
};

/// The kernels for `wtype` (AVX2 when compiled for it, scalar otherwise); nullptr when the
/// type has no dot product.
const KernelSet* kernels_for(Type wtype);
/// The portable scalar 1x1 kernel for `wtype`; nullptr when unsupported.
TileFn scalar_kernel_for(Type wtype);

}  // namespace swz::ggml::kern
