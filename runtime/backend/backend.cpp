// create_backend(): the backend for a package target. See backend.h.
#include "backend/backend.h"

#include "cuda/cuda_backend.h"
#if SWZ_HAVE_VULKAN
#include "vulkan/vulkan_backend.h"
#endif

namespace swz::backend {

std::unique_ptr<Backend> create_backend(const std::string& target, const std::string& select) {
  if (target.rfind("sm_", 0) == 0) return std::make_unique<cuda::CudaBackend>(select);
  if (target == "spirv") {
#if SWZ_HAVE_VULKAN
    return std::make_unique<vulkan::VulkanBackend>(select);
#else
    throw Error("vulkan: this swizzle-rt was built without the Vulkan headers (Debian libvulkan-dev), so it cannot run "
                "spirv packages; rebuild with them installed");
#endif
  }
  if (target == "cpu")
    throw Error("target cpu has no device backend: its kernels are built into swizzle-rt (runtime/cpu)");
  throw Error("no backend for package target '" + target + "' (known: sm_80, sm_90 -> cuda; spirv -> vulkan)");
}

}  // namespace swz::backend
