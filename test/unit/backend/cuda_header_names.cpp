// The symbol names of runtime/cuda/cuda_symbols.h as cuda.h spells them: this file
// includes the toolkit's cuda.h, whose #defines map each documented name to the symbol
// the driver exports for it (`#define cuMemAlloc cuMemAlloc_v2`). Stringizing the
// documented name after macro expansion gives that symbol. Compiled only where cuda.h
// exists (CMake: SWZ_HAVE_CUDA_H); nothing else in swizzle includes cuda.h.
#include <cuda.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_symbols.h"

#define SWZ_STR2(x) #x
#define SWZ_STR(x) SWZ_STR2(x)

/// {documented name, the symbol cuda.h maps it to, the symbol cuda_symbols.h asks dlsym for}.
std::vector<std::vector<std::string>> swz_cuda_header_names() {
  return {
#define SWZ_ROW(api, symbol, params) {#api, SWZ_STR(api), symbol},
      SWZ_CUDA_SYMBOLS(SWZ_ROW) SWZ_CUDA_GRAPH_SYMBOLS(SWZ_ROW) SWZ_CUDA_PDL_SYMBOLS(SWZ_ROW)
#undef SWZ_ROW
  };
}

int swz_cuda_header_version() { return CUDA_VERSION; }

/// cuda.h's layouts of the structs cuda_driver.h redeclares: {name, sizeof, offset of the
/// field that matters} (cuda_test.cpp compares them with swz::cuda's).
std::vector<std::vector<size_t>> swz_cuda_header_layouts() {
  return {
      {sizeof(CUDA_KERNEL_NODE_PARAMS), offsetof(CUDA_KERNEL_NODE_PARAMS, kernelParams)},
      {sizeof(CUgraphEdgeData), offsetof(CUgraphEdgeData, type)},
      {sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value)},
      {sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, attrs)},
      {CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
       CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC},
  };
}
