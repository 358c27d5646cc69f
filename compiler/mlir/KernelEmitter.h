//===- KernelEmitter.h - arithmetic on one builder for swz-lower-tiles' kernels -===//
//
// The kernel generators ported from gen_quant_kernels.py build their ops through this:
// the script's helper names (add, mul, shr, fmul, ...) on one OpBuilder, constants at the
// top of the entry block (one of each, in the order first asked for). Only the
// generators (LowerAttentionDecode.cpp, LowerGemv.cpp) include it: it pulls in the arith,
// gpu, llvm, math, memref, scf and vector dialects.
//
// C++ leaves the order of a call's arguments unspecified: a generator that promises the
// script's op order names each intermediate (`Value a = e.mul(..); e.add(a, ..)`) instead
// of nesting two op-building calls in one argument list.
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_COMPILER_MLIR_KERNELEMITTER_H
#define SWZ_COMPILER_MLIR_KERNELEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>

namespace swz {

/// Arithmetic on one builder with gen_quant_kernels.py's helper names; constants at the
/// top of the entry block, one of each, in the order first asked for.
struct KernelEmitter {
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Block *entry;
  std::map<std::pair<int, int64_t>, mlir::Value> consts;
  mlir::Operation *lastConstant = nullptr;
  mlir::Type idx, i32, i16, f16, f32;

  KernelEmitter(mlir::OpBuilder &b, mlir::Location loc, mlir::Block *entry)
      : b(b), loc(loc), entry(entry), idx(b.getIndexType()), i32(b.getI32Type()),
        i16(b.getI16Type()), f16(b.getF16Type()), f32(b.getF32Type()) {}

  /// The constant `attr` (kind and key tell one from another), created on first use.
  mlir::Value constant(int kind, int64_t key, mlir::TypedAttr attr) {
    auto it = consts.find({kind, key});
    if (it != consts.end())
      return it->second;
    mlir::OpBuilder cb(b.getContext());
    if (lastConstant)
      cb.setInsertionPointAfter(lastConstant);
    else
      cb.setInsertionPointToStart(entry);
    mlir::Value v = cb.create<mlir::arith::ConstantOp>(loc, attr);
    lastConstant = v.getDefiningOp();
    consts[{kind, key}] = v;
    return v;
  }
  /// index, i32 and f32 constants.
  mlir::Value c(int64_t v) { return constant(0, v, b.getIndexAttr(v)); }
  mlir::Value ci(int64_t v) { return constant(1, v, b.getI32IntegerAttr(int32_t(v))); }
  mlir::Value cf(float v) {
    int64_t key = 0;
    static_assert(sizeof(float) == 4);
    std::memcpy(&key, &v, 4);
    return constant(2, key, b.getF32FloatAttr(v));
  }

  // index / i32 arithmetic (the operands' type)
  mlir::Value add(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::AddIOp>(loc, a, d); }
  mlir::Value sub(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::SubIOp>(loc, a, d); }
  mlir::Value mul(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::MulIOp>(loc, a, d); }
  mlir::Value divu(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::DivUIOp>(loc, a, d); }
  mlir::Value remu(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::RemUIOp>(loc, a, d); }
  mlir::Value minu(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::MinUIOp>(loc, a, d); }
  mlir::Value cmp(mlir::arith::CmpIPredicate p, mlir::Value a, mlir::Value d) {
    return b.create<mlir::arith::CmpIOp>(loc, p, a, d);
  }
  mlir::Value ult(mlir::Value a, mlir::Value d) { return cmp(mlir::arith::CmpIPredicate::ult, a, d); }
  mlir::Value cmpf(mlir::arith::CmpFPredicate p, mlir::Value a, mlir::Value d) {
    return b.create<mlir::arith::CmpFOp>(loc, p, a, d);
  }
  mlir::Value andi(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::AndIOp>(loc, a, d); }
  mlir::Value ori(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::OrIOp>(loc, a, d); }
  mlir::Value shr(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::ShRUIOp>(loc, a, d); }
  mlir::Value sar(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::ShRSIOp>(loc, a, d); }
  mlir::Value shl(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::ShLIOp>(loc, a, d); }
  mlir::Value select(mlir::Value cond, mlir::Value t, mlir::Value f) {
    return b.create<mlir::arith::SelectOp>(loc, cond, t, f);
  }
  /// i32 -> index, and index -> i32.
  mlir::Value toIndex(mlir::Value a) { return b.create<mlir::arith::IndexCastOp>(loc, idx, a); }
  mlir::Value toI32(mlir::Value a) { return b.create<mlir::arith::IndexCastOp>(loc, i32, a); }

