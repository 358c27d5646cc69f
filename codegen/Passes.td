//===- Passes.td - codegen passes ----------------------------*- tablegen -*-===//
#ifndef SWZ_CODEGEN_PASSES_TD
#define SWZ_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def SwzExtractKernels : Pass<"swz-extract-kernels", "mlir::ModuleOp"> {
  let summary = "write every serialized GPU kernel module (gpu.binary) to a file";
  let description = [{
    Runs after `gpu-module-to-binary`. For each `gpu.binary @name` and each of
    its `#gpu.object`s, writes the object's bytes to
    `<output-dir>/<name>.<ext>`, where ext is `ptx` for NVVM assembly (format
    isa), `cubin` for NVVM binaries and `spv` for SPIR-V. With several objects
    per binary the target's chip is appended (`<name>.sm_90.ptx`). MLIR 19
    NUL-terminates PTX text; the terminator is dropped so ptxas accepts the
    file. Each `spirv.module @__spv__<name>` (what convert-gpu-to-spirv emits
    next to `gpu.module @<name>`) is serialized to `<output-dir>/<name>.spv`.
    The IR is left unchanged; one remark per file written.
  }];
  let options = [
    Option<"outputDir", "output-dir", "std::string", /*default=*/"\".\"",
           "directory the kernel files are written to (must exist)">,
  ];
}

