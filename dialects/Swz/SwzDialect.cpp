//===- SwzDialect.cpp - swz dialect, attributes, op verifiers -------------===//
//
// The whole dialect is one translation unit on purpose: MLIR headers are slow to
// compile and CI builds on two cores.
//
//===----------------------------------------------------------------------===//
#include "Swz/SwzDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace swz;

#include "Swz/SwzDialect.cpp.inc"
#include "Swz/SwzEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Swz/SwzAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "Swz/SwzOps.cpp.inc"

void SwzDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Swz/SwzAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Swz/SwzOps.cpp.inc"
      >();
}

int64_t swz::quantBlockSize(QuantType type) {
  switch (type) {
  case QuantType::F32:
  case QuantType::F16:
  case QuantType::BF16:
    return 1;
  case QuantType::Q4_0:
  case QuantType::Q4_1:
  case QuantType::Q5_0:
  case QuantType::Q5_1:
  case QuantType::Q8_0:
    return 32;
  case QuantType::Q4_K:
  case QuantType::Q5_K:
  case QuantType::Q6_K:
    return 256;
  }
  return 1;
}

//===----------------------------------------------------------------------===//
// #swz.swizzle
//===----------------------------------------------------------------------===//

LogicalResult SwizzleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  unsigned bits, unsigned base, unsigned shift) {
  if (shift < bits)
    return emitError() << "swizzle shift S=" << shift << " must be >= bits B="
                       << bits << " so that the source bits [M+S, M+S+B) and the "
                       << "target bits [M, M+B) do not overlap";
  if (bits + base + shift > 31)
    return emitError() << "swizzle reads bits up to M+S+B=" << bits + base + shift
                       << ", more than the 31 bits of an element offset";
  return success();
}

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

namespace {
bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// Emits "<what> must have rank <rank>, got <type>" when the rank differs.
LogicalResult expectRank(Operation *op, Value v, int64_t rank, StringRef what) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() != rank)
    return op->emitOpError() << what << " must have rank " << rank << ", got "
                             << type;
  return success();
}

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

LogicalResult expectDim(Operation *op, StringRef what, int64_t got,
                        StringRef expectedWhat, int64_t expected) {
  if (!dimsCompatible(got, expected))
    return op->emitOpError() << what << " (" << dimStr(got) << ") must equal "
                             << expectedWhat << " (" << dimStr(expected) << ")";
  return success();
}

LogicalResult expectBlockMultiple(Operation *op, StringRef what, int64_t size,
                                  QuantType type) {
  int64_t block = quantBlockSize(type);
  if (!ShapedType::isDynamic(size) && size % block != 0)
    return op->emitOpError() << what << " = " << size << " is not a multiple of the "
                             << stringifyQuantType(type) << " block size " << block;
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Model-graph op verifiers
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getX(), 2, "x")) ||
      failed(expectRank(op, getW(), 2, "weight")) ||
      failed(expectRank(op, getResult(), 2, "result")))
    return failure();
  if (failed(expectDim(op, "x dim 1 (K)", dim(getX(), 1), "weight dim 1 (K)",
                       dim(getW(), 1))) ||
      failed(expectDim(op, "result dim 0 (T)", dim(getResult(), 0), "x dim 0 (T)",
                       dim(getX(), 0))) ||
      failed(expectDim(op, "result dim 1 (N)", dim(getResult(), 1),
                       "weight dim 0 (N)", dim(getW(), 0))))
    return failure();
  if (Value b = getBias()) {
    if (failed(expectRank(op, b, 1, "bias")) ||
        failed(expectDim(op, "bias dim 0", dim(b, 0), "weight dim 0 (N)", dim(getW(), 0))))
      return failure();
  }
  if (Value r = getResidual()) {
    if (r.getType() != getResult().getType())
      return emitOpError() << "residual type " << r.getType()
                           << " differs from the result type " << getResult().getType();
  }
  return expectBlockMultiple(op, "K", dim(getW(), 1), getWeightType());
}

