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
#include "compiler/mlir/BankConflicts.h"
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
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Verifier.h"
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

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <set>
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
#define GEN_PASS_DEF_SWZOUTLINEKERNELS
#define GEN_PASS_DEF_SWZSPIRVWORKGROUPMEMORY
#define GEN_PASS_DEF_SWZDYNAMICSHAREDMEMORY
#include "codegen/Passes.h.inc"
} // namespace swz::codegen

using namespace mlir;

namespace swz::codegen {
namespace {

/// Bank-conflict degrees of the shared-memory tiles `fn` reads with ldmatrix or
/// fills with cp.async: the same tiles and layouts swz-check-bank-conflicts checks.
std::vector<CompiledKernel::SmemTile> analyzeSmemTiles(gpu::GPUFuncOp fn) {
  std::vector<CompiledKernel::SmemTile> tiles;
  llvm::SmallPtrSet<Operation *, 4> seen;
  fn.walk([&](memref::GetGlobalOp get) {
    bool staged = llvm::any_of(get.getResult().getUsers(), [](Operation *user) {
      StringRef name = user->getName().getStringRef();
      return name == "nvgpu.ldmatrix" || name == "nvgpu.device_async_copy";
    });
    auto global = dyn_cast_or_null<memref::GlobalOp>(
        SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr()));
    if (!staged || !global || !seen.insert(global).second)
      return;
    MemRefType type = global.getType();
    if (type.getRank() != 2 || !type.hasStaticShape())
      return; // swz-check-bank-conflicts reports this as an error
    std::optional<bank::Swizzle> sw;
    auto attr = global->getAttrOfType<swz::SwizzleAttr>("swz.smem_layout");
    if (!attr)
      attr = global->getAttrOfType<swz::SwizzleAttr>("swz.smem_swizzled");
    if (attr)
      sw = bank::Swizzle{attr.getBits(), attr.getBase(), attr.getShift()};
    unsigned eb = std::max<unsigned>(1, type.getElementType().getIntOrFloatBitWidth() / 8);
    bank::SmemLayout layout{type.getDimSize(0), type.getDimSize(1), type.getDimSize(1), eb, sw};
    CompiledKernel::SmemTile tile;
    tile.name = global.getSymName().str();
    tile.layout = layout.str();
    tile.ldmatrixDegree = bank::analyze(layout, bank::Access::LdmatrixX4).maxDegree;
    tile.cpAsyncDegree = bank::analyze(layout, bank::Access::CpAsync16).maxDegree;
    tile.claimedConflictFree = global->hasAttr("swz.conflict_free");
    tile.rows = type.getDimSize(0);
    tile.cols = type.getDimSize(1);
    tile.elemBytes = eb;
    if (sw)
      tile.swizzle = std::array<unsigned, 3>{sw->bits, sw->base, sw->shift};
    tiles.push_back(std::move(tile));
  });
  return tiles;
}

/// Bytes of a statically shaped memref type (0 for a dynamic one).
int64_t memrefBytes(MemRefType type) {
  if (!type.hasStaticShape())
    return 0;
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementType().getIntOrFloatBitWidth() / 8);
}

/// True for `#gpu.address_space<workgroup>` and the integer memory space 3.
bool isWorkgroupMemory(Attribute space) {
  if (auto gpuSpace = dyn_cast_or_null<gpu::AddressSpaceAttr>(space))
    return gpuSpace.getValue() == gpu::AddressSpace::Workgroup;
  if (auto i = dyn_cast_or_null<IntegerAttr>(space))
    return i.getInt() == 3;
  return false;
}

/// Static workgroup memory `fn` uses: each workgroup memref.global it reads once,
/// workgroup memref.allocs, and gpu.func workgroup attributions.
int64_t workgroupBytes(gpu::GPUFuncOp fn) {
  int64_t total = 0;
  llvm::SmallPtrSet<Operation *, 8> globals;
  fn.walk([&](memref::GetGlobalOp get) {
    auto global = dyn_cast_or_null<memref::GlobalOp>(
        SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr()));
    if (global && isWorkgroupMemory(global.getType().getMemorySpace()) &&
        globals.insert(global).second)
      total += memrefBytes(global.getType());
  });
  fn.walk([&](memref::AllocOp alloc) {
    if (isWorkgroupMemory(alloc.getType().getMemorySpace()))
      total += memrefBytes(alloc.getType());
  });
  for (BlockArgument a : fn.getWorkgroupAttributions())
    if (auto t = dyn_cast<MemRefType>(a.getType()))
      total += memrefBytes(t);
  return total;
}

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

//===----------------------------------------------------------------------===//
// swz-outline-kernels
//===----------------------------------------------------------------------===//

