//===- compile_cpu.h - the cpu target ---------------------------*- C++ -*-===//
//
// For target "cpu" no code is generated: the kernels are the hand-written, vectorized
// C++ kernels built into swizzle-rt's cpu backend (runtime/cpu/kernels.h). The package
// lists them, one entry per distinct (op kind, weight type) of the graph, named
// "cpu.<op>.<type>" — e.g. "cpu.matmul.q4_1", "cpu.get_rows.q8_0", "cpu.rms_norm.f32",
// "cpu.attention.f16kv" (the KV cache is stored as f16) — with file null, launch
// {"threads": "pool"} and schedule null, and the signature of runtime/cpu/signatures.h
// (the table the runtime checks against). Every graph op carries launch records in the
// same contract as the GPU targets' (docs/package-format.md, "The launch contract"), so
// one graph executor runs every target.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "package/package.h"

namespace swz::compiler {

/// Adds the cpu kernel entries the graph needs to `m.kernels` and the launch records of
/// every graph op (`launches`). Throws CompileError for an op kind or weight it does not
/// know.
void addCpuKernels(package::Manifest &m);

} // namespace swz::compiler
