# lit configuration for swizzle-opt tests. See test/lit/CMakeLists.txt.
import os
import sys
import lit.formats
import lit.util

config.name = "swizzle"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.swz_obj_root, "test", "lit")

# swizzle-opt first, then FileCheck / not from LLVM 19.
path = [config.swz_tools_dir, config.llvm_tools_dir]
config.environment["PATH"] = os.pathsep.join(path + [config.environment.get("PATH", os.environ.get("PATH", ""))])

config.substitutions.append(("%swz_src_root", config.swz_src_root))
config.substitutions.append(("%swizzlec", config.swizzlec))
config.substitutions.append(("%schedules", os.path.join(config.swz_src_root, "compiler", "schedules")))
config.substitutions.append(("%kernels", os.path.join(config.swz_src_root, "codegen", "kernels")))
# The Python running lit (the project venv).
config.substitutions.append(("%python", sys.executable))

# Optional external validators: tests needing them say `REQUIRES: ptxas` / `spirv-val`
# and are reported UNSUPPORTED (not passed) where the tool is missing.
if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))
    config.substitutions.append(("%cuda_root", os.path.dirname(os.path.dirname(os.path.realpath(config.ptxas)))))
    # The NVVM target links libdevice (math.* -> __nv_*) from $CUDA_ROOT/nvvm/libdevice.
    config.environment["CUDA_ROOT"] = os.path.dirname(os.path.dirname(os.path.realpath(config.ptxas)))
if config.spirv_val and os.path.exists(config.spirv_val):
    config.available_features.add("spirv-val")
    config.substitutions.append(("%spirv-val", config.spirv_val))