/// The kernels of model-graph op `op` under kernel-table key `key`: kernelsFor's, except
/// that a matmul whose N x K weight falls in one of the schedule's gemm shape classes
/// (schedule::gemmClassFor) multiplies its prefill with that class's kernel,
/// gemm_f16_<class> (generated by swz-apply-schedule / swz-lower-tiles beside gemm_f16).
std::vector<KernelRef> kernelsForOp(Operation *op, const std::string &key, bool ptx,
                                    const schedule::TargetSchedule *s) {
  std::vector<KernelRef> refs = kernelsFor(key, ptx);
  auto mm = dyn_cast<swz::MatmulOp>(op);
  if (!mm || !s || s->gemmClasses.empty())
    return refs;
  auto w = cast<RankedTensorType>(mm.getW().getType());
  if (w.getRank() != 2 || w.isDynamicDim(0) || w.isDynamicDim(1))
    return refs;
  if (const schedule::GemmClass *c = schedule::gemmClassFor(*s, w.getDimSize(0), w.getDimSize(1)))
    for (KernelRef &r : refs)
      if (r.source == "gemm_f16" && r.entry == "gemm_f16")
        r.entry += "_" + c->name;
  return refs;
}

constexpr llvm::StringLiteral kGraphOpsAttr = "swz.graph_ops";

/// The kernel-table key of a model-graph op ("matmul.q4_1+residual", "matmul.f16.k8.w16"), or "" for an
/// op that is not one (tile specs, tensor reshapes, func ops).
std::string kernelKey(Operation *op, const DecodeGemv &gemv) {
  auto quant = [](swz::QuantType t) { return stringifyQuantType(t).str(); };
  if (auto mm = dyn_cast<swz::MatmulOp>(op)) {
    std::string key = "matmul." + quant(mm.getWeightType());
    // F16 rows that start on 16-byte boundaries (K % 8 == 0) have the tensor-core GEMV, in
    // two workgroup shapes (gemv_f16_mma.mlir; the schedule's gemv.f16_mma and
    // gemv.f16_mma_split_k, as shipped: 16 rows by 4 warps, or by 16 warps splitting
    // K for matrices of fewer rows than the target schedule's
    // gemv.f16_mma_split_k_below_rows, whose 4-warp workgroups are too few to keep HBM busy
    // (on the H200 the 7B ffn_down 18944 -> 3584, 224 workgroups: 33% of the copy peak;
    // ffn_up 3584 -> 18944, 1184 workgroups: 88%; bench/RESULTS.md).
    auto w = cast<RankedTensorType>(mm.getW().getType());
    if (key == "matmul.f16" && w.getRank() == 2 && !w.isDynamicDim(1) && w.getDimSize(1) % 8 == 0) {
      key += ".k8";
      if (!w.isDynamicDim(0) && w.getDimSize(0) < gemv.f16SplitKBelowRows)
        key += ".w16";
    }
    // Q4_K on the int8 tensor cores where the schedule says so (gemv_q8x.mlir's
    // matmul_q4_k_mma_q8x: 16 rows by 4 warps splitting K; fewer rows than
    // gemv.q4_k_mma_split_k_below_rows by 8 warps: on the H200 the 7B ffn_down 18944 ->
    // 3584, 224 workgroups, 22.1 us with 4 warps and 17.3 with 8; bench/RESULTS.md).
    // (sm_90 ships it off: one token a pass is slower end to end there.)
    if (key == "matmul.q4_k" && gemv.q4kMma) {
      key += ".mma";
      if (w.getRank() == 2 && !w.isDynamicDim(0) && w.getDimSize(0) < gemv.q4kMmaSplitKBelowRows)
        key += ".w8";
    }
    // Prompt passes of few rows: the skinny GEMM dequantizing in its loads where the
    // schedule has one (gemm.skinny_max_rows; gemm_skinny.mlir), so a one-token prompt pass
    // does not write and read back every weight in f16 (7B: 15 GB each way).
    const std::string ty = quant(mm.getWeightType());
    // Its stages are 256 weights: Q8_0 rows of other lengths (Qwen2.5-0.5B's 896) keep the pair.
    if (gemv.skinnyMaxRows > 0 && (ty == "q4_k" || ty == "q6_k" || ty == "q8_0") && w.getRank() == 2 &&
        !w.isDynamicDim(1) && w.getDimSize(1) % 256 == 0)
      key += ".skinny";
    if (mm.getBias())
      key += "+bias";
    if (mm.getResidual())
      key += "+residual";
    return key;
  }
  if (auto e = dyn_cast<swz::EmbeddingOp>(op))
    return "get_rows." + quant(e.getWeightType());
  if (auto n = dyn_cast<swz::RmsNormOp>(op))
    return cast<RankedTensorType>(n.getX().getType()).getRank() == 3 ? "head_norm.f32"
                                                                      : "rms_norm.f32";
  if (isa<swz::RopeOp>(op))
    return "rope.f32";
  if (auto a = dyn_cast<swz::AttentionOp>(op)) {
    int64_t d = cast<RankedTensorType>(a.getQ().getType()).getDimSize(2);
    std::string key =
        ShapedType::isDynamic(d) ? "attention.f16kv" : "attention.f16kv.hd" + std::to_string(d);
    return a.getKPositions() ? key + "+rope_k" : key;
  }
  if (isa<swz::SwigluOp>(op))
    return "swiglu.f32";
  if (isa<swz::AddOp>(op))
    return "add.f32";
  if (isa<swz::ArgmaxOp>(op))
    return "argmax.f32";
  return "";
}

