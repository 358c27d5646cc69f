// swz-grid-dependency-control: every kernel of a gpu.module starts with
// griddepcontrol.wait, then griddepcontrol.launch_dependents (programmatic dependent
// launch, sm_90+); functions that are not kernels are left alone. Lowered to PTX for
// sm_90, the two instructions come first in the entry and ptxas accepts them.
// REQUIRES: ptxas
// RUN: swizzle-opt %s -pass-pipeline='builtin.module(gpu.module(swz-grid-dependency-control))' | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: swizzle-opt %s -swz-grid-dependency-control \
// RUN:   -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-format=isa" -swz-extract-kernels=output-dir=%t -o /dev/null
// RUN: FileCheck %s --check-prefix=PTX < %t/m.ptx
// RUN: %ptxas -arch=sm_90 %t/m.ptx -o /dev/null

// CHECK-LABEL: gpu.func @k(
// CHECK-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.wait;", ""  : () -> ()
// CHECK-NEXT: llvm.inline_asm has_side_effects "griddepcontrol.launch_dependents;", ""  : () -> ()
// CHECK-NEXT: gpu.thread_id
// CHECK-LABEL: gpu.func @helper(
// CHECK-NOT: griddepcontrol
// CHECK: gpu.return

// PTX-LABEL: .entry k(
// PTX: griddepcontrol.wait;
// PTX: griddepcontrol.launch_dependents;
// PTX: mov.u32 {{.*}}%tid.x;
// PTX: st.global
module attributes {gpu.container_module} {
  gpu.module @m {
    gpu.func @k(%y: memref<?xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
      %tid = gpu.thread_id x
      %one = arith.constant 1.0 : f32
      memref.store %one, %y[%tid] : memref<?xf32>
      gpu.return
    }
    gpu.func @helper(%y: memref<?xf32>) {
      gpu.return
    }
  }
}
