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
inline constexpr int kMaxT = 8;

/// Kernels for one weight type: fn[R-1][T-1] for the tile shapes it provides (others null;
/// fn[0][0] is always set; T > 4 only with R = 1). `rows_per_tile`/`toks_per_tile` is the
/// preferred large tile.
struct KernelSet {
  TileFn fn[kMaxR][kMaxT] = {};
  int rows_per_tile = 1;
  int toks_per_tile = 1;
};

/// The kernels for `wtype` (AVX2 when compiled for it, scalar otherwise); nullptr when the
/// type has no dot product. Activation rows are in ggml's block layout of vec_dot_type.
const KernelSet* kernels_for(Type wtype);

/// Kernels whose activation rows are in the packed layout below (what matmul uses); falls
/// back to kernels_for when a type has no packed variant (then the layout is ggml's).
const KernelSet* packed_kernels_for(Type wtype);

/// Packed activation row for Q8_0/Q8_1 (n elements, nb = n/32 blocks): int8 qs[n], then
/// float d[nb] (the fp16 scale, widened), then float s[nb] (Q8_1's fp16 s, widened; 0 for
/// Q8_0), then for Q8_0 only int32 c[nb][8], c[i][g] = -16 * the sum of qs[32i+4g .. +3]
/// (so Q4_0/Q5_0 weights dot as unsigned bytes: sum (q - o) a = sum q a + (o/16) c, lane
/// by lane the same integers as the signed form); stride rounded up to 32 bytes. Same
/// numbers as ggml's blocks, friendlier to SIMD.
/// Other activation types use their ggml layout unchanged.
size_t packed_act_row_size(Type act_type, int64_t n);
/// True when packed_kernels_for is available (the AVX2 build).
bool packed_act_enabled();
/// quantize_row_activation into the packed layout.
void quantize_row_activation_packed(Type act_type, const float* src, uint8_t* dst, int64_t n);
/// Whether kernels_for / packed_kernels_for hand out the AVX-VNNI build of the AVX2 kernels
/// (vec_dot_vnni.cpp: vpdpbusd for the int8 dot products, the same results bit for bit);
/// `on` = false: the base AVX2 build. The default (use_default_kernels) is the AVX-512
/// build where the CPU has AVX-512 VNNI/VL/BW and SWZ_GGML_AVX512 is not 0, else AVX-VNNI
/// where the CPU has it and SWZ_GGML_VNNI is not 0, else the base build. `on` = true
/// returns false (and selects the base build) where the CPU or the build lacks it. For
/// tests and benchmarks; not to be flipped while matmuls run.
bool use_vnni(bool on);
/// The same for the AVX-512 build (vec_dot_avx512.cpp: 256-bit vectors with vpdpbusd and
/// 32 registers, which lets larger tiles keep their accumulators in registers; the same
/// results bit for bit).
bool use_avx512(bool on);
/// Back to the default choice above.
void use_default_kernels();
/// The portable scalar 1x1 kernel for `wtype`; nullptr when unsupported.
TileFn scalar_kernel_for(Type wtype);

}  // namespace swz::ggml::kern