/// Whether `source` holds tile specs (swz.gemm_tile at the top, swz.attention_tile and
/// swz.gemv_tile at the top or inside the gpu.module their kernels go to), whose kernels
/// swz-lower-tiles writes.
bool hasTileSpecs(ModuleOp source) {
  return source
      .walk([](Operation *op) {
        return isa<swz::GemmTileOp, swz::AttentionTileOp, swz::GemvTileOp>(op)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

struct OutlineKernels : impl::SwzOutlineKernelsBase<OutlineKernels> {
  using SwzOutlineKernelsBase::SwzOutlineKernelsBase;
  OutlineKernels(const SwzOutlineKernelsOptions &options, schedule::TargetSchedule s)
      : SwzOutlineKernelsBase(options), given(std::move(s)) {}

  /// The target's schedule when the pass was created with it (planGraph).
  std::optional<schedule::TargetSchedule> given;

  /// Generates the kernels of `source`'s tile specs in place (swz-apply-schedule,
  /// swz-lower-tiles) with `s`: the given schedule or the `schedule` option's file, read
  /// once by runOnOperation (null when there is neither).
  LogicalResult lowerTileSpecs(ModuleOp source, const std::string &name,
                               const schedule::TargetSchedule *s) {
    if (!hasTileSpecs(source))
      return success();
    if (!s)
      return getOperation().emitError()
             << "kernel source " << name
             << " is a tile spec: swz-outline-kernels needs the target's schedule "
                "(option schedule=<compiler/schedules/<target>.json>)";
    PassManager pm(source.getContext());
    pm.addPass(swz::createSwzApplySchedule(*s));
    pm.addPass(swz::createSwzLowerTiles());
    return pm.run(source);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    const bool ptx = target != "spirv";
    const DecodeGemv gemv{f16SplitKBelowRows, q4kMma, q4kMmaSplitKBelowRows, skinnyMaxRows};
    if (ptx && (target.size() < 4 || target.rfind("sm_", 0) != 0)) {
      module.emitError() << "swz-outline-kernels: unknown target '" << target
                         << "' (expected sm_XY or spirv)";
      return signalPassFailure();
    }
    // The schedule: the tile specs' kernels are generated from it (lowerTileSpecs) and its
    // gemm shape classes choose matmuls' prefill GEMMs (kernelsForOp).
    std::optional<schedule::TargetSchedule> sched = given;
    if (!sched && !schedule.empty()) {
      try {
        sched = schedule::loadSchedule(schedule);
      } catch (const std::exception &e) {
        module.emitError() << "swz-outline-kernels: " << e.what();
        return signalPassFailure();
      }
    }
    SymbolTable symbols(module);
    std::map<std::string, std::string> moduleOfSource; // source stem -> gpu.module name
    bool failedAny = false;
    std::set<std::string> failedSources; // reported once, not once per op
    auto outlineSource = [&](const std::string &source) -> FailureOr<std::string> {
      auto it = moduleOfSource.find(source);
      if (it != moduleOfSource.end())
        return it->second;
      if (failedSources.count(source))
        return failure();
      OwningOpRef<ModuleOp> parsed =
          parseSourceString<ModuleOp>(builtinKernelSource(source), ctx, source);
      if (!parsed || failed(lowerTileSpecs(*parsed, source, sched ? &*sched : nullptr))) {
        failedSources.insert(source);
        return failure();
      }
      auto modules = llvm::to_vector(parsed->getOps<gpu::GPUModuleOp>());
      if (modules.size() != 1) {
        module.emitError() << "kernel source " << source << " has " << modules.size()
                           << " gpu.modules (expected one)";
        return failure();
      }
      std::string name = modules.front().getName().str();
      if (symbols.lookup(name)) {
        module.emitError() << "kernel source " << source << "'s gpu.module @" << name
                           << " clashes with a symbol already in the module";
        return failure();
      }
      modules.front()->remove();
      symbols.insert(modules.front());
      return moduleOfSource[source] = name;
    };
    module.walk([&](Operation *op) {
      std::string key = kernelKey(op, gemv);
      if (key.empty())
        return;
      std::vector<KernelRef> refs = kernelsForOp(op, key, ptx, sched ? &*sched : nullptr);
      if (refs.empty()) {
        op->emitError() << "no GPU kernel yet for " << key << " on target " << target;
        failedAny = true;
        return;
      }
      std::map<std::string, SmallVector<Attribute>> phases;
      for (const KernelRef &ref : refs) {
        FailureOr<std::string> gm = outlineSource(ref.source);
        if (failed(gm)) {
          failedAny = true; // the source's own error says why
          return;
        }
        phases[ref.phase].push_back(SymbolRefAttr::get(
            StringAttr::get(ctx, *gm), {FlatSymbolRefAttr::get(ctx, ref.entry)}));
      }
      SmallVector<NamedAttribute> entries;
      for (auto &[phase, list] : phases)
        entries.emplace_back(StringAttr::get(ctx, phase), ArrayAttr::get(ctx, list));
      op->setAttr("swz.kernels", DictionaryAttr::get(ctx, entries));
    });
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    if (failedAny)
      signalPassFailure();
  }
};


struct SpirvWorkgroupMemory : impl::SwzSpirvWorkgroupMemoryBase<SpirvWorkgroupMemory> {
  void runOnOperation() override {
    gpu::GPUModuleOp module = getOperation();
    llvm::StringMap<memref::GlobalOp> globals;
    for (auto global : module.getOps<memref::GlobalOp>()) {
      MemRefType type = global.getType();
      if (!isWorkgroupMemory(type.getMemorySpace()))
        continue;
      if (!type.hasStaticShape() || global.getInitialValue()) {
        global.emitError("swz-spirv-workgroup-memory: a workgroup global needs a static "
                         "shape and no initial value");
        return signalPassFailure();
      }
      globals[global.getSymName()] = global;
    }
    if (globals.empty())
      return;
    MLIRContext *ctx = &getContext();
    Attribute space3 = IntegerAttr::get(IntegerType::get(ctx, 64), 3);
    module.walk([&](gpu::GPUFuncOp fn) {
      llvm::StringMap<Value> allocs;
      OpBuilder b(ctx);
      b.setInsertionPointToStart(&fn.getBody().front());
      fn.walk([&](memref::GetGlobalOp get) {
        auto it = globals.find(get.getName());
        if (it == globals.end())
          return;
        Value &alloc = allocs[get.getName()];
        if (!alloc) {
          MemRefType t = it->second.getType();
          auto type = MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(), space3);
          alloc = b.create<memref::AllocOp>(get.getLoc(), type).getResult();
        }
        get.getResult().replaceAllUsesWith(alloc);
        get.erase();
      });
    });
    for (auto &entry : globals)
      entry.second.erase();
  }
};

/// The dynamic shared memory window's symbol (swz-dynamic-smem).
constexpr const char *kDynamicWindow = "swz_dynamic_smem";

struct DynamicSharedMemory : impl::SwzDynamicSharedMemoryBase<DynamicSharedMemory> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool failedAny = false;
    llvm::SmallPtrSet<Operation *, 8> placed; // globals some kernel now reads as a view
    module.walk([&](gpu::GPUFuncOp fn) {
      auto attr = fn->getAttrOfType<StringAttr>("swz.dynamic_smem");
      if (!attr)
        return;
      int64_t declared = 0;
      if (attr.getValue().getAsInteger(10, declared) || declared <= 0) {
        fn.emitError() << "swz-dynamic-smem: swz.dynamic_smem must be a positive byte count, got \""
                       << attr.getValue() << "\"";
        failedAny = true;
        return;
      }
      // The workgroup globals fn reads, in order of first use, and their offsets.
      SmallVector<memref::GlobalOp> order;
      llvm::DenseMap<Operation *, int64_t> offset;
      SmallVector<memref::GetGlobalOp> gets;
      int64_t end = 0, maxAlign = 16;
      fn.walk([&](memref::GetGlobalOp get) {
        auto global = dyn_cast_or_null<memref::GlobalOp>(
            SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr()));
        if (!global || !isWorkgroupMemory(global.getType().getMemorySpace()))
          return;
        gets.push_back(get);
        if (offset.count(global))
          return;
        int64_t align = int64_t(global.getAlignment().value_or(16));
        maxAlign = std::max(maxAlign, align);
        end = llvm::alignTo(end, align);
        offset[global] = end;
        end += memrefBytes(global.getType());
        order.push_back(global);
        placed.insert(global);
      });
      if (gets.empty())
        return;
      const int64_t needed = end + maxAlign - 16;
      if (needed > declared) {
        fn.emitError() << "swz-dynamic-smem: the kernel's " << order.size()
                       << " shared tiles need " << needed << " bytes (" << end
                       << " + alignment slack " << maxAlign - 16
                       << "), more than its swz.dynamic_smem " << declared;
        failedAny = true;
        return;
      }
      OpBuilder b(fn.getContext());
      // The window's symbol, declared external before the NVVM lowering, which then takes
      // it (GPUOpsLowering's getDynamicSharedMemorySymbol reuses a zero-sized address
      // space 3 array of the same alignment) instead of making its own with internal
      // linkage: LLVM treats that one as a 0-byte object, NVPTX demotes it to a static
      // `.shared .b8` variable, and on the H200 every kernel indexing past it computed
      // wrong values (bench/RESULTS.md, 2026-12-05). External, it is CUDA's
      // `extern __shared__ char w[]`: `.extern .shared .align 16 .b8 w[]`.
      if (auto gm = fn->getParentOfType<gpu::GPUModuleOp>();
          gm && !SymbolTable::lookupSymbolIn(gm, kDynamicWindow)) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(gm.getBody());
        b.create<LLVM::GlobalOp>(fn.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0), /*isConstant=*/false,
                                 LLVM::Linkage::External, kDynamicWindow, /*value=*/Attribute{},
                                 /*alignment=*/16, /*addrSpace=*/3);
      }
      b.setInsertionPointToStart(&fn.getBody().front());
      Location loc = fn.getLoc();
      auto space = order.front().getType().getMemorySpace();
      auto bytesType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                       MemRefLayoutAttrInterface{}, space);
      Value dyn = b.create<gpu::DynamicSharedMemoryOp>(loc, bytesType);
      Value ptr = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, dyn);
      Value align = b.create<arith::ConstantIndexOp>(loc, maxAlign);
      Value shift = b.create<arith::RemUIOp>(
          loc, b.create<arith::SubIOp>(loc, align, b.create<arith::RemUIOp>(loc, ptr, align)),
          align);
      llvm::DenseMap<Operation *, Value> views;
      for (memref::GlobalOp global : order) {
        Value at = offset[global] == 0
                       ? shift
                       : b.create<arith::AddIOp>(
                             loc, shift, b.create<arith::ConstantIndexOp>(loc, offset[global]));
        views[global] = b.create<memref::ViewOp>(loc, global.getType(), dyn, at, ValueRange{});
      }
      for (memref::GetGlobalOp get : gets) {
        auto global = SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr());
        get.getResult().replaceAllUsesWith(views[global]);
        get.erase();
      }
    });
    // The placed globals no kernel reads any more (another kernel may still).
    module.walk([&](gpu::GPUModuleOp gm) {
      for (auto global : llvm::make_early_inc_range(gm.getOps<memref::GlobalOp>()))
        if (placed.contains(global) && SymbolTable::symbolKnownUseEmpty(global, gm))
          global.erase();
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
                  spirv::SPIRVDialect, tensor::TensorDialect, ub::UBDialect,
                  vector::VectorDialect>();
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
                                const std::string &cudaRoot,
                                const schedule::TargetSchedule *schedule) {
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
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Remark)
      return success();
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

  // Tile specs become kernels by the target's schedule.
  if (hasTileSpecs(*module)) {
    if (!schedule)
      throw std::runtime_error("the kernel source has tile specs (swz.gemm_tile, "
                               "swz.attention_tile, swz.gemv_tile): compiling "
                               "it needs the target's schedule");
    PassManager tiles(&ctx);
    tiles.addPass(swz::createSwzApplySchedule(*schedule));
    tiles.addPass(swz::createSwzLowerTiles());
    if (failed(tiles.run(*module)))
      throw std::runtime_error("generating the kernels of the tile specs for " + target +
                               " failed:\n" + diagnostics);
  }

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
    if (auto smem = fn->getAttrOfType<StringAttr>("swz.dynamic_smem"))
      k.dynamicSmem = smem.str();
    if (auto sched = fn->getAttrOfType<StringAttr>("swz.schedule"))
      k.schedule = sched.str();
    k.smemTiles = analyzeSmemTiles(fn);
    k.workgroupBytes = workgroupBytes(fn);
    // Dynamic shared memory (swz-dynamic-smem) adds the alignment slack to the tiles.
    int64_t dynamicBytes = 0;
    if (!StringRef(k.dynamicSmem).getAsInteger(10, dynamicBytes))
      k.workgroupBytes = std::max(k.workgroupBytes, dynamicBytes);
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

  PassManager pm(&ctx);
  // Enforces every `swz.conflict_free` claim before the layout is materialised.
  pm.addPass(swz::createSwzCheckBankConflicts());
  pm.addPass(swz::createSwzMaterializeSwizzle());
  if (isPtx) {
    pm.addPass(createSwzDynamicSharedMemory());
    gpu::GPUToNVVMPipelineOptions options;
    options.cubinChip = schedule ? schedule::ptxArch(*schedule, target) : target;
    options.cubinFormat = "isa";
    gpu::buildLowerToNVVMPassPipeline(pm, options);
  } else {
    pm.nest<gpu::GPUModuleOp>().addPass(createSwzSpirvWorkgroupMemory());
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

//===----------------------------------------------------------------------===//
// planGraph: import, swz-fuse, swz-outline-kernels
//===----------------------------------------------------------------------===//

namespace {

using nlohmann::json;

/// Builds `func.func @forward` from the runtime's graph JSON (docs/graph.md): one swz
/// op per graph op, tagged `swz.graph_ops = [index]`; activations `[T, width]`;
/// rope, head_norm and attention see `[T, heads, head_dim]` through
/// tensor.expand_shape / collapse_shape.
OwningOpRef<ModuleOp> importGraph(MLIRContext &ctx, const json &graph,
                                  const std::vector<swz::codegen::GraphWeight> &weights) {
  OpBuilder b(&ctx);
  Location loc = FileLineColLoc::get(&ctx, "manifest.graph", 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  const json &hp = graph.at("hparams");
  const int64_t headDim = hp.at("head_dim").get<int64_t>();
  if (headDim <= 0)
    throw std::invalid_argument("graph hparams.head_dim must be positive, got " +
                                std::to_string(headDim));
  const json &buffers = graph.at("buffers");
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto rows = [&](int64_t width) { return RankedTensorType::get({ShapedType::kDynamic, width}, f32); };

  std::map<std::string, const swz::codegen::GraphWeight *> weightByName;
  for (const auto &w : weights)
    weightByName[w.name] = &w;
  // Weights become @forward's arguments, in order of first use.
  std::vector<const swz::codegen::GraphWeight *> used;
  std::map<std::string, unsigned> argOf;
  for (const json &op : graph.at("ops"))
    for (const json &in : op.at("in")) {
      auto it = weightByName.find(in.get<std::string>());
      if (it != weightByName.end() && !argOf.count(it->first)) {
        argOf[it->first] = 2 + used.size();
        used.push_back(it->second);
      }
    }
  auto weightType = [&](const swz::codegen::GraphWeight &w) -> RankedTensorType {
    SmallVector<int64_t> shape(w.ne.rbegin(), w.ne.rend()); // ggml ne[0] is the last dim
    while (shape.size() > 1 && shape.front() == 1)
      shape.erase(shape.begin());
    return RankedTensorType::get(shape, f32);
  };
  SmallVector<Type> argTypes = {RankedTensorType::get({ShapedType::kDynamic}, i32),
                                RankedTensorType::get({ShapedType::kDynamic}, i32)};
  for (const auto *w : used)
    argTypes.push_back(weightType(*w));
  const std::string output = graph.at("output").get<std::string>();
  auto fnType = b.getFunctionType(argTypes, {rows(buffers.at(output).get<int64_t>())});
  b.setInsertionPointToEnd(module->getBody());
  auto fn = b.create<func::FuncOp>(loc, "forward", fnType);
  fn.setArgAttr(0, "swz.input", b.getStringAttr("tokens"));
  fn.setArgAttr(1, "swz.input", b.getStringAttr("positions"));
  for (const auto *w : used)
    fn.setArgAttr(argOf[w->name], "swz.weight", b.getStringAttr(w->name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value tokens = body->getArgument(0), positions = body->getArgument(1);

  std::map<std::string, Value> values{{"tokens", tokens}};
  auto in = [&](const json &op, size_t i) -> Value {
    const std::string name = op.at("in").at(i).get<std::string>();
    if (argOf.count(name))
      return body->getArgument(argOf[name]);
    auto it = values.find(name);
    if (it != values.end())
      return it->second;
    // A buffer read before any op writes it is an input of the (sub)graph.
    if (!buffers.contains(name))
      throw std::invalid_argument("graph op reads '" + name + "', which is neither a buffer, "
                                  "a weight nor tokens");
    unsigned idx = fn.getNumArguments();
    fn.insertArgument(idx, rows(buffers.at(name).get<int64_t>()),
                      b.getDictionaryAttr({b.getNamedAttr("swz.input", b.getStringAttr(name))}),
                      loc);
    return values[name] = body->getArgument(idx);
  };
  auto quantOf = [&](const json &op, size_t i) {
    const std::string name = op.at("in").at(i).get<std::string>();
    auto it = weightByName.find(name);
    if (it == weightByName.end())
      throw std::invalid_argument("graph op input '" + name + "' is not a weight");
    std::optional<swz::QuantType> q = swz::symbolizeQuantType(it->second->type);
    if (!q)
      throw std::runtime_error("weight " + name + " has type " + it->second->type +
                               ", which the swz dialect has no #swz.quant for");
    return swz::QuantTypeAttr::get(&ctx, *q);
  };
  auto heads = [&](Value x, int64_t width) -> Value {
    if (width % headDim != 0)
      throw std::invalid_argument("a " + std::to_string(width) +
                                  "-wide buffer is not whole heads of head_dim " +
                                  std::to_string(headDim));
    auto type = RankedTensorType::get({ShapedType::kDynamic, width / headDim, headDim}, f32);
    Value t = b.create<tensor::DimOp>(loc, x, 0);
    SmallVector<OpFoldResult> shape = {t, b.getIndexAttr(width / headDim), b.getIndexAttr(headDim)};
    return b.create<tensor::ExpandShapeOp>(loc, type, x, ArrayRef<ReassociationIndices>{{0}, {1, 2}},
                                           shape);
  };
  auto flat = [&](Value x) -> Value {
    return b.create<tensor::CollapseShapeOp>(loc, x, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  };

  const json &ops = graph.at("ops");
  for (size_t i = 0; i < ops.size(); ++i) try {
    const json &op = ops[i];
    const std::string kind = op.at("op").get<std::string>();
    const std::string out = op.at("out").get<std::string>();
    const int64_t width = buffers.at(out).get<int64_t>();
    Operation *created = nullptr;
    Value result;
    if (kind == "get_rows") {
      auto e = b.create<swz::EmbeddingOp>(loc, rows(width), in(op, 0), in(op, 1), quantOf(op, 0));
      created = e;
      result = e.getResult();
    } else if (kind == "rms_norm") {
      auto n = b.create<swz::RmsNormOp>(loc, in(op, 0).getType(), in(op, 0), in(op, 1),
                                        b.getF32FloatAttr(op.at("eps").get<double>()));
      created = n;
      result = n.getResult();
    } else if (kind == "head_norm") {
      Value x3 = heads(in(op, 0), width);
      auto n = b.create<swz::RmsNormOp>(loc, x3.getType(), x3, in(op, 1),
                                        b.getF32FloatAttr(op.at("eps").get<double>()));
      created = n;
      result = flat(n.getResult());
    } else if (kind == "matmul") {
      Value bias = op.at("in").size() > 2 ? in(op, 2) : Value();
      auto mm = b.create<swz::MatmulOp>(loc, rows(width), in(op, 0), in(op, 1), bias, Value(),
                                        quantOf(op, 1));
      created = mm;
      result = mm.getResult();
    } else if (kind == "rope") {
      Value x3 = heads(in(op, 0), width);
      std::string mode = op.at("mode").get<std::string>();
      if (mode != "neox" && mode != "norm")
        throw std::invalid_argument("rope mode '" + mode + "' (expected norm or neox)");
      auto r = b.create<swz::RopeOp>(
          loc, x3.getType(), x3, positions,
          swz::RopeModeAttr::get(&ctx, mode == "neox" ? swz::RopeMode::Neox : swz::RopeMode::Normal),
          b.getF32FloatAttr(op.at("theta").get<double>()),
          b.getI32IntegerAttr(op.at("n_rot").get<int32_t>()));
      created = r;
      result = flat(r.getResult());
    } else if (kind == "attention") {
      Value q = heads(in(op, 0), buffers.at(op.at("in").at(0).get<std::string>()).get<int64_t>());
      Value k = heads(in(op, 1), buffers.at(op.at("in").at(1).get<std::string>()).get<int64_t>());
      Value v = heads(in(op, 2), buffers.at(op.at("in").at(2).get<std::string>()).get<int64_t>());
      auto a = b.create<swz::AttentionOp>(loc, q.getType(), q, k, v, /*k_positions=*/Value(),
                                          /*q_norm_weight=*/Value(), /*k_norm_weight=*/Value(),
                                          b.getF32FloatAttr(op.at("scale").get<double>()),
                                          b.getUnitAttr(),
                                          b.getI32IntegerAttr(op.at("layer").get<int32_t>()),
                                          swz::RopeModeAttr(), FloatAttr(), IntegerAttr(),
                                          /*q_rope=*/UnitAttr(), /*norm_epsilon=*/FloatAttr());
      created = a;
      result = flat(a.getResult());
    } else if (kind == "swiglu") {
      auto s = b.create<swz::SwigluOp>(loc, rows(width), in(op, 0), in(op, 1));
      created = s;
      result = s.getResult();
    } else if (kind == "add") {
      auto a = b.create<swz::AddOp>(loc, rows(width), in(op, 0), in(op, 1));
      created = a;
      result = a.getResult();
    } else {
      throw std::runtime_error("graph op " + std::to_string(i) + ": the swz dialect has no op for '" +
                               kind + "'");
    }
    created->setAttr("swz.graph_ops", b.getI64ArrayAttr({int64_t(i)}));
    if (op.contains("rows"))
      created->setAttr("swz.rows", b.getStringAttr(op.at("rows").get<std::string>()));
    values[out] = result;
  } catch (const json::exception &e) {
    throw std::invalid_argument("graph op " + std::to_string(i) + " (" + ops[i].dump() +
                                "): " + e.what());
  } catch (const std::invalid_argument &e) {
    throw std::invalid_argument("graph op " + std::to_string(i) + ": " + e.what());
  }
  if (!values.count(output))
    throw std::invalid_argument("graph output '" + output + "' is never written");
  b.create<func::ReturnOp>(loc, values.at(output));
  return module;
}

std::string printIR(ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os);
  return s;
}

} // namespace

swz::codegen::GraphPlan
swz::codegen::planGraph(const std::string &graphJson, const std::vector<GraphWeight> &weights,
                        const std::string &target, bool fuseResidual, bool fuseRopeKv,
                        const DecodeGemv &gemv, const schedule::TargetSchedule *schedule,
                        const std::string &emitStage) {
  json graph = json::parse(graphJson);
  DialectRegistry registry;
  registerSwzDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Remark)
      diagnostics += diag.str() + "\n";
    return success();
  });
  GraphPlan plan;
  OwningOpRef<ModuleOp> module = importGraph(ctx, graph, weights);
  if (failed(mlir::verify(*module)))
    throw std::runtime_error("imported graph does not verify:\n" + diagnostics);
  if (emitStage == "import")
    plan.ir = printIR(*module);

  PassManager fuse(&ctx);
  swz::SwzFuseOptions fuseOptions;
  // SWZ_FUSE_RESIDUAL=0 keeps residual adds as their own add_f32 launches, prefill and
  // decode (A/Bs of the matmul epilogues).
  const char *residualEnv = std::getenv("SWZ_FUSE_RESIDUAL");
  fuseOptions.residual = fuseResidual && !(residualEnv && std::string(residualEnv) == "0");
  fuseOptions.ropeKv = fuseRopeKv;
  // SWZ_FUSE_QK=0 keeps RoPE on q and the head norms as their own launches (A/Bs).
  const char *fuseQkEnv = std::getenv("SWZ_FUSE_QK");
  fuseOptions.qkRope = !(fuseQkEnv && std::string(fuseQkEnv) == "0");
  // SWZ_FOLD_QUANTIZE=0 marks no quantize outputs: quantize_q8_x launches stay apart (A/Bs).
  const char *foldEnv = std::getenv("SWZ_FOLD_QUANTIZE");
  fuseOptions.quantizeOutput = !(foldEnv && std::string(foldEnv) == "0");
  // SWZ_MERGE_GEMV=0 marks no shared-input runs: one decode GEMV launch per matmul (A/Bs).
  const char *mergeEnv = std::getenv("SWZ_MERGE_GEMV");
  fuseOptions.sharedInput = !(mergeEnv && std::string(mergeEnv) == "0");
  fuse.addPass(swz::createSwzFuse(fuseOptions));
  if (failed(fuse.run(*module)))
    throw std::runtime_error("swz-fuse failed:\n" + diagnostics);
  if (emitStage == "fuse")
    plan.ir = printIR(*module);

  // Keys first: every op without a kernel is listed, not just the first.
  const bool ptx = target != "spirv";
  module->walk([&](Operation *op) {
    std::string key = kernelKey(op, gemv);
    if (key.empty())
      return;
    auto ids = op->getAttrOfType<ArrayAttr>("swz.graph_ops");
    LaunchGroup g;
    g.key = key;
    for (Attribute a : ids)
      g.graphOps.push_back(cast<IntegerAttr>(a).getInt());
    if (auto shared = op->getAttrOfType<IntegerAttr>("swz.shared_input"))
      g.sharedInput = shared.getInt();
    g.quantizeOutput = op->hasAttr("swz.quantize_output");
    if (key.find(".skinny") != std::string::npos)
      g.skinnyMaxRows = gemv.skinnyMaxRows;
    g.kernels = kernelsForOp(op, key, ptx, schedule);
    if (g.kernels.empty())
      ++plan.missing[key];
    plan.groups.push_back(std::move(g));
  });
  if (!plan.missing.empty()) {
    plan.groups.clear();
    return plan;
  }
  PassManager outline(&ctx);
  SwzOutlineKernelsOptions outlineOptions;
  outlineOptions.target = target;
  outlineOptions.f16SplitKBelowRows = gemv.f16SplitKBelowRows;
  outlineOptions.q4kMma = gemv.q4kMma;
  outlineOptions.q4kMmaSplitKBelowRows = gemv.q4kMmaSplitKBelowRows;
  outlineOptions.skinnyMaxRows = gemv.skinnyMaxRows;
  if (schedule)
    outline.addPass(std::make_unique<OutlineKernels>(outlineOptions, *schedule));
  else
    outline.addPass(createSwzOutlineKernels(outlineOptions));
  if (failed(outline.run(*module)))
    throw std::runtime_error("swz-outline-kernels failed:\n" + diagnostics);
  if (emitStage == "outline")
    plan.ir = printIR(*module);
  return plan;
}
