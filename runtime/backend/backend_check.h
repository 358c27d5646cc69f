// Numeric checks of a backend on a real package's kernels, shared by the swz-backend-check
// tool (run on the H200 for cuda, on lavapipe for vulkan) and test/unit/backend: add_f32,
// rms_norm_f32 and every decode GEMV matmul_<type> the package has (any ggml type that
// runtime/ggml can quantize) are launched through Backend::launch with every memref
// argument at a non-zero byte offset inside a larger buffer whose other bytes hold a
// sentinel, and compared with a float64 reference computed here. The grid comes from the
// kernel's own manifest rule (kernels[].launch.grid), evaluated with package::Expr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace swz::package {
struct Manifest;
}

namespace swz::backend::check {

struct Result {
  std::string kernel;  ///< manifest entry, e.g. "spirv.add_f32"
  std::string label;   ///< shape, e.g. "n=100003 @off 256"
  double max_err = 0;  ///< max |device - reference|
  std::string tolerance;
  int64_t bad = 0;      ///< elements outside tolerance (+ sentinel bytes overwritten)
  int64_t checked = 0;  ///< elements compared
  std::string error;    ///< an exception's message, if the case did not run
  bool ok() const { return error.empty() && bad == 0 && checked > 0; }
};

/// Byte alignment of every sub-range the checks place in a buffer; sub-ranges start at
/// 1 x, 2 x ... this, never at 0.
inline constexpr size_t kOffsetAlign = kMemrefOffsetAlignment;

/// Runs every check `m`'s kernels allow (kernels already loaded into `b`). A kernel the
/// package lacks is left out; a case that throws is a Result with `error` set.
std::vector<Result> run_checks(Backend& b, const package::Manifest& m);

/// The grid of kernel `entry` (its launch.grid rule) for the symbol values `vals`
/// (e.g. {{"N", 300}, {"T", 1}}). Throws Error if the rule names another symbol.
std::array<uint32_t, 3> grid_of(const package::Manifest& m, const std::string& entry,
                                const std::vector<std::pair<std::string, double>>& vals);

/// One line per result, aligned: "ok   spirv.add_f32  n=100003 ...  max |err| 0  (tol ...)".
std::string format_table(const std::vector<Result>& results);

}  // namespace swz::backend::check