def SwzOutlineKernels : Pass<"swz-outline-kernels", "mlir::ModuleOp"> {
  let summary = "bind every model-graph op to its target kernels and outline them";
  let description = [{
    For each swz model-graph op, looks up the kernels implementing it on
    `target` in the built-in kernel table (codegen/KernelTable.h, keyed
    `<op>.<weight type>[+residual]`), copies the `gpu.module` of each kernel
    source into the module (once; the module becomes a `gpu.container_module`)
    and records the kernels per phase as symbol references:

    ```mlir
    %q = swz.matmul %h, %wq {weight_type = #swz.quant<q8_0>,
        swz.kernels = {decode = [@swz_gemv_q8_0::@gemv_q8_0],
                       prefill = [@swz_dequant::@dequant_q8_0_f16, ...]}} ...
    gpu.module @swz_gemv_q8_0 { gpu.func @gemv_q8_0(...) kernel ... }
    ```

    A kernel source that is a tile spec (`swz.gemm_tile`, gemm_f16.mlir) gets
    the target's schedule applied and its kernel generated (swz-apply-schedule,
    swz-lower-tiles) before its gpu.module is copied: option `schedule`, or the
    schedule swizzlec passes in (planGraph).

    An op with no kernel for the target is an error naming its key, so the
    package writer lists everything that is missing at once.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"sm_90\"",
           "sm_XY (PTX) or spirv">,
    Option<"f16SplitKBelowRows", "f16-split-k-below-rows", "int64_t", /*default=*/"0",
           "F16 matmuls with fewer rows use the 16-warp tensor-core GEMV (the target "
           "schedule's gemv.f16_mma_split_k_below_rows)">,
    Option<"q4kMma", "q4k-mma", "bool", /*default=*/"false",
           "Q4_K matmuls decode on the int8 tensor cores (the target schedule's "
           "gemv.q4_k_mma)">,
    Option<"q4kMmaSplitKBelowRows", "q4k-mma-split-k-below-rows", "int64_t", /*default=*/"0",
           "with q4k-mma, Q4_K matmuls with fewer rows use the 8-warp workgroup (the "
           "target schedule's gemv.q4_k_mma_split_k_below_rows)">,
    Option<"skinnyMaxRows", "skinny-max-rows", "int64_t", /*default=*/"0",
           "prompt passes of at most this many rows multiply Q4_K / Q6_K / Q8_0 weights "
           "with the skinny GEMM (the target schedule's gemm.skinny_max_rows)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "the target's schedule file, for kernel sources that are tile specs "
           "(gemm_f16.mlir: swz-apply-schedule and swz-lower-tiles generate its kernel)">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def SwzSpirvWorkgroupMemory : Pass<"swz-spirv-workgroup-memory", "mlir::gpu::GPUModuleOp"> {
  let summary = "turn workgroup-memory memref.globals into allocations convert-gpu-to-spirv lowers";
  let description = [{
    Runs on the spirv path only, before `convert-gpu-to-spirv`. Kernels declare
    workgroup (shared) memory once, target-neutrally, as a
    `memref.global` in `#gpu.address_space<workgroup>` read through
    `memref.get_global`; the NVVM lowering turns that into `.shared`
    storage. MLIR 19's SPIR-V conversion has no pattern for `memref.global`
    (and none for `gpu.func` workgroup attributions), but it lowers a
    statically shaped `memref.alloc` in memory space 3 (Workgroup) to a
    `spirv.GlobalVariable` in the Workgroup storage class. So each
    `memref.get_global` of such a global becomes a `memref.alloc` with memory
    space 3 at the start of its `gpu.func` (one per function and global), and
    the globals are erased. Example:

    ```mlir
    memref.global "private" @partials : memref<256xf32, #gpu.address_space<workgroup>>
    %p = memref.get_global @partials : memref<256xf32, #gpu.address_space<workgroup>>
    // becomes
    %p = memref.alloc() : memref<256xf32, 3>
    ```

    Fails on a workgroup global with a dynamic shape or an initial value.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def SwzDynamicSharedMemory : Pass<"swz-dynamic-smem", "mlir::ModuleOp"> {
  let summary = "place the shared tiles of kernels that declare swz.dynamic_smem in dynamic shared memory";
  let description = [{
    Runs on the PTX path, after swz-check-bank-conflicts and
    swz-materialize-swizzle (which read the tiles as `memref.global`s) and
    before the NVVM lowering. A CUDA block may declare at most 48 KiB of
    static shared memory; a kernel needing more carries
    `swz.dynamic_smem = "<bytes>"` (swz-lower-tiles sets it from the
    schedule's tiles; the launch record passes the same bytes to
    cuLaunchKernel, and the runtime raises the function's
    MAX_DYNAMIC_SHARED_SIZE_BYTES). In such a kernel every
    `memref.get_global` of a workgroup global becomes a `memref.view` of
    `gpu.dynamic_shared_memory`: globals in order of first use, each at the
    next multiple of its alignment (default 16) from a base the kernel rounds
    up at run time to the largest alignment (the dynamic window itself is
    only 16-byte aligned; wgmma's swizzled tiles need 1024). Every workgroup
    global of such a kernel is placed: a static tile would precede the dynamic
    bytes, and one laid out after the window would overlap them
    (NVIDIA/numba-cuda-mlir#312 describes the same hazard). The window's symbol
    is declared here, `llvm.mlir.global external @swz_dynamic_smem` (a zero-sized
    array in address space 3, 16-byte aligned), which the NVVM lowering of
    `gpu.dynamic_shared_memory` then uses: its own would have internal linkage,
    which LLVM and NVPTX take for a 0-byte static variable (the PTX's
    `.shared .b8`, indexed past its end: wrong values on the H200), where
    external gives CUDA's `.extern .shared .align 16 .b8 swz_dynamic_smem[]`.
    Globals it placed that no kernel reads any more are erased. Example:

    ```mlir
    memref.global "private" @gemm_x : memref<256x64xf16, #gpu.address_space<workgroup>> {alignment = 1024}
    gpu.func @k() kernel attributes {swz.dynamic_smem = "33776"} {
      %x = memref.get_global @gemm_x : memref<256x64xf16, #gpu.address_space<workgroup>>
    // becomes
      %d = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %p = memref.extract_aligned_pointer_as_index %d
      // shift = (1024 - p % 1024) % 1024
      %x = memref.view %d[%shift][] : memref<?xi8, ...> to memref<256x64xf16, ...>
    ```

    Fails when the attribute is not a decimal byte count or the tiles and
    the alignment slack (largest alignment - 16) do not fit in it.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::memref::MemRefDialect",
                           "mlir::LLVM::LLVMDialect"];
}

#endif // SWZ_CODEGEN_PASSES_TD
