//===- Codegen.cpp - kernel compilation: registry, pipelines, extraction --===//
//
// One translation unit for everything that touches the GPU/NVVM/SPIR-V dialect
// headers: the dialect registry swizzle-opt and compileGpuKernels share, the
// swz-extract-kernels pass and compileGpuKernels itself.
//
//===----------------------------------------------------------------------===//
#include "codegen/Passes.h"
#include "codegen/GpuCompiler.h"
#include "codegen/Registry.h"

#include "Swz/SwzDialect.h"
#include "compiler/mlir/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRVPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRVPass.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/SPIRV/Target.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>
#include <stdexcept>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace swz::codegen {
#define GEN_PASS_DEF_SWZEXTRACTKERNELS
#include "codegen/Passes.h.inc"
} // namespace swz::codegen

using namespace mlir;

namespace swz::codegen {
namespace {

struct ExtractKernels : impl::SwzExtractKernelsBase<ExtractKernels> {
  using SwzExtractKernelsBase::SwzExtractKernelsBase;

  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](gpu::BinaryOp binary) {
      auto objects = binary.getObjects();
      for (Attribute a : objects) {
        auto object = cast<gpu::ObjectAttr>(a);
        std::string ext, chip;
        if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget())) {
          ext = object.getFormat() == gpu::CompilationTarget::Assembly ? "ptx" : "cubin";
          chip = nvvm.getChip().str();
        } else if (isa<spirv::TargetEnvAttr>(object.getTarget())) {
          ext = "spv";
          chip = "spirv";
        } else {
          binary.emitError() << "swz-extract-kernels: unsupported target "
                             << object.getTarget();
          failedAny = true;
          continue;
        }
        StringRef bytes = object.getObject().getValue();
        if (ext == "ptx")
          bytes = bytes.rtrim(StringRef("\0", 1));
        std::string name = binary.getSymName().str();
        if (objects.size() > 1)
          name += "." + chip;
        llvm::SmallString<256> path(outputDir);
        llvm::sys::path::append(path, name + "." + ext);
        std::error_code ec;
        llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
        if (ec) {
          binary.emitError() << "swz-extract-kernels: cannot write " << path << ": "
                             << ec.message();
          failedAny = true;
          continue;
        }
        os << bytes;
        // mlir::emitRemark(loc), not op->emitRemark(): no op dump attached.
        emitRemark(binary.getLoc()) << "wrote " << bytes.size() << " bytes of " << ext
                            << " to " << llvm::sys::path::filename(path);
      }
    });
    // spirv.module ops produced by convert-gpu-to-spirv next to their gpu.module.
    getOperation().walk([&](spirv::ModuleOp module) {
      SmallVector<uint32_t, 0> words;
      if (failed(spirv::serialize(module, words))) {
        failedAny = true;
        return;
      }
      StringRef name = module.getSymName().value_or("spirv_module");
      name.consume_front("__spv__");
      llvm::SmallString<256> path(outputDir);
      llvm::sys::path::append(path, name + ".spv");
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
      if (ec) {
        module.emitError() << "swz-extract-kernels: cannot write " << path << ": "
                           << ec.message();
        failedAny = true;
        return;
      }
      os.write(reinterpret_cast<const char *>(words.data()),
               words.size() * sizeof(uint32_t));
      emitRemark(module.getLoc()) << "wrote " << words.size() * sizeof(uint32_t)
                          << " bytes of spv to " << llvm::sys::path::filename(path);
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
} // namespace swz::codegen

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

void swz::codegen::registerSwzDialects(mlir::DialectRegistry &registry) {
  registry.insert<swz::SwzDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, index::IndexDialect,
                  LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
                  nvgpu::NVGPUDialect, NVVM::NVVMDialect, scf::SCFDialect,
                  spirv::SPIRVDialect, ub::UBDialect, vector::VectorDialect>();
  // Patterns convert-gpu-to-nvvm collects from each dialect.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  // gpu-module-to-binary: targets and LLVM IR translation.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  spirv::registerSPIRVTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
}

void swz::codegen::registerSwzCompilerPasses() {
  swz::registerSwzPasses();
  registerSwzCodegenPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  gpu::registerGPUToNVVMPipeline(); // gpu-lower-to-nvvm-pipeline
  registerGpuModuleToBinaryPass();
  registerGpuSPIRVAttachTarget();
  registerGpuNVVMAttachTarget();
  registerPass([] { return createConvertGPUToSPIRVPass(); });
  registerPass([] { return createConvertMathToSPIRVPass(); });
  spirv::registerSPIRVLowerABIAttributesPass(); // spirv-lower-abi-attrs
  spirv::registerSPIRVUpdateVCEPass();          // spirv-update-vce
}

//===----------------------------------------------------------------------===//
// compileGpuKernels
//===----------------------------------------------------------------------===//

std::vector<swz::codegen::CompiledKernel>
swz::codegen::compileGpuKernels(std::string_view mlirSource, const std::string &target,
                                const std::string &cudaRoot) {
  bool isPtx = target.rfind("sm_", 0) == 0 && target.size() > 3;
  if (!isPtx && target != "spirv")
    throw std::invalid_argument("unknown GPU target '" + target +
                                "' (expected sm_XY or spirv)");
  if (isPtx && !cudaRoot.empty())
    ::setenv("CUDA_ROOT", cudaRoot.c_str(), /*overwrite=*/1);

  DialectRegistry registry;
  registerSwzDialects(registry);
  MLIRContext ctx(registry);
  ctx.allowUnregisteredDialects(false);
  std::string diagnostics;
  std::vector<std::string> remarks;  // swz-check-bank-conflicts' per-tile reports
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      remarks.push_back(diag.str());
      return success();
    }
    llvm::raw_string_ostream os(diagnostics);
    os << diag.getLocation() << ": " << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      os << "  note: " << note << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      llvm::StringRef(mlirSource.data(), mlirSource.size()), &ctx, "kernel source");
  if (!module)
    throw std::runtime_error("cannot parse kernel source:\n" + diagnostics);

  // Launch records come from the kernels before lowering.
  std::vector<CompiledKernel> kernels;
  module->walk([&](gpu::GPUFuncOp fn) {
    if (!fn.isKernel())
      return;
    CompiledKernel k;
    k.module = fn->getParentOfType<gpu::GPUModuleOp>().getName().str();
    k.entry = fn.getName().str();
    k.target = target;
    k.format = isPtx ? "ptx" : "spv";
    if (auto known = fn.getKnownBlockSizeAttr())
      for (unsigned i = 0; i < 3 && i < known.size(); ++i)
        k.block[i] = known[i];
    if (auto abi = fn->getAttrOfType<spirv::EntryPointABIAttr>("spirv.entry_point_abi"))
      if (auto wg = abi.getWorkgroupSize())
        for (unsigned i = 0; i < 3 && i < wg.size(); ++i)
          k.block[i] = wg[i];
    if (auto grid = fn->getAttrOfType<StringAttr>("swz.grid"))
      k.grid = grid.str();
    for (Type t : fn.getArgumentTypes()) {
      std::string s;
      llvm::raw_string_ostream os(s);
      t.print(os);
      k.arguments.push_back(s);
    }
    kernels.push_back(std::move(k));
  });
  if (kernels.empty())
    throw std::runtime_error("kernel source has no gpu.func ... kernel");

  // Shared-memory tiles: the analysis reports each one and fails the compilation
  // where a tile claims swz.conflict_free but is not. Reports are "memref.global
  // @<name>: ..."; a tile belongs to the gpu.module that declares it.
  {
    llvm::StringMap<std::string> tileModule;
    module->walk([&](memref::GlobalOp g) {
      if (auto gm = g->getParentOfType<gpu::GPUModuleOp>())
        tileModule[g.getSymName()] = gm.getName().str();
    });
    PassManager check(&ctx);
    check.addPass(swz::createSwzCheckBankConflicts());
    remarks.clear();
    if (failed(check.run(*module)))
      throw std::runtime_error("shared-memory bank-conflict check failed:\n" + diagnostics);
    for (const std::string &r : remarks) {
      StringRef rest(r);
      if (!rest.consume_front("memref.global @"))
        continue;
      auto it = tileModule.find(rest.take_until([](char c) { return c == ':'; }));
      if (it == tileModule.end())
        continue;
      for (CompiledKernel &k : kernels)
        if (k.module == it->second)
          k.sharedMemory.push_back(r);
    }
  }

  PassManager pm(&ctx);
  pm.addPass(swz::createSwzMaterializeSwizzle());
  if (isPtx) {
    gpu::GPUToNVVMPipelineOptions options;
    options.cubinChip = target;
    options.cubinFormat = "isa";
    gpu::buildLowerToNVVMPassPipeline(pm, options);
  } else {
    pm.addPass(createConvertMathToSPIRVPass());
    pm.addPass(createConvertGPUToSPIRVPass());
    OpPassManager &spv = pm.nest<spirv::ModuleOp>();
    spv.addPass(spirv::createSPIRVLowerABIAttributesPass());
    spv.addPass(spirv::createSPIRVUpdateVCEPass());
  }
  if (failed(pm.run(*module)))
    throw std::runtime_error("lowering to " + target + " failed:\n" + diagnostics);

  // Collect the module binaries.
  llvm::StringMap<std::string> binaries;
  module->walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects())
      binaries[binary.getSymName()] =
          cast<gpu::ObjectAttr>(a).getObject().getValue().rtrim(StringRef("\0", 1)).str();
  });
  module->walk([&](spirv::ModuleOp spv) {
    SmallVector<uint32_t, 0> words;
    if (failed(spirv::serialize(spv, words)))
      return;
    StringRef name = spv.getSymName().value_or("");
    name.consume_front("__spv__");
    binaries[name] = std::string(reinterpret_cast<const char *>(words.data()),
                                 words.size() * sizeof(uint32_t));
  });
  for (CompiledKernel &k : kernels) {
    auto it = binaries.find(k.module);
    if (it == binaries.end())
      throw std::runtime_error("no " + k.format + " was produced for module '" +
                               k.module + "'" +
                               (diagnostics.empty() ? "" : ":\n" + diagnostics));
    k.binary = it->second;
  }
  return kernels;
}

const std::string &swz::codegen::builtinKernelSource(const std::string &stem) {
  std::string known;
  for (const auto &[name, text] : builtinKernelSources()) {
    if (name == stem)
      return text;
    known += (known.empty() ? "" : ", ") + name;
  }
  throw std::invalid_argument("no built-in kernel '" + stem + "' (known: " + known + ")");
}
