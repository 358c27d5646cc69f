// swz-extract-kernels writes each gpu.binary object to <output-dir>/<name>.<ext>.
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %s -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t 2>&1 -o /dev/null | FileCheck %s --check-prefix=REMARK
// RUN: FileCheck %s --check-prefix=PTX < %t/axpy_module.ptx
// RUN: not swizzle-opt %s -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_80 cubin-format=isa" \
// RUN:   -swz-extract-kernels=output-dir=%t/missing -o /dev/null 2>&1 | FileCheck %s --check-prefix=NODIR

// REMARK: remark: wrote {{[0-9]+}} bytes of ptx to axpy_module.ptx
// PTX: .target sm_80
// PTX: .visible .entry axpy(
// PTX: fma.rn.f32
// NODIR: error: swz-extract-kernels: cannot write {{.*}}missing/axpy_module.ptx

module attributes {gpu.container_module} {
  gpu.module @axpy_module {
    gpu.func @axpy(%a: f32, %x: memref<?xf32>, %y: memref<?xf32>) kernel {
      %i = gpu.thread_id x
      %xv = memref.load %x[%i] : memref<?xf32>
      %yv = memref.load %y[%i] : memref<?xf32>
      %r = math.fma %a, %xv, %yv : f32
      memref.store %r, %y[%i] : memref<?xf32>
      gpu.return
    }
  }
}
