// dlopen'ed CUDA driver. See cuda_driver.h.
#include "cuda/cuda_driver.h"

#include <dlfcn.h>

#include "backend/backend.h"

namespace swz::cuda {

std::unique_ptr<Driver> Driver::load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw backend::Error("cuda: " + library +
                         " not found (no NVIDIA driver): this package needs an NVIDIA GPU and its driver; "
                         "compile it with swizzlec compile --target spirv (Vulkan) or --target cpu instead (" +
                         std::string(why ? why : "dlopen failed") + ")");
  }
  auto d = std::make_unique<Driver>();
#define SWZ_CU_LOAD(api, symbol, params)                                                                 \
  d->api = reinterpret_cast<decltype(d->api)>(dlsym(handle, symbol));                                    \
  if (!d->api)                                                                                           \
    throw backend::Error("cuda: " + library + " has no " symbol ": the NVIDIA driver is too old for " \
                         "swizzle-rt (needs the CUDA 11+ driver API)");
  SWZ_CUDA_SYMBOLS(SWZ_CU_LOAD)
#undef SWZ_CU_LOAD
#define SWZ_CU_LOAD_OPTIONAL(api, symbol, params) d->api = reinterpret_cast<decltype(d->api)>(dlsym(handle, symbol));
  SWZ_CUDA_GRAPH_SYMBOLS(SWZ_CU_LOAD_OPTIONAL)
#undef SWZ_CU_LOAD_OPTIONAL
  return d;
}

std::string Driver::describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(r);
  if (text) s += std::string(": ") + text;
  return s;
}

void Driver::fail(CUresult r, const std::string& what) const {
  throw backend::Error("cuda: " + what + ": " + describe(r));
}

std::vector<std::pair<const char*, const char*>> symbol_names() {
  return {
#define SWZ_CU_NAME(api, symbol, params) {#api, symbol},
      SWZ_CUDA_SYMBOLS(SWZ_CU_NAME) SWZ_CUDA_GRAPH_SYMBOLS(SWZ_CU_NAME)
#undef SWZ_CU_NAME
  };
}

}  // namespace swz::cuda