LogicalResult EmbeddingOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getTable(), 2, "table")) ||
      failed(expectRank(op, getIds(), 1, "ids")) ||
      failed(expectRank(op, getResult(), 2, "result")))
    return failure();
  if (failed(expectDim(op, "result dim 0 (T)", dim(getResult(), 0), "ids dim 0 (T)",
                       dim(getIds(), 0))) ||
      failed(expectDim(op, "result dim 1 (D)", dim(getResult(), 1),
                       "table dim 1 (D)", dim(getTable(), 1))))
    return failure();
  return expectBlockMultiple(op, "row length D", dim(getTable(), 1),
                             getWeightType());
}

LogicalResult RmsNormOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getGamma(), 1, "gamma")))
    return failure();
  auto xType = cast<RankedTensorType>(getX().getType());
  if (xType.getRank() < 1)
    return emitOpError() << "x must have rank >= 1, got " << xType;
  if (failed(expectDim(op, "gamma dim 0", dim(getGamma(), 0), "the last dim of x",
                       xType.getDimSize(xType.getRank() - 1))))
    return failure();
  double eps = getEpsilon().convertToDouble();
  if (!(eps > 0.0) || eps >= 1.0)
    return emitOpError() << "epsilon must be in (0, 1), got " << eps;
  return success();
}

LogicalResult RopeOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getX(), 3, "x ([T, H, Dh])")) ||
      failed(expectRank(op, getPositions(), 1, "positions")))
    return failure();
  if (failed(expectDim(op, "positions dim 0 (T)", dim(getPositions(), 0),
                       "x dim 0 (T)", dim(getX(), 0))))
    return failure();
  int64_t rot = getRotaryDim();
  if (rot <= 0 || rot % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, got " << rot;
  int64_t headDim = dim(getX(), 2);
  if (!ShapedType::isDynamic(headDim) && rot > headDim)
    return emitOpError() << "rotary_dim (" << rot << ") exceeds the head dim ("
                         << headDim << ")";
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be positive, got "
                         << getTheta().convertToDouble();
  return success();
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getQ(), 3, "q ([T, Hq, D])")) ||
      failed(expectRank(op, getK(), 3, "k ([S, Hkv, D])")) ||
      failed(expectRank(op, getV(), 3, "v ([S, Hkv, D])")) ||
      failed(expectRank(op, getResult(), 3, "result")))
    return failure();
  for (unsigned i = 0; i < 3; ++i)
    if (!dimsCompatible(dim(getK(), i), dim(getV(), i)))
      return emitOpError() << "k and v shapes differ in dim " << i << ": "
                           << getK().getType() << " vs " << getV().getType();
  if (failed(expectDim(op, "q head dim", dim(getQ(), 2), "k head dim",
                       dim(getK(), 2))))
    return failure();
  int64_t hq = dim(getQ(), 1), hkv = dim(getK(), 1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError() << "query heads (" << hq
                         << ") must be a multiple of KV heads (" << hkv
                         << ") for grouped-query attention";
  for (unsigned i = 0; i < 3; ++i)
    if (!dimsCompatible(dim(getResult(), i), dim(getQ(), i)))
      return emitOpError() << "result type " << getResult().getType()
                           << " must match q type " << getQ().getType();
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError() << "scale must be positive, got "
                         << getScale().convertToDouble();
  if (std::optional<uint32_t> layer = getLayer()) {
    // KV-cache form: k/v are the batch's new rows, appended before attending.
    if (failed(expectDim(op, "k dim 0 (new rows S)", dim(getK(), 0), "q dim 0 (T)",
                         dim(getQ(), 0))))
      return failure();
    if (!getCausal())
      return emitOpError() << "attention over layer " << *layer
                           << "'s KV cache must be causal";
  }
  const bool anyRope = getKPositions() || getKRopeMode() || getKRopeTheta() || getKRopeDim();
  if (anyRope) {
    if (!getKPositions() || !getKRopeMode() || !getKRopeTheta() || !getKRopeDim())
      return emitOpError() << "rope_k needs positions, k_rope_mode, k_rope_theta and "
                              "k_rope_dim together";
    if (!getLayer())
      return emitOpError() << "rope_k (RoPE fused into the KV write) needs a KV-cache layer";
    int64_t rot = *getKRopeDim(), d = dim(getK(), 2);
    if (rot <= 0 || rot % 2 != 0 || (!ShapedType::isDynamic(d) && rot > d))
      return emitOpError() << "k_rope_dim (" << rot
                           << ") must be even, positive and at most the head dim (" << d << ")";
    if (failed(expectDim(op, "positions dim 0", dim(getKPositions(), 0), "k dim 0 (T)",
                         dim(getK(), 0))))
      return failure();
  }
  if (getQRope() && !getKPositions())
    return emitOpError() << "q_rope (RoPE on q in the KV write's launch) needs rope_k";
  const bool anyNorm = getQNormWeight() || getKNormWeight() || getNormEpsilon();
  if (anyNorm) {
    if (!getQNormWeight() || !getKNormWeight() || !getNormEpsilon())
      return emitOpError() << "qk_norm needs both weights and norm_epsilon together";
    if (!getKPositions())
      return emitOpError() << "qk_norm (head RMSNorm in the KV write's launch) needs rope_k";
    for (Value w : {getQNormWeight(), getKNormWeight()}) {
      if (failed(expectRank(op, w, 1, "qk_norm weight ([D])")) ||
          failed(expectDim(op, "qk_norm weight dim 0", dim(w, 0), "head dim", dim(getK(), 2))))
        return failure();
    }
    if (!(getNormEpsilon()->convertToDouble() > 0.0))
      return emitOpError() << "norm_epsilon must be positive";
  }
  return success();
}

