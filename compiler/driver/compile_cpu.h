//===- compile_cpu.h - the cpu target ---------------------------*- C++ -*-===//
//
// For target "cpu" no code is generated: the kernels are the hand-written, vectorized
// C++ kernels built into swizzle-rt's cpu backend (runtime/cpu). The package still
// lists them, so the manifest states exactly which kernels a model needs and the runtime
// can refuse a package that asks for one it lacks. Convention (docs/package-format.md):
// one entry per distinct (op kind, weight type) of the graph, named
// "cpu.<op>.<type>" — e.g. "cpu.matmul.q4_1", "cpu.get_rows.q8_0", "cpu.rms_norm.f32",
// "cpu.attention.f16kv" (the KV cache is stored as f16) — with file null, launch
// {"threads": "pool"} (the runtime's thread pool splits the work) and schedule null.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "package/package.h"

namespace swz::compiler {

/// Adds the cpu kernel entries the graph needs to `m.kernels` and annotates every graph
/// op with its "kernel" entry name. Throws CompileError for an op kind it does not know.
void addCpuKernels(package::Manifest &m);

} // namespace swz::compiler
