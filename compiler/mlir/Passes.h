//===- Passes.h - swz passes --------------------------------------*- C++ -*-===//
//
// swz-apply-schedule, swz-check-bank-conflicts, swz-materialize-swizzle, swz-fuse,
// swz-lower-tiles: see Passes.td for what each does and an example.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_PASSES_H
#define SWZ_COMPILER_MLIR_PASSES_H

#include "compiler/mlir/Schedule.h"

#include "mlir/Pass/Pass.h"

#include <memory>

namespace swz {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "compiler/mlir/Passes.h.inc"
// GEN_PASS_REGISTRATION defines registerSwzPasses(), which registers all of
// them with the global pass registry (for swizzle-opt).

/// swz-apply-schedule with the schedule given rather than read from a file (swizzlec's
/// built-in or --schedule-dir schedule, already parsed).
std::unique_ptr<mlir::Pass> createSwzApplySchedule(const schedule::TargetSchedule &s);
} // namespace swz

#endif // SWZ_COMPILER_MLIR_PASSES_H
