//===- swizzle-opt.cpp - mlir-opt with the swz dialect and passes ---------===//
//
// Registers only what the lit tests and the kernel pipelines parse and run:
// the swz dialect and passes, the upstream dialects kernels are written in
// (func, arith, memref, scf, vector, gpu, nvgpu) and the ones they lower to
// (nvvm, llvm, spirv), the gpu->NVVM and gpu->SPIR-V pipelines, and the
// target/translation interfaces gpu-module-to-binary needs. Not
// registerAllPasses(): that would compile and link all of MLIR.
//
//===----------------------------------------------------------------------===//
#include "Swz/SwzDialect.h"
#include "codegen/Passes.h"
#include "compiler/mlir/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRVPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRVPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/SPIRV/Target.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<swz::SwzDialect, mlir::arith::ArithDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::index::IndexDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::NVVM::NVVMDialect, mlir::scf::SCFDialect,
                  mlir::spirv::SPIRVDialect, mlir::ub::UBDialect,
                  mlir::vector::VectorDialect>();
  // Patterns convert-gpu-to-nvvm collects from each dialect.
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  mlir::ub::registerConvertUBToLLVMInterface(registry);
  // gpu-module-to-binary: targets and LLVM IR translation.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::spirv::registerSPIRVTargetInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);

  swz::registerSwzPasses();
  swz::codegen::registerSwzCodegenPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::gpu::registerGPUToNVVMPipeline(); // gpu-lower-to-nvvm-pipeline
  mlir::registerGpuModuleToBinaryPass();
  mlir::registerGpuSPIRVAttachTarget();
  mlir::registerGpuNVVMAttachTarget();
  mlir::registerPass([] { return mlir::createConvertGPUToSPIRVPass(); });
  mlir::registerPass([] { return mlir::createConvertMathToSPIRVPass(); });
  mlir::spirv::registerSPIRVLowerABIAttributesPass(); // spirv-lower-abi-attrs
  mlir::spirv::registerSPIRVUpdateVCEPass();          // spirv-update-vce
  mlir::spirv::registerSPIRVPasses();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "swizzle-opt: the swz dialect and passes\n", registry));
}
