//===- Passes.cpp - swz passes (one translation unit) ---------------------===//
#include "compiler/mlir/Passes.h"

#include "Swz/SwzDialect.h"
#include "compiler/mlir/BankConflicts.h"
#include "compiler/mlir/Schedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

#include <stdexcept>

namespace swz {
#define GEN_PASS_DEF_SWZAPPLYSCHEDULE
#define GEN_PASS_DEF_SWZCHECKBANKCONFLICTS
#define GEN_PASS_DEF_SWZMATERIALIZESWIZZLE
#define GEN_PASS_DEF_SWZFUSE
#include "compiler/mlir/Passes.h.inc"
} // namespace swz

using namespace mlir;

namespace swz {
namespace {

unsigned elementBytes(Type type) {
  return std::max<unsigned>(1, type.getIntOrFloatBitWidth() / 8);
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

/// The schedule's swizzle for a tile whose rows hold `rowElems` elements. With
/// "shift": "row" in the schedule, S is chosen so that the bits XORed in are the
/// low bits of the row index: S = log2(rowElems) - M.
FailureOr<SwizzleAttr> toAttr(Operation *op, const std::optional<bank::Swizzle> &s,
                              bool shiftFromRow, int64_t rowElems) {
  if (!s)
    return SwizzleAttr();
  unsigned shift = s->shift;
  if (shiftFromRow) {
    if (!llvm::isPowerOf2_64(rowElems) ||
        rowElems < (int64_t(1) << (s->base + s->bits)))
      return op->emitError() << "the schedule derives the swizzle shift from the "
                                "row length, which needs a power of two >= 2^(M+B) = "
                             << (int64_t(1) << (s->base + s->bits)) << ", got "
                             << rowElems;
    shift = llvm::Log2_64(rowElems) - s->base;
  }
  return SwizzleAttr::get(op->getContext(), s->bits, s->base, shift);
}

std::optional<bank::Swizzle> fromAttr(std::optional<SwizzleAttr> a) {
  if (!a || !*a)
    return std::nullopt;
  return bank::Swizzle{a->getBits(), a->getBase(), a->getShift()};
}

//===----------------------------------------------------------------------===//
// swz-apply-schedule
//===----------------------------------------------------------------------===//

struct ApplySchedule : impl::SwzApplyScheduleBase<ApplySchedule> {
  using SwzApplyScheduleBase::SwzApplyScheduleBase;
  explicit ApplySchedule(schedule::TargetSchedule s) : given(std::move(s)) {}

  /// The schedule itself, when the pass was created from one (createSwzApplySchedule).
  std::optional<schedule::TargetSchedule> given;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!given && schedule.empty()) {
      module.emitError("swz-apply-schedule needs schedule=<path to "
                       "compiler/schedules/<target>.json>");
      return signalPassFailure();
    }
    schedule::TargetSchedule s;
    try {
      s = given ? *given : schedule::loadSchedule(schedule);
    } catch (const std::exception &e) {
      module.emitError() << "swz-apply-schedule: " << e.what();
      return signalPassFailure();
    }
    Builder b(module.getContext());
    bool failedAny = false;

    // Fills one gemm_tile's fields from the entry `g`.
    auto applyGemm = [&](GemmTileOp op, const schedule::GemmSchedule &g) {
      if (typeName(op.getElementType()) != g.elementType) {
        op.emitError() << "element type " << op.getElementType() << " of @"
                       << op.getSymName() << " differs from the " << s.target
                       << " schedule's gemm element_type " << g.elementType;
        failedAny = true;
        return;
      }
      // The tiles, plus the alignment slack when they go to dynamic shared memory.
      int64_t smem = schedule::gemmSmemBytes(g, elementBytes(op.getElementType()));
      if (int64_t dyn = schedule::gemmDynamicSmemBytes(smem, StringRef(g.mma).starts_with("wgmma")))
        smem = dyn;
      if (smem > s.maxSmemBytesPerBlock) {
        op.emitError() << "the " << s.target << " gemm schedule needs " << smem
                       << " bytes of shared memory per block, more than the "
                       << s.maxSmemBytesPerBlock << " available";
        failedAny = true;
        return;
      }
      // wgmma is architecture-specific PTX (sm_90a): a schedule asking for it must lower
      // there, or ptxas (or, without ptxas, the driver at load time) refuses the package.
      if (StringRef(g.mma).starts_with("wgmma") && s.arch != "sm_90a") {
        op.emitError() << "the " << s.target << " schedule's gemm asks for " << g.mma
                       << ", which needs device.arch \"sm_90a\" (Hopper-specific PTX); it says \""
                       << s.arch << "\"";
        failedAny = true;
        return;
      }
      op.setTileMAttr(b.getI32IntegerAttr(g.tileM));
      op.setTileNAttr(b.getI32IntegerAttr(g.tileN));
      op.setTileKAttr(b.getI32IntegerAttr(g.tileK));
      op.setWarpsAttr(b.getI32IntegerAttr(g.warps));
      op.setStagesAttr(b.getI32IntegerAttr(g.stages));
      FailureOr<SwizzleAttr> sw =
          toAttr(op, g.swizzle, g.swizzleShiftFromRow, g.tileK);
      if (failed(sw)) {
        failedAny = true;
        return;
      }
      if (*sw)
        op.setSmemLayoutAttr(*sw);
      else
        op.removeSmemLayoutAttr();
      op.setMmaAttr(b.getStringAttr(g.mma));
      op.setCopyAttr(b.getStringAttr(g.copy));
      op.setTargetAttr(b.getStringAttr(s.target));
      op.setConflictFree(g.conflictFree);
      if (g.mmaInFlight)
        op.setMmaInFlightAttr(b.getI32IntegerAttr(int32_t(*g.mmaInFlight)));
      else
        op.removeMmaInFlightAttr();
      if (failed(op.verify()))
        failedAny = true;
    };
    // A dequantizing tile spec (weights = "<type>") takes gemm.skinny: one n8 tile of 8
    // weight rows a warp (tile_n 8 warps), m_tiles m16 tiles of prompt rows (tile_m), a
    // 256-weight stage of each row (tile_k: a Q4_K / Q6_K super-block, eight Q8_0 blocks),
    // the type's ring depth. swz-lower-tiles checks what it can emit.
    auto applySkinny = [&](GemmTileOp op) {
      StringRef ty = *op.getWeights();
      if (!s.gemm.skinny) {
        op.emitError() << "@" << op.getSymName() << " (weights \"" << ty << "\") needs the "
                       << s.target << " schedule's gemm.skinny, which it does not have";
        failedAny = true;
        return;
      }
      const schedule::SkinnyGemmSchedule &k = *s.gemm.skinny;
      auto st = k.stages.find(ty.str());
      if (st == k.stages.end()) {
        op.emitError() << "the " << s.target << " schedule's gemm.skinny.stages has no \"" << ty
                       << "\" for @" << op.getSymName();
        failedAny = true;
        return;
      }
      op.setTileMAttr(b.getI32IntegerAttr(int32_t(16 * k.mTiles)));
      op.setTileNAttr(b.getI32IntegerAttr(int32_t(8 * k.warps)));
      op.setTileKAttr(b.getI32IntegerAttr(256));
      op.setWarpsAttr(b.getI32IntegerAttr(int32_t(k.warps)));
      op.setStagesAttr(b.getI32IntegerAttr(int32_t(st->second)));
      op.setMmaAttr(b.getStringAttr("mma.sync.m16n8k16"));
      op.setCopyAttr(b.getStringAttr("cp.async.cg.16"));
      op.setTargetAttr(b.getStringAttr(s.target));
      if (failed(op.verify()))
        failedAny = true;
    };
    // Each gemm tile spec takes the base entry; each shape class of the schedule adds a copy
    // of it, @<name>_<class>, with the class's entry (kept and re-applied if it exists).
    SmallVector<GemmTileOp> gemms;
    module.walk([&](GemmTileOp op) {
      if (op.getWeights())
        applySkinny(op);
      else
        gemms.push_back(op);
    });
    // A copy carries shape_class: it is never a base; one whose class this schedule no
    // longer has (the pass run again with another schedule) is erased.
    llvm::StringSet<> classNames;
    for (const schedule::GemmClass &c : s.gemmClasses)
      classNames.insert(c.name);
    for (GemmTileOp op : gemms) {
      if (auto cls = op.getShapeClass()) {
        if (!classNames.contains(*cls))
          op.erase();
        continue; // re-applied with its base below
      }
      applyGemm(op, s.gemm);
      for (const schedule::GemmClass &c : s.gemmClasses) {
        std::string name = (op.getSymName() + "_" + c.name).str();
        auto copy = dyn_cast_or_null<GemmTileOp>(SymbolTable::lookupSymbolIn(module, name));
        if (!copy) {
          OpBuilder ob(op);
          ob.setInsertionPointAfter(op);
          copy = cast<GemmTileOp>(ob.clone(*op));
          copy.setSymName(name);
        }
        copy.setShapeClassAttr(b.getStringAttr(c.name));
        applyGemm(copy, c.gemm);
      }
    }

    // A decode tile spec takes attention.decode: block(kDecodeRows, kDecodeSplitUnit) (the
    // driver's launch rule), warps, keys_in_flight, min_ctas_per_sm; swz-lower-tiles
    // checks what it can emit.
    auto applyDecode = [&](AttentionTileOp op) {
      if (!s.attention.decode) {
        op.emitError() << "@" << op.getSymName() << " (decode) needs the " << s.target
                       << " schedule's attention.decode, which it does not have";
        failedAny = true;
        return;
      }
      const schedule::DecodeAttentionSchedule &d = *s.attention.decode;
      op.setBlockQAttr(b.getI32IntegerAttr(int32_t(schedule::kDecodeRows)));
      op.setBlockKvAttr(b.getI32IntegerAttr(int32_t(schedule::kDecodeSplitUnit)));
      op.setWarpsAttr(b.getI32IntegerAttr(int32_t(d.warps)));
      op.setStagesAttr(b.getI32IntegerAttr(1));
      op.setKeysInFlightAttr(b.getI32IntegerAttr(int32_t(d.keysInFlight)));
      if (d.minCtasPerSm)
        op.setMinCtasPerSmAttr(b.getI32IntegerAttr(int32_t(d.minCtasPerSm)));
      else
        op.removeMinCtasPerSmAttr();
      op.setTargetAttr(b.getStringAttr(s.target));
      if (failed(op.verify()))
        failedAny = true;
    };
    module.walk([&](AttentionTileOp op) {
      if (op.getDecode())
        return applyDecode(op);
      const schedule::AttentionSchedule &a = s.attention;
      if (typeName(op.getElementType()) != a.elementType) {
        op.emitError() << "element type " << op.getElementType() << " of @"
                       << op.getSymName() << " differs from the " << s.target
                       << " schedule's attention element_type " << a.elementType;
        failedAny = true;
        return;
      }
      int64_t eb = elementBytes(op.getElementType());
      int64_t d = op.getHeadDim();
      // Q stays resident; K and V are staged `stages` deep.
      int64_t smem = (a.blockQ + 2 * a.stages * a.blockKv) * d * eb;
      if (smem > s.maxSmemBytesPerBlock) {
        op.emitError() << "the " << s.target << " attention schedule needs " << smem
                       << " bytes of shared memory per block for head_dim " << d
                       << ", more than the " << s.maxSmemBytesPerBlock
                       << " available";
        failedAny = true;
        return;
      }
      op.setBlockQAttr(b.getI32IntegerAttr(a.blockQ));
      op.setBlockKvAttr(b.getI32IntegerAttr(a.blockKv));
      op.setWarpsAttr(b.getI32IntegerAttr(a.warps));
      op.setStagesAttr(b.getI32IntegerAttr(a.stages));
      FailureOr<SwizzleAttr> sw = toAttr(op, a.swizzle, a.swizzleShiftFromRow, d);
      if (failed(sw)) {
        failedAny = true;
        return;
      }
      if (*sw)
        op.setSmemLayoutAttr(*sw);
      else
        op.removeSmemLayoutAttr();
      op.setMmaAttr(b.getStringAttr(a.mma));
      op.setCopyAttr(b.getStringAttr(a.copy));
      op.setTargetAttr(b.getStringAttr(s.target));
      op.setConflictFree(a.conflictFree);
      if (failed(op.verify()))
        failedAny = true;
    });

    // A decode GEMV tile spec takes gemv.<activations>.<weights>: rows a warp (f32: 1),
    // units in flight a lane, workgroups an SM; swz-lower-tiles checks what it can emit.
    module.walk([&](GemvTileOp op) {
      if (op.getLookup())
        return; // the embedding lookup has no schedule fields
      if (op.getMma()) { // F16's tensor-core GEMV: gemv.f16_mma (split_k: gemv.f16_mma_split_k)
        const char *key = op.getSplitK() ? "f16_mma_split_k" : "f16_mma";
        const auto &m = op.getSplitK() ? s.gemv.f16MmaSplitK : s.gemv.f16Mma;
        if (!m) {
          op.emitError() << "@" << op.getSymName() << " needs the " << s.target
                         << " schedule's gemv." << key << ", which it does not have";
          failedAny = true;
          return;
        }
        op.setWarpsAttr(b.getI32IntegerAttr(int32_t(m->warps)));
        op.setMTilesAttr(b.getI32IntegerAttr(int32_t(m->mTiles)));
        op.setUnitsInFlightAttr(b.getI32IntegerAttr(int32_t(m->unitsInFlight)));
        op.setTargetAttr(b.getStringAttr(s.target));
        if (failed(op.verify()))
          failedAny = true;
        return;
      }
      const StringRef ty = op.getWeights(), act = op.getActivations();
      const auto &table = act == "q8x" ? s.gemv.q8x : s.gemv.f32;
      auto it = table.find(ty.str());
      if (it == table.end()) {
        op.emitError() << "@" << op.getSymName() << " (weights \"" << ty << "\") needs the "
                       << s.target << " schedule's gemv." << act << "." << ty
                       << ", which it does not have";
        failedAny = true;
        return;
      }
      const schedule::GemvTypeSchedule &g = it->second;
      op.setRowsPerWarpAttr(b.getI32IntegerAttr(int32_t(g.rowsPerWarp)));
      op.setUnitsInFlightAttr(b.getI32IntegerAttr(int32_t(g.unitsInFlight)));
      if (g.minCtasPerSm)
        op.setMinCtasPerSmAttr(b.getI32IntegerAttr(int32_t(g.minCtasPerSm)));
      else
        op.removeMinCtasPerSmAttr();
      op.setTargetAttr(b.getStringAttr(s.target));
      if (failed(op.verify()))
        failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }
};

//===----------------------------------------------------------------------===//
// swz-check-bank-conflicts
//===----------------------------------------------------------------------===//

struct TileBuffer {
  const char *name;
  bank::SmemLayout layout;
};

/// Analyses `buffers` and reports; returns failure if `claimConflictFree` is
/// contradicted (or a layout is invalid).
LogicalResult checkBuffers(Operation *op, StringRef kind, StringRef sym,
                           ArrayRef<TileBuffer> buffers, bool claimConflictFree) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << kind << " @" << sym << ":";
  std::string firstConflict;
  for (const TileBuffer &buf : buffers) {
    os << " " << buf.name << " " << buf.layout.str() << ":";
    for (bank::Access access : {bank::Access::LdmatrixX4, bank::Access::CpAsync16}) {
      bank::ConflictReport r;
      try {
        r = bank::analyze(buf.layout, access);
      } catch (const std::exception &e) {
        return op->emitError() << "cannot analyse smem " << buf.name << " of " << kind
                               << " @" << sym << ": " << e.what();
      }
      os << (access == bank::Access::LdmatrixX4 ? " " : ", ")
         << bank::accessName(access) << " " << r.maxDegree << "-way";
      if (!r.conflictFree() && firstConflict.empty())
        firstConflict = std::string(bank::accessName(access)) + " on smem " +
                        buf.name + " (" + buf.layout.str() + ") is " +
                        std::to_string(r.maxDegree) + "-way bank-conflicted";
    }
    os << (&buf == &buffers.back() ? "" : ";");
  }
  if (claimConflictFree && !firstConflict.empty())
    return op->emitError() << kind << " @" << sym
                           << " claims conflict_free but " << firstConflict;
  op->emitRemark() << os.str();
  return success();
}

bank::SmemLayout rowMajorTile(int64_t rows, int64_t cols, unsigned elemBytes,
                              std::optional<bank::Swizzle> sw) {
  return bank::SmemLayout{rows, cols, cols, elemBytes, sw};
}

struct CheckBankConflicts : impl::SwzCheckBankConflictsBase<CheckBankConflicts> {
  void runOnOperation() override {
    bool failedAny = false;
    getOperation().walk([&](Operation *op) {
      if (auto g = dyn_cast<GemmTileOp>(op)) {
        if (!g.isScheduled())
          return;
        unsigned eb = elementBytes(g.getElementType());
        auto sw = fromAttr(g.getSmemLayout());
        TileBuffer bufs[] = {
            {"A", rowMajorTile(*g.getTileM(), *g.getTileK(), eb, sw)},
            {"B", rowMajorTile(*g.getTileN(), *g.getTileK(), eb, sw)}};
        failedAny |= failed(
            checkBuffers(op, "gemm_tile", g.getSymName(), bufs, g.getConflictFree()));
      } else if (auto a = dyn_cast<AttentionTileOp>(op)) {
        // The decode kernel stages no tile (its workgroup memory takes scalar stores).
        if (!a.isScheduled() || a.getDecode())
          return;
        unsigned eb = elementBytes(a.getElementType());
        auto sw = fromAttr(a.getSmemLayout());
        int64_t d = a.getHeadDim();
        TileBuffer bufs[] = {{"Q", rowMajorTile(*a.getBlockQ(), d, eb, sw)},
                             {"K", rowMajorTile(*a.getBlockKv(), d, eb, sw)},
                             {"V", rowMajorTile(*a.getBlockKv(), d, eb, sw)}};
        failedAny |= failed(checkBuffers(op, "attention_tile", a.getSymName(), bufs,
                                         a.getConflictFree()));
      }
    });
    // Shared-memory tiles of kernels: memref.globals read by nvgpu.ldmatrix or
    // written by nvgpu.device_async_copy.
    ModuleOp module = getOperation();
    llvm::DenseSet<Operation *> smemTiles;
    module.walk([&](memref::GetGlobalOp get) {
      for (Operation *user : get.getResult().getUsers()) {
        StringRef name = user->getName().getStringRef();
        if (name == "nvgpu.ldmatrix" || name == "nvgpu.device_async_copy")
          if (Operation *g = SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr()))
            smemTiles.insert(g);
      }
    });
    module.walk([&](memref::GlobalOp g) {
      if (!smemTiles.contains(g))
        return;
      auto type = g.getType();
      if (type.getRank() != 2 || !type.hasStaticShape()) {
        g.emitError() << "bank-conflict analysis needs a static rank-2 tile, got "
                      << type;
        failedAny = true;
        return;
      }
      auto sw = g->getAttrOfType<SwizzleAttr>("swz.smem_layout");
      if (!sw)
        sw = g->getAttrOfType<SwizzleAttr>("swz.smem_swizzled");
      std::optional<bank::Swizzle> layout;
      if (sw)
        layout = bank::Swizzle{sw.getBits(), sw.getBase(), sw.getShift()};
      TileBuffer bufs[] = {{"tile", rowMajorTile(type.getDimSize(0), type.getDimSize(1),
                                                 elementBytes(type.getElementType()),
                                                 layout)}};
      failedAny |= failed(checkBuffers(g, "memref.global", g.getSymName(), bufs,
                                       g->hasAttr("swz.conflict_free")));
    });
    if (failedAny)
      signalPassFailure();
  }
};

//===----------------------------------------------------------------------===//
// swz-materialize-swizzle
//===----------------------------------------------------------------------===//

constexpr StringLiteral kLayoutAttr = "swz.smem_layout";
constexpr StringLiteral kDoneAttr = "swz.smem_swizzled";

/// Ops whose indices into a memref operand are the `rank` operands right after it.
bool isIndexedAccess(Operation *op) {
  static const llvm::StringSet<> names = {
      "memref.load",   "memref.store",  "vector.load",
      "vector.store",  "nvgpu.ldmatrix", "nvgpu.device_async_copy"};
  return names.contains(op->getName().getStringRef());
}

/// Rewrites the column index of every access to `buffer` (rank-2 memref).
LogicalResult swizzleUses(Value buffer, SwizzleAttr sw, Operation *owner) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() != 2 || !type.hasStaticShape())
    return owner->emitError() << "swz.smem_layout needs a static rank-2 memref, got "
                              << type;
  int64_t cols = type.getDimSize(1);
  int64_t span = int64_t(1) << (sw.getBase() + sw.getBits());
  if (cols % span != 0)
    return owner->emitError() << "swizzle " << sw << " permutes blocks of " << span
                              << " elements, which does not divide the " << cols
                              << " columns of " << type;
  for (OpOperand &use : llvm::make_early_inc_range(buffer.getUses())) {
    Operation *user = use.getOwner();
    // The tile's base address: its consumer forms the addresses itself and must apply the
    // layout (swz-lower-tiles' wgmma descriptors name the 128-byte swizzle, which is this
    // Swizzle<3,3,3> on 64-element rows; gemmGeometry refuses any other layout there).
    if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
      continue;
    if (!isIndexedAccess(user))
      return user->emitError()
             << "swz-materialize-swizzle does not know how to swizzle the indices "
                "of '"
             << user->getName() << "' into a swizzled shared-memory buffer";
    unsigned rowIdx = use.getOperandNumber() + 1, colIdx = rowIdx + 1;
    if (colIdx >= user->getNumOperands())
      return user->emitError() << "expected 2 indices after the swizzled memref";
    OpBuilder b(user);
    Location loc = user->getLoc();
    Value row = user->getOperand(rowIdx), col = user->getOperand(colIdx);
    auto cst = [&](int64_t v) {
      return b.create<arith::ConstantIndexOp>(loc, v).getResult();
    };
    Value lin = b.create<arith::AddIOp>(
        loc, b.create<arith::MulIOp>(loc, row, cst(cols)), col);
    Value shifted = b.create<arith::ShRUIOp>(loc, lin, cst(sw.getShift()));
    int64_t mask = ((int64_t(1) << sw.getBits()) - 1) << sw.getBase();
    Value bits = b.create<arith::AndIOp>(loc, shifted, cst(mask));
    Value newCol = b.create<arith::XOrIOp>(loc, col, bits);
    user->setOperand(colIdx, newCol);
  }
  return success();
}

