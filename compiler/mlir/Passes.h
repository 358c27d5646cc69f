//===- Passes.h - swz passes --------------------------------------*- C++ -*-===//
//
// swz-apply-schedule, swz-check-bank-conflicts, swz-materialize-swizzle: see
// Passes.td for what each does and an example.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_PASSES_H
#define SWZ_COMPILER_MLIR_PASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace swz {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "compiler/mlir/Passes.h.inc"
// GEN_PASS_REGISTRATION defines registerSwzPasses(), which registers all of
// them with the global pass registry (for swizzle-opt).
} // namespace swz

#endif // SWZ_COMPILER_MLIR_PASSES_H
