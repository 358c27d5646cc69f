// codegen/kernels/gemv_<type>.mlir, gemv_q8x.mlir and gemv_f16_mma.mlir are written by
// gen_quant_kernels.py (the headers and tile specs; the kernels of the tile specs are
// swz-lower-tiles', compiler/mlir/LowerGemv.cpp); the checked-in files must be what the
// script writes today.
// RUN: python3 %kernels/gen_quant_kernels.py --check