  // f32
  mlir::Value fmul(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::MulFOp>(loc, a, d); }
  mlir::Value fadd(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::AddFOp>(loc, a, d); }
  mlir::Value fsub(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::SubFOp>(loc, a, d); }
  mlir::Value fdiv(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::DivFOp>(loc, a, d); }
  mlir::Value fma(mlir::Value a, mlir::Value m, mlir::Value c) {
    return b.create<mlir::math::FmaOp>(loc, a, m, c);
  }
  mlir::Value maxf(mlir::Value a, mlir::Value d) { return b.create<mlir::arith::MaximumFOp>(loc, a, d); }
  mlir::Value exp(mlir::Value a) { return b.create<mlir::math::ExpOp>(loc, a); }
  mlir::Value log(mlir::Value a) { return b.create<mlir::math::LogOp>(loc, a); }
  /// i32 -> f32, signed.
  mlir::Value sitofp(mlir::Value a) { return b.create<mlir::arith::SIToFPOp>(loc, f32, a); }

  // memory
  mlir::Value load(mlir::Value m, mlir::Value i) {
    return b.create<mlir::memref::LoadOp>(loc, m, mlir::ValueRange{i});
  }
  void store(mlir::Value v, mlir::Value m, mlir::Value i) {
    b.create<mlir::memref::StoreOp>(loc, v, m, mlir::ValueRange{i});
  }
  /// Element i of a 1-D vector.
  mlir::Value extract(mlir::Value vec, int64_t i) {
    return b.create<mlir::vector::ExtractOp>(loc, vec, llvm::ArrayRef<int64_t>{i});
  }

  /// ceil(a / d) as the script wrote it: (a + (d - 1)) / d.
  mlir::Value ceilDiv(mlir::Value a, mlir::Value d) {
    mlir::Value dm1 = sub(d, c(1));
    return divu(add(a, dm1), d);
  }
  /// a + k, the add left out when k is 0 (the script's `add(x, c(k)) if k else x`).
  mlir::Value plus(mlir::Value a, int64_t k) { return k ? add(a, c(k)) : a; }
  /// Inline PTX `text` with no operands and no results, kept (side effects).
  void ptx(const char *text) {
    b.create<mlir::LLVM::InlineAsmOp>(loc, mlir::TypeRange{}, mlir::ValueRange{}, text, "",
                                      /*has_side_effects=*/true, /*is_align_stack=*/false,
                                      mlir::LLVM::AsmDialectAttr{}, mlir::ArrayAttr{});
  }
};

/// A kernel `gpu.func @name` of `type` at `b`'s insertion point: a 1-D workgroup of
/// `threads` (known_block_size), nvvm.minctasm = `minCtas` when > 0 (workgroups an SM the
/// registers must allow), and the launch rule `grid` (swz.grid, read by the driver's launch
/// records). The caller adds any other attribute (SPIR-V's entry_point_abi).
inline mlir::gpu::GPUFuncOp createKernel(mlir::OpBuilder &b, mlir::Location loc,
                                         llvm::StringRef name, mlir::FunctionType type,
                                         int32_t threads, const std::string &grid,
                                         int64_t minCtas = 0) {
  auto fn = b.create<mlir::gpu::GPUFuncOp>(loc, name, type);
  fn->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));
  if (minCtas)
    fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(int32_t(minCtas)));
  fn->setAttr("swz.grid", b.getStringAttr(grid));
  return fn;
}

/// Builds `if (cond) { body() }` (no results) at the emitter's insertion point.
template <typename Fn> void emitIf(KernelEmitter &e, mlir::Value cond, Fn body) {
  auto op = e.b.create<mlir::scf::IfOp>(e.loc, cond, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(e.b);
  e.b.setInsertionPoint(op.thenBlock()->getTerminator());
  body();
}

} // namespace swz

#endif // SWZ_COMPILER_MLIR_KERNELEMITTER_H
