//===- ExtractKernels.cpp - write gpu.binary objects to files -------------===//
#include "codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
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
