//===- SwzDialect.h - the swz dialect ---------------------------*- C++ -*-===//
//
// Public header of the swz dialect: the dialect, #swz.swizzle / #swz.quant /
// #swz.rope_mode attributes and all ops (see SwzOps.td for their documentation).
//
//===----------------------------------------------------------------------===//
#ifndef SWZ_DIALECT_SWZDIALECT_H
#define SWZ_DIALECT_SWZDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Swz/SwzDialect.h.inc"
#include "Swz/SwzEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Swz/SwzAttrs.h.inc"

#define GET_OP_CLASSES
#include "Swz/SwzOps.h.inc"

namespace swz {
/// Number of logical elements per storage block of `type` (1 for f32/f16, 32 for
/// q4_0/q4_1/q8_0, 256 for the k-quants), following ggml's type traits table.
int64_t quantBlockSize(QuantType type);
} // namespace swz

#endif // SWZ_DIALECT_SWZDIALECT_H
