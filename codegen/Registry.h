//===- Registry.h - dialects and passes of the swz compiler --------*- C++ -*-===//
#ifndef SWZ_CODEGEN_REGISTRY_H
#define SWZ_CODEGEN_REGISTRY_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace swz::codegen {
/// Registers exactly the dialects, dialect interfaces (ConvertToLLVM patterns,
/// NVVM/SPIR-V targets, LLVM IR translations) that swz kernels and their
/// lowering need. Not registerAllDialects(): keeps compile and link times small.
void registerSwzDialects(mlir::DialectRegistry &registry);
/// Registers the swz passes plus the upstream passes swizzle-opt exposes
/// (gpu-lower-to-nvvm-pipeline, gpu-module-to-binary, convert-gpu-to-spirv, ...).
void registerSwzCompilerPasses();
} // namespace swz::codegen

#endif // SWZ_CODEGEN_REGISTRY_H
