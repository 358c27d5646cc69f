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

#endif // SWZ_CODEGEN_PASSES_TD
