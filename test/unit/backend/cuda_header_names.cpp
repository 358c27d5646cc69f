// The symbol names of runtime/cuda/cuda_symbols.h as cuda.h spells them: this file
// includes the toolkit's cuda.h, whose #defines map each documented name to the symbol
// the driver exports for it (`#define cuMemAlloc cuMemAlloc_v2`). Stringizing the
// documented name after macro expansion gives that symbol. Compiled only where cuda.h
// exists (CMake: SWZ_HAVE_CUDA_H); nothing else in swizzle includes cuda.h.
#include <cuda.h>

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
      SWZ_CUDA_SYMBOLS(SWZ_ROW) SWZ_CUDA_GRAPH_SYMBOLS(SWZ_ROW)
#undef SWZ_ROW
  };
}

int swz_cuda_header_version() { return CUDA_VERSION; }