LogicalResult ArgmaxOp::verify() {
  Operation *op = getOperation();
  if (failed(expectRank(op, getLogits(), 2, "logits ([T, V])")) ||
      failed(expectRank(op, getResult(), 1, "result")))
    return failure();
  return expectDim(op, "result dim 0 (T)", dim(getResult(), 0), "logits dim 0 (T)",
                   dim(getLogits(), 0));
}

//===----------------------------------------------------------------------===//
// Tile-spec op verifiers
//===----------------------------------------------------------------------===//

namespace {
/// mma.sync m16n8k16 / wgmma take 16-bit inputs here; returns the element size.
LogicalResult verifyTileElementType(Operation *op, Type type) {
  if (!type.isF16() && !type.isBF16())
    return op->emitOpError() << "element_type must be f16 or bf16 (the 16-bit "
                                "inputs of mma.m16n8k16), got "
                             << type;
  return success();
}

LogicalResult verifyWarpsStages(Operation *op, std::optional<uint32_t> warps,
                                std::optional<uint32_t> stages) {
  if (!warps || !stages)
    return op->emitOpError() << "a scheduled tile needs both warps(...) and "
                                "stages(...)";
  if (*warps == 0 || *warps > 16 || (*warps & (*warps - 1)) != 0)
    return op->emitOpError() << "warps must be a power of two in [1, 16], got "
                             << *warps;
  if (*stages < 1 || *stages > 8)
    return op->emitOpError() << "stages must be in [1, 8], got " << *stages;
  return success();
}

/// The XOR only permutes columns inside one row when the row length (in elements)
/// is a multiple of the swizzle's column span 2^(M+B).
LogicalResult verifySwizzleFitsRow(Operation *op, SwizzleAttr layout,
                                   int64_t rowElems, StringRef rowWhat) {
  if (!layout)
    return success();
  int64_t span = int64_t(1) << (layout.getBase() + layout.getBits());
  if (rowElems % span != 0)
    return op->emitOpError()
           << "smem layout " << layout << " permutes columns in blocks of " << span
           << " elements, which does not divide the row length " << rowWhat
           << " = " << rowElems;
  return success();
}
} // namespace

