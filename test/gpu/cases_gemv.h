//===- cases_gemv.h - float64 reference for the decode-side GEMV cases ---*- C++ -*-===//
//
// The reference dequantizers behind gemvCases (cases_gemv.cpp), exposed so a unit
// test can check them against runtime/ggml's dequantize_row. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_CODEGEN_CHECK_CASES_GEMV_H
#define SWZ_CODEGEN_CHECK_CASES_GEMV_H

#include <cstdint>
#include <string>
#include <vector>

namespace swz::check::gemv {

/// Weight types the gemv_<type>.mlir kernels take: "q4_0", "q4_1", "q5_0", "q8_0",
/// "q4_k", "q6_k", "f16".
const std::vector<std::string> &weightTypes();

/// Elements per block (32, 256 for k-quants, 1 for f16) and bytes per block.
int blockElements(const std::string &type);
int blockBytes(const std::string &type);

/// IEEE binary16 bits -> double (exact; subnormals, inf and NaN included).
double halfToDouble(uint16_t h);
/// double -> IEEE binary16 bits, round to nearest even (overflow -> inf).
uint16_t doubleToHalf(double v);

/// Dequantizes one row of `k` elements of `type` (GGUF block layout, ggml-common.h)
/// in float64, exactly as the format defines it. `w[i]` gets the value; `mag[i]`
/// (if non-null) gets |scale * q| + |offset| for the decomposition the kernels use
/// (weight = scale * q + offset with q >= 0), the size of the f32 terms a kernel
/// forms for this element (what its rounding error is proportional to).
/// Throws std::invalid_argument for an unknown type or k not a multiple of the block.
void dequantRow(const std::string &type, const uint8_t *row, int64_t k, double *w,
                double *mag);

/// `rows` random rows of `k` elements as valid blocks of `type`: random quant bits
/// (every bit pattern), scales as the quantizers produce them (positive f16 d in
/// [2^-9, 2^-5], signed Q4_1 minimum, random 6-bit k-quant scales and mins, random
/// int8 Q6_K scales). F16: values in [-1, 1). Deterministic in `seed`.
std::vector<uint8_t> randomWeights(const std::string &type, int64_t rows, int64_t k,
                                   uint64_t seed);

} // namespace swz::check::gemv

#endif // SWZ_CODEGEN_CHECK_CASES_GEMV_H