struct MaterializeSwizzle : impl::SwzMaterializeSwizzleBase<MaterializeSwizzle> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool failedAny = false;
    // Globals: swizzle the uses of every memref.get_global naming them.
    llvm::DenseMap<Operation *, SwizzleAttr> globals;
    module.walk([&](memref::GlobalOp g) {
      if (auto sw = g->getAttrOfType<SwizzleAttr>(kLayoutAttr))
        globals[g] = sw;
      else if (g->hasAttr(kLayoutAttr)) {
        g.emitError() << kLayoutAttr << " must be a #swz.swizzle attribute";
        failedAny = true;
      }
    });
    module.walk([&](memref::GetGlobalOp get) {
      Operation *g = SymbolTable::lookupNearestSymbolFrom(get, get.getNameAttr());
      auto it = g ? globals.find(g) : globals.end();
      if (it != globals.end() && failed(swizzleUses(get.getResult(), it->second, get)))
        failedAny = true;
    });
    for (auto &[g, sw] : globals) {
      g->removeAttr(kLayoutAttr);
      g->setAttr(kDoneAttr, sw);
    }
    // Allocations carrying the attribute directly.
    module.walk([&](memref::AllocOp alloc) {
      auto sw = alloc->getAttrOfType<SwizzleAttr>(kLayoutAttr);
      if (!sw)
        return;
      if (failed(swizzleUses(alloc.getResult(), sw, alloc)))
        failedAny = true;
      alloc->removeAttr(kLayoutAttr);
      alloc->setAttr(kDoneAttr, sw);
    });
    if (failedAny)
      signalPassFailure();
  }
};

