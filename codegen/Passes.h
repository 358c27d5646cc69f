//===- Passes.h - codegen passes ----------------------------------*- C++ -*-===//
#ifndef SWZ_CODEGEN_PASSES_H
#define SWZ_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"

namespace swz::codegen {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "codegen/Passes.h.inc"
} // namespace swz::codegen

#endif // SWZ_CODEGEN_PASSES_H
