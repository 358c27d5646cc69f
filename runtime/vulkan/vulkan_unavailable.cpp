// The Vulkan backend's registration when this build had no Vulkan headers (Debian
// libvulkan-dev): spirv packages are refused with the reason instead of "no backend".
#include "backend/backend.h"

namespace swz::vulkan {

extern const backend::BackendEntry kBackendEntry;
const backend::BackendEntry kBackendEntry = {
    "vulkan",
    [](const std::string& target) { return target == "spirv"; },
    [](const std::string&, int) -> std::unique_ptr<backend::Backend> {
      throw backend::Error("vulkan: this swizzle-rt was built without the Vulkan headers (Debian libvulkan-dev), so it cannot "
                           "run spirv packages; rebuild with them installed");
    },
    [](const std::string& target) { return target + " f16 page64 per-layer-tiles"; },
    "spirv",
};

}  // namespace swz::vulkan