//===----------------------------------------------------------------------===//
// swz-fuse
//===----------------------------------------------------------------------===//

constexpr StringLiteral kGraphOpsAttr = "swz.graph_ops";

/// `a`'s swz.graph_ops followed by `b`'s.
ArrayAttr concatGraphOps(Operation *a, Operation *b) {
  SmallVector<Attribute> all;
  for (Operation *op : {a, b})
    if (auto arr = op->getAttrOfType<ArrayAttr>(kGraphOpsAttr))
      all.append(arr.begin(), arr.end());
  return ArrayAttr::get(a->getContext(), all);
}

struct Fuse : impl::SwzFuseBase<Fuse> {
  using SwzFuseBase::SwzFuseBase;

  void runOnOperation() override {
    if (ropeKv)
      fuseRopeIntoKvWrite();
    if (ropeKv && qkRope)
      fuseQkIntoKvWrite();
    if (residual)
      fuseResidualAdds();
    if (sharedInput)
      markSharedInputs();
    if (quantizeOutput)
      markQuantizeOutputs();
  }

  /// An RMSNorm or SwiGLU right before a matmul that reads its result (the attention or
  /// FFN norm before q/k/v or gate/up, SwiGLU before down): swz.quantize_output.
  void markQuantizeOutputs() {
    getOperation().walk([&](Operation *op) {
      if (!isa<RmsNormOp, SwigluOp>(op) || op->hasAttr("swz.rows"))
        return;
      auto mm = dyn_cast_or_null<MatmulOp>(op->getNextNode());
      if (mm && !mm->hasAttr("swz.rows") && mm.getX() == op->getResult(0))
        op->setAttr("swz.quantize_output", UnitAttr::get(op->getContext()));
    });
  }