LogicalResult GemmTileOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyTileElementType(op, getElementType())))
    return failure();
  if (auto w = getWeights()) {
    if (*w != "q4_k" && *w != "q6_k" && *w != "q8_0")
      return emitOpError() << "weights \"" << *w
                           << "\" is not a block format the dequantizing GEMM reads "
                              "(q4_k, q6_k, q8_0)";
    if (!getElementType().isF16() || getShapeClass() || getSmemLayout())
      return emitOpError() << "the dequantizing (weights) variant is f16, with no shape_class "
                              "and no smem layout";
  }
  if (!isScheduled()) {
    if (getWarps() || getStages() || getSmemLayout())
      return emitOpError() << "warps, stages and smem need tile(M, N, K) as well";
    if (getConflictFree())
      return emitOpError() << "conflict_free is a claim about a scheduled tile; "
                              "set tile(M, N, K) and smem(...) first";
    return success();
  }
  int64_t m = *getTileM(), n = *getTileN(), k = *getTileK();
  if (m <= 0 || m % 16 != 0)
    return emitOpError() << "tile M must be a positive multiple of 16 (mma M), got "
                         << m;
  if (n <= 0 || n % 8 != 0)
    return emitOpError() << "tile N must be a positive multiple of 8 (mma N), got "
                         << n;
  if (k <= 0 || k % 16 != 0)
    return emitOpError() << "tile K must be a positive multiple of 16 (mma K), got "
                         << k;
  if (failed(verifyWarpsStages(op, getWarps(), getStages())))
    return failure();
  int64_t fragments = (m / 16) * (n / 8);
  if (fragments % *getWarps() != 0)
    return emitOpError() << "the " << m << "x" << n << " tile has " << fragments
                         << " m16n8 fragments, which do not split evenly over "
                         << *getWarps() << " warps";
  return verifySwizzleFitsRow(op, getSmemLayoutAttr(), k, "tile K");
}

LogicalResult AttentionTileOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyTileElementType(op, getElementType())))
    return failure();
  int64_t d = getHeadDim();
  if (d <= 0 || d > 256 || d % 16 != 0)
    return emitOpError() << "head_dim must be a multiple of 16 in [16, 256], got "
                         << d;
  if (getDecode() && (getSmemLayout() || getMma() || getCopy() || getConflictFree()))
    return emitOpError() << "decode stages nothing through ldmatrix or cp.async: no smem, "
                            "mma, copy or conflict_free";
  if (!getDecode() && (getKeysInFlight() || getMinCtasPerSm()))
    return emitOpError() << "keys_in_flight and min_ctas_per_sm are decode fields";
  if (!isScheduled()) {
    if (getWarps() || getStages() || getSmemLayout() || getKeysInFlight())
      return emitOpError()
             << "warps, stages, smem and keys_in_flight need block(Q, KV) as well";
    if (getConflictFree())
      return emitOpError() << "conflict_free is a claim about a scheduled tile; "
                              "set block(Q, KV) and smem(...) first";
    return success();
  }
  if (failed(verifyWarpsStages(op, getWarps(), getStages())))
    return failure();
  int64_t bq = *getBlockQ(), bkv = *getBlockKv(), w = *getWarps();
  if (getDecode()) {
    // block(rows, split unit); the lowering checks what it can emit.
    if (bq <= 0 || bkv <= 0)
      return emitOpError() << "decode: block(rows, split unit) must be positive, got ("
                           << bq << ", " << bkv << ")";
    // (The attributes are signless i32: their getters read them unsigned, getInt() signed.)
    if (!getKeysInFlightAttr() || getKeysInFlightAttr().getInt() < 1)
      return emitOpError() << "decode: a scheduled decode tile needs keys_in_flight >= 1";
    if (getMinCtasPerSmAttr() && getMinCtasPerSmAttr().getInt() < 0)
      return emitOpError() << "decode: min_ctas_per_sm must be >= 0, got "
                           << getMinCtasPerSmAttr().getInt();
    return success();
  }
  if (bq <= 0 || bq % (16 * w) != 0)
    return emitOpError() << "block_q (" << bq << ") must be a positive multiple of "
                         << "16 x warps (" << 16 * w
                         << "): each warp owns 16 query rows";
  if (bkv <= 0 || bkv % 16 != 0)
    return emitOpError() << "block_kv must be a positive multiple of 16, got "
                         << bkv;
  return verifySwizzleFitsRow(op, getSmemLayoutAttr(), d, "head_dim");
}

