//===- swizzle-opt.cpp - mlir-opt with the swz dialect and passes ---------===//
//
// Registers only what the lit tests and the kernel pipelines parse and run (see
// codegen/Registry.h): the swz dialect and passes, the upstream dialects kernels
// are written in and lower to, the gpu->NVVM and gpu->SPIR-V passes. Not
// registerAllPasses(): that would compile and link all of MLIR.
//
//===----------------------------------------------------------------------===//
#include "codegen/Registry.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  swz::codegen::registerSwzDialects(registry);
  swz::codegen::registerSwzCompilerPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "swizzle-opt: the swz dialect and passes\n", registry));
}