  /// Runs of up to three adjacent matmuls with one `x` and weight type, no residual and
  /// no row restriction: each gets swz.shared_input = the run's first graph op (after the
  /// residual fusion, so an o or down projection that took its add is never in a run).
  void markSharedInputs() {
    constexpr StringLiteral kShared = "swz.shared_input";
    constexpr int kMaxRun = 3;
    auto eligible = [](Operation *op) -> MatmulOp {
      auto mm = dyn_cast_or_null<MatmulOp>(op);
      if (!mm || mm.getResidual() || mm->hasAttr("swz.rows"))
        return MatmulOp();
      return mm;
    };
    getOperation().walk([&](Block *block) {
      SmallVector<MatmulOp> run;
      auto close = [&]() {
        if (run.size() > 1) {
          auto ids = run.front()->getAttrOfType<ArrayAttr>(kGraphOpsAttr);
          if (ids && !ids.empty())
            for (MatmulOp mm : run)
              mm->setAttr(kShared, ids[0]);
        }
        run.clear();
      };
      for (Operation &op : *block) {
        MatmulOp mm = eligible(&op);
        if (mm && !run.empty() && run.size() < kMaxRun && run.back()->getNextNode() == &op &&
            mm.getX() == run.back().getX() && mm.getWeightTypeAttr() == run.back().getWeightTypeAttr()) {
          run.push_back(mm);
          continue;
        }
        close();
        if (mm)
          run.push_back(mm);
      }
      close();
    });
  }