LogicalResult GemvTileOp::verify() {
  const StringRef w = getWeights(), a = getActivations();
  if (a != "q8x" && a != "f32")
    return emitOpError() << "activations must be \"q8x\" (int8 blocks of 32, dp4a) or \"f32\", "
                            "got \""
                         << a << "\"";
  if (a == "q8x" && w != "q4_k" && w != "q8_0" && w != "q6_k" && w != "q4_1" && w != "q5_0")
    return emitOpError() << "weights must be one of q4_k, q8_0, q6_k, q4_1, q5_0 (the int8 "
                            "path's block formats), got \""
                         << w << "\"";
  if (a == "f32" && w != "q4_0" && w != "q4_1" && w != "q5_0" && w != "q8_0" && w != "q4_k" &&
      w != "q6_k" && w != "f16")
    return emitOpError() << "weights must be one of q4_0, q4_1, q5_0, q8_0, q4_k, q6_k, f16 "
                            "(the f32 path's), got \""
                         << w << "\"";
  if (getLookup()) {
    if (a != "f32")
      return emitOpError() << "lookup (the embedding lookup) reads f32 rows: activations \"f32\"";
    if (isScheduled() || getUnitsInFlightAttr() || getMinCtasPerSmAttr() || getMTilesAttr())
      return emitOpError() << "lookup has no schedule fields (rows_per_warp, warps, m_tiles, "
                              "units_in_flight, min_ctas_per_sm)";
    if (getMma() || getSplitK())
      return emitOpError() << "lookup is the embedding lookup: no mma, no split_k";
    return success();
  }
  if (getMma()) {
    if (*getMma() != "mma.sync.m16n8k16" || w != "f16" || a != "f32")
      return emitOpError() << "mma \"mma.sync.m16n8k16\" is F16's tensor-core GEMV (weights "
                              "f16, activations f32); got mma \""
                           << *getMma() << "\" with weights \"" << w << "\"";
    if (getRowsPerWarpAttr())
      return emitOpError() << "the tensor-core GEMV's rows are m_tiles x 16 a workgroup, shared "
                              "by its warps: no rows_per_warp";
    if (!getWarpsAttr()) {
      if (getMTilesAttr() || getUnitsInFlightAttr() || getMinCtasPerSmAttr())
        return emitOpError() << "m_tiles, units_in_flight and min_ctas_per_sm need warps as well";
      return success();
    }
    const int64_t W = getWarpsAttr().getInt();
    if (!getMTilesAttr())
      return emitOpError() << "a scheduled tensor-core GEMV needs m_tiles";
    const int64_t mt = getMTilesAttr().getInt();
    if (W < 1 || W > 16 || mt < 1 || mt > 4)
      return emitOpError() << "the tensor-core GEMV needs warps in [1, 16] and m_tiles in [1, 4], "
                              "got warps "
                           << W << ", m_tiles " << mt;
    if (!getUnitsInFlightAttr() || getUnitsInFlightAttr().getInt() < 1 ||
        getUnitsInFlightAttr().getInt() > 8)
      return emitOpError() << "a scheduled GEMV needs units_in_flight in [1, 8]";
    if (getMinCtasPerSmAttr())
      return emitOpError() << "the tensor-core GEMV takes no min_ctas_per_sm";
    return success();
  }
  if (getWarpsAttr() || getMTilesAttr() || getSplitK())
    return emitOpError() << "warps, m_tiles and split_k are the tensor-core GEMV's (mma)";
  if (!isScheduled()) {
    if (getUnitsInFlightAttr() || getMinCtasPerSmAttr())
      return emitOpError() << "units_in_flight and min_ctas_per_sm need rows_per_warp as well";
    return success();
  }
  // (The attributes are signless i32: getInt() reads them signed.) The bounds are the
  // schedule file's (Schedule.cpp); 8 rows a warp keep an int8 kernel's workgroup memory
  // (4608 bytes a row a warp) within the 48 KiB a kernel may declare statically.
  const int64_t rows = getRowsPerWarpAttr().getInt();
  if (rows < 1 || rows > 8)
    return emitOpError() << "rows_per_warp must be in [1, 8], got " << rows;
  if (a == "f32" && rows != 1)
    return emitOpError() << "the f32 GEMV takes one row a warp (rows_per_warp 1), got " << rows;
  if (!getUnitsInFlightAttr() || getUnitsInFlightAttr().getInt() < 1 ||
      getUnitsInFlightAttr().getInt() > 8)
    return emitOpError() << "a scheduled GEMV needs units_in_flight in [1, 8]";
  if (getMinCtasPerSmAttr() &&
      (getMinCtasPerSmAttr().getInt() < 0 || getMinCtasPerSmAttr().getInt() > 32))
    return emitOpError() << "min_ctas_per_sm must be in [0, 32], got "
                         << getMinCtasPerSmAttr().getInt();
  return success();
}