  void fuseResidualAdds() {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      for (unsigned i = 0; i < 2; ++i) {
        auto mm = add.getOperand(i).getDefiningOp<MatmulOp>();
        // The add must directly follow its matmul: the fused launch runs at the
        // matmul's place in the graph and writes the add's output buffer in place, so
        // no op in between may still read or write that buffer.
        if (!mm || !mm.getResult().hasOneUse() || mm.getResidual() ||
            mm->getNextNode() != add.getOperation() || mm->hasAttr("swz.rows") ||
            add->hasAttr("swz.rows"))
          continue;
        Value r = add.getOperand(1 - i);
        // Not `x = x + matmul(x, W)`: the epilogue writes the residual's buffer in place
        // while other workgroups may still read it as the matmul's input.
        if (r == mm.getX())
          continue;
        // The residual must be available where the matmul runs.
        if (Operation *def = r.getDefiningOp())
          if (def->getBlock() == mm->getBlock() && !def->isBeforeInBlock(mm))
            continue;
        OpBuilder b(add);
        auto fused = b.create<MatmulOp>(mm.getLoc(), add.getType(), mm.getX(), mm.getW(),
                                        mm.getBias(), r, mm.getWeightTypeAttr());
        for (NamedAttribute a : mm->getDiscardableAttrs())
          fused->setAttr(a.getName(), a.getValue());
        fused->setAttr(kGraphOpsAttr, concatGraphOps(mm, add));
        add.getResult().replaceAllUsesWith(fused.getResult());
        add.erase();
        mm.erase();
        break;
      }
    }
  }

  /// `v` seen through the importer's reshape round trip expand(collapse(x)), x of v's
  /// type, the expand used once and the collapse only by it (and by tensor.dim ops
  /// feeding it): x, with the expand and the collapse appended to `chain`; else v.
  static Value throughReshapes(Value v, SmallVectorImpl<Operation *> &chain) {
    auto e = v.getDefiningOp<tensor::ExpandShapeOp>();
    if (!e || !e.getResult().hasOneUse())
      return v;
    auto c = e.getSrc().getDefiningOp<tensor::CollapseShapeOp>();
    if (!c || c.getSrc().getType() != v.getType())
      return v;
    bool onlyReshape = llvm::all_of(c.getResult().getUsers(), [&](Operation *u) {
      return u == e.getOperation() ||
             (isa<tensor::DimOp>(u) && llvm::all_of(u->getUsers(), [&](Operation *w) {
                return w == e.getOperation();
              }));
    });
    if (!onlyReshape)
      return v;
    chain.push_back(e);
    chain.push_back(c);
    return c.getSrc();
  }

  /// Erases `ops` (consumers before producers) and the tensor.dim ops reading them,
  /// each once nothing uses it.
  static void eraseDead(ArrayRef<Operation *> ops) {
    for (Operation *op : ops) {
      for (Operation *u : llvm::make_early_inc_range(op->getUsers()))
        if (isa<tensor::DimOp>(u) && u->use_empty())
          u->erase();
      if (op->use_empty())
        op->erase();
    }
  }

  /// `a` rebuilt with other q / k and optional parts (the rest copied), standing for
  /// `a`'s graph ops and those of `absorbed`; `a` is erased.
  static AttentionOp rebuild(AttentionOp a, Value q, Value k, Value positions, RopeOp kRope,
                             bool qRope, Value gq, Value gk, FloatAttr eps,
                             ArrayRef<Operation *> absorbed) {
    OpBuilder b(a);
    auto fused = b.create<AttentionOp>(
        a.getLoc(), a.getType(), q, k, a.getV(), positions, gq, gk, a.getScaleAttr(),
        a.getCausalAttr(), a.getLayerAttr(),
        kRope ? kRope.getModeAttr() : a.getKRopeModeAttr(),
        kRope ? kRope.getThetaAttr() : a.getKRopeThetaAttr(),
        kRope ? kRope.getRotaryDimAttr() : a.getKRopeDimAttr(),
        qRope ? b.getUnitAttr() : UnitAttr(), eps);
    for (NamedAttribute attr : a->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    Operation *acc = a;
    for (Operation *op : absorbed) {
      fused->setAttr(kGraphOpsAttr, concatGraphOps(acc, op));
      acc = fused;
    }
    a.getResult().replaceAllUsesWith(fused.getResult());
    a.erase();
    return fused;
  }

  /// attention(q, expand(collapse(rope(k3, pos))), v) {layer} ->
  /// attention(q, k3, v) rope_k(pos) {layer, k_rope_*}.
  void fuseRopeIntoKvWrite() {
    SmallVector<AttentionOp> atts;
    getOperation().walk([&](AttentionOp a) { atts.push_back(a); });
    for (AttentionOp a : atts) {
      if (!a.getLayer() || a.getKPositions())
        continue;
      SmallVector<Operation *> dead;
      Value k = throughReshapes(a.getK(), dead);
      auto rope = k.getDefiningOp<RopeOp>();
      if (!rope || !rope.getResult().hasOneUse())
        continue;
      dead.push_back(rope);
      rebuild(a, a.getQ(), rope.getX(), rope.getPositions(), rope, false, Value(), Value(),
              FloatAttr(), {rope});
      eraseDead(dead);
    }
  }

  /// With rope_k: attention(expand(collapse(rope(q3, pos))), k, v) rope_k(pos), the
  /// same rope attributes -> attention(q3, k, v) rope_k(pos) {q_rope}; then, when both
  /// q3 and k are head RMSNorms (through the same reshapes) of one epsilon,
  /// attention(rms_norm(q0, gq), rms_norm(k0, gk), ...) -> attention(q0, k0, ...)
  /// qk_norm(gq, gk) {norm_epsilon}. Each absorbed op had that single use.
  void fuseQkIntoKvWrite() {
    SmallVector<AttentionOp> atts;
    getOperation().walk([&](AttentionOp a) { atts.push_back(a); });
    for (AttentionOp a : atts) {
      if (!a.getKPositions() || a.getQRope())
        continue;
      SmallVector<Operation *> dead;
      Value q = throughReshapes(a.getQ(), dead);
      auto rope = q.getDefiningOp<RopeOp>();
      if (!rope || !rope.getResult().hasOneUse() || rope.getPositions() != a.getKPositions() ||
          rope.getModeAttr() != a.getKRopeModeAttr() || rope.getThetaAttr() != a.getKRopeThetaAttr() ||
          rope.getRotaryDimAttr() != a.getKRopeDimAttr() || rope.getX().getType() != a.getQ().getType())
        continue;
      // The launch rewrites q's buffer in place (the importer's graph runs rope(q) in
      // place): q before the rope may have no other reader.
      if (!rope.getX().hasOneUse())
        continue;
      dead.push_back(rope);
      Value q0 = rope.getX(), k0 = a.getK();
      SmallVector<Operation *> absorbed = {rope};
      SmallVector<Operation *> normDead;
      Value qn = throughReshapes(q0, normDead), kn = throughReshapes(k0, normDead);
      auto nq = qn.getDefiningOp<RmsNormOp>(), nk = kn.getDefiningOp<RmsNormOp>();
      Value gq, gk;
      FloatAttr eps;
      if (nq && nk && nq != nk && nq.getResult().hasOneUse() && nk.getResult().hasOneUse() &&
          nq.getX().hasOneUse() &&
          nq.getEpsilonAttr() == nk.getEpsilonAttr() && nq.getX().getType() == q0.getType() &&
          nk.getX().getType() == k0.getType()) {
        q0 = nq.getX();
        k0 = nk.getX();
        gq = nq.getGamma();
        gk = nk.getGamma();
        eps = nq.getEpsilonAttr();
        absorbed.push_back(nq);
        absorbed.push_back(nk);
        dead.append(normDead.begin(), normDead.end());
        dead.push_back(nq);
        dead.push_back(nk);
      }
      rebuild(a, q0, k0, a.getKPositions(), RopeOp(), true, gq, gk, eps, absorbed);
      eraseDead(dead);
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createSwzApplySchedule(const schedule::TargetSchedule &s) {
  return std::make_unique<ApplySchedule>(s);
}

} // namespace swz
