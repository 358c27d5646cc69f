// Vulkan compute on one device through a dlopen'ed loader. See vulkan_device.h.
#define VK_NO_PROTOTYPES
#include "vulkan/vulkan_device.h"

#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace swz::vulkan {
namespace {

// Entry points, fetched at run time. Global: before an instance exists.
#define SWZ_VK_GLOBAL(X) \
  X(vkCreateInstance)    \
  X(vkEnumerateInstanceVersion)
#define SWZ_VK_INSTANCE(X)                   \
  X(vkDestroyInstance)                       \
  X(vkEnumeratePhysicalDevices)              \
  X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceProperties2)          \
  X(vkGetPhysicalDeviceFeatures2)            \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)     \
  X(vkCreateDevice)                          \
  X(vkGetDeviceProcAddr)
#define SWZ_VK_DEVICE(X)            \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkAllocateCommandBuffers)       \
  X(vkResetCommandBuffer)           \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCmdFillBuffer)                \
  X(vkCmdUpdateBuffer)              \
  X(vkCmdResetQueryPool)            \
  X(vkCmdWriteTimestamp)            \
  X(vkCreateQueryPool)              \
  X(vkDestroyQueryPool)             \
  X(vkGetQueryPoolResults)          \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)                \
  X(vkQueueSubmit)

#define SWZ_VK_MEMBER(name) PFN_##name name = nullptr;

struct Functions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  SWZ_VK_GLOBAL(SWZ_VK_MEMBER)
  SWZ_VK_INSTANCE(SWZ_VK_MEMBER)
  SWZ_VK_DEVICE(SWZ_VK_MEMBER)
};

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS)
    throw Error(std::string(what) + ": " + result_name(r));
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

}  // namespace

std::string result_name(int32_t result) {
  switch (VkResult(result)) {
#define SWZ_VK_CASE(r) \
  case r: return #r;
    SWZ_VK_CASE(VK_SUCCESS)
    SWZ_VK_CASE(VK_NOT_READY)
    SWZ_VK_CASE(VK_TIMEOUT)
    SWZ_VK_CASE(VK_INCOMPLETE)
    SWZ_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    SWZ_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    SWZ_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    SWZ_VK_CASE(VK_ERROR_DEVICE_LOST)
    SWZ_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    SWZ_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    SWZ_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    SWZ_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    SWZ_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    SWZ_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    SWZ_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    SWZ_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    SWZ_VK_CASE(VK_ERROR_UNKNOWN)
    SWZ_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    SWZ_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    SWZ_VK_CASE(VK_ERROR_FRAGMENTATION)
    SWZ_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    SWZ_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef SWZ_VK_CASE
    default: return "VkResult " + std::to_string(result);
  }
}

struct Device::Impl {
  void* library = nullptr;
  Functions vk;
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool query_pool = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory{};
  DeviceInfo info;

  // The command stream: two batches recorded and submitted in turn (vulkan_device.h).
  static constexpr uint32_t kSets = Device::kBatchCommands;  // one descriptor set per dispatch
  static constexpr uint32_t kDescriptors = kSets * 32;
  static constexpr uint32_t kScalarSlots = kSets * 16;
  struct Batch {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    Buffer scalars;  ///< kScalarSlots slots of scalar_stride bytes
    uint32_t commands = 0, sets = 0, descriptors = 0, scalar_slots = 0;
    bool recording = false, in_flight = false;
  };
  std::array<Batch, 2> batches;
  int current = 0;
  size_t scalar_stride = 4;
  bool stream_ready = false;
  std::vector<VkDescriptorBufferInfo> infos;  // enqueue_dispatch scratch
  std::vector<VkWriteDescriptorSet> writes;

  ~Impl() {
    if (device) {
      for (Batch& b : batches) {
        if (b.in_flight) vk.vkWaitForFences(device, 1, &b.fence, VK_TRUE, UINT64_MAX);
        b.scalars = Buffer();
        if (b.pool) vk.vkDestroyDescriptorPool(device, b.pool, nullptr);
        if (b.fence) vk.vkDestroyFence(device, b.fence, nullptr);
      }
      if (query_pool) vk.vkDestroyQueryPool(device, query_pool, nullptr);
      if (fence) vk.vkDestroyFence(device, fence, nullptr);
      if (command_pool) vk.vkDestroyCommandPool(device, command_pool, nullptr);
      vk.vkDestroyDevice(device, nullptr);
    }
    if (instance) vk.vkDestroyInstance(instance, nullptr);
    if (library) dlclose(library);
  }
};

struct Buffer::Impl {
  Device::Impl* dev = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  size_t size = 0;
  size_t alloc_size = 0;  ///< the VkBuffer's size (size rounded up to 16)
  ~Impl() {
    if (!dev) return;
    if (mapped) dev->vk.vkUnmapMemory(dev->device, memory);
    if (buffer) dev->vk.vkDestroyBuffer(dev->device, buffer, nullptr);
    if (memory) dev->vk.vkFreeMemory(dev->device, memory, nullptr);
  }
};

struct Pipeline::Impl {
  Device::Impl* dev = nullptr;
  VkShaderModule shader = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  ~Impl() {
    if (!dev) return;
    if (pipeline) dev->vk.vkDestroyPipeline(dev->device, pipeline, nullptr);
    if (layout) dev->vk.vkDestroyPipelineLayout(dev->device, layout, nullptr);
    if (set_layout) dev->vk.vkDestroyDescriptorSetLayout(dev->device, set_layout, nullptr);
    if (shader) dev->vk.vkDestroyShaderModule(dev->device, shader, nullptr);
  }
};

Buffer::Buffer() = default;
Buffer::Buffer(Buffer&&) noexcept = default;
Buffer& Buffer::operator=(Buffer&&) noexcept = default;
Buffer::~Buffer() = default;
size_t Buffer::size() const { return impl_ ? impl_->size : 0; }

void Buffer::write(const void* src, size_t bytes, size_t offset) {
  if (!impl_ || offset > impl_->size || bytes > impl_->size - offset)
    throw Error("Buffer::write: " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " exceed the buffer's " + std::to_string(size()));
  if (bytes) std::memcpy(static_cast<char*>(impl_->mapped) + offset, src, bytes);
}

void Buffer::read(void* dst, size_t bytes, size_t offset) const {
  if (!impl_ || offset > impl_->size || bytes > impl_->size - offset)
    throw Error("Buffer::read: " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " exceed the buffer's " + std::to_string(size()));
  if (bytes) std::memcpy(dst, static_cast<const char*>(impl_->mapped) + offset, bytes);
}

Pipeline::Pipeline() = default;
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;
Pipeline::~Pipeline() = default;
uint32_t Pipeline::bindings() const { return impl_ ? impl_->bindings : 0; }

Device::Device(const std::string& select) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  Functions& vk = d.vk;
  d.library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!d.library)
    throw Error(std::string("cannot load the Vulkan loader libvulkan.so.1 (Debian: "
                            "libvulkan1, plus a driver such as mesa-vulkan-drivers): ") +
                dlerror());
  vk.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(d.library, "vkGetInstanceProcAddr"));
  if (!vk.vkGetInstanceProcAddr) throw Error("libvulkan.so.1 has no vkGetInstanceProcAddr");
#define SWZ_VK_LOAD_GLOBAL(name) \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(nullptr, #name));
  SWZ_VK_GLOBAL(SWZ_VK_LOAD_GLOBAL)
  if (!vk.vkCreateInstance) throw Error("the Vulkan loader has no vkCreateInstance");

  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vk.vkEnumerateInstanceVersion) vk.vkEnumerateInstanceVersion(&loader_version);
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "swizzle";
  app.apiVersion = std::min<uint32_t>(loader_version, VK_API_VERSION_1_3);
  VkInstanceCreateInfo ici{};
  ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ici.pApplicationInfo = &app;
  check(vk.vkCreateInstance(&ici, nullptr, &d.instance), "vkCreateInstance");
#define SWZ_VK_LOAD_INSTANCE(name)                                                    \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(d.instance, #name)); \
  if (!vk.name) throw Error("the Vulkan loader has no " #name);
  SWZ_VK_INSTANCE(SWZ_VK_LOAD_INSTANCE)

  // Choose the device.
  uint32_t count = 0;
  check(vk.vkEnumeratePhysicalDevices(d.instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  check(vk.vkEnumeratePhysicalDevices(d.instance, &count, devices.data()),
        "vkEnumeratePhysicalDevices");
  devices.resize(count);
  std::string want = select;
  if (want.empty())
    if (const char* env = std::getenv("SWZ_VK_DEVICE")) want = env;
  std::string seen;
  int best_rank = 1 << 30;
  for (VkPhysicalDevice p : devices) {
    VkPhysicalDeviceProperties props;
    vk.vkGetPhysicalDeviceProperties(p, &props);
    seen += std::string(seen.empty() ? "" : ", ") + props.deviceName + " (" +
            type_name(props.deviceType) + ")";
    if (props.apiVersion < VK_API_VERSION_1_1) continue;  // subgroup properties, 16-bit storage
    if (!want.empty()) {
      if (d.physical == VK_NULL_HANDLE &&
          lower(props.deviceName).find(lower(want)) != std::string::npos)
        d.physical = p;
      continue;
    }
    if (type_rank(props.deviceType) < best_rank) {
      best_rank = type_rank(props.deviceType);
      d.physical = p;
    }
  }
  if (d.physical == VK_NULL_HANDLE)
    throw Error(want.empty() ? "no Vulkan 1.1 device found (devices: " +
                                   (seen.empty() ? std::string("none") : seen) + ")"
                             : "no Vulkan 1.1 device whose name contains '" + want +
                                   "' (SWZ_VK_DEVICE; devices: " +
                                   (seen.empty() ? std::string("none") : seen) + ")");

  // Properties.
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &subgroup;
  vk.vkGetPhysicalDeviceProperties2(d.physical, &props2);
  const VkPhysicalDeviceProperties& props = props2.properties;
  d.info.name = props.deviceName;
  d.info.type = type_name(props.deviceType);
  d.info.api_version = props.apiVersion;
  d.info.subgroup_size = subgroup.subgroupSize;
  for (int i = 0; i < 3; ++i) d.info.max_workgroup_count[i] = props.limits.maxComputeWorkGroupCount[i];
  d.info.max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
  d.info.timestamp_period_ns = props.limits.timestampPeriod;
  d.info.min_storage_offset_alignment = std::max<uint64_t>(props.limits.minStorageBufferOffsetAlignment, 1);
  d.info.max_storage_range = props.limits.maxStorageBufferRange;
  vk.vkGetPhysicalDeviceMemoryProperties(d.physical, &d.memory);
  for (uint32_t i = 0; i < d.memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((d.memory.memoryTypes[i].propertyFlags & want) == want) {
      d.info.memory_bytes = d.memory.memoryHeaps[d.memory.memoryTypes[i].heapIndex].size;
      break;
    }
  }

  // Queue family with compute.
  uint32_t nfam = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d.physical, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> families(nfam);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d.physical, &nfam, families.data());
  bool found = false;
  for (uint32_t i = 0; i < nfam && !found; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      d.queue_family = i;
      d.info.timestamps = families[i].timestampValidBits > 0 && props.limits.timestampPeriod > 0;
      found = true;
    }
  if (!found) throw Error("Vulkan device " + d.info.name + " has no compute queue");

  // Features: enable the supported subset of what kernels use. The Vulkan11/12 feature
  // structs exist from 1.2; a 1.1 device reports 16-bit storage through its own struct.
  const bool has12 = props.apiVersion >= VK_API_VERSION_1_2 && app.apiVersion >= VK_API_VERSION_1_2;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDevice16BitStorageFeatures f16s{};
  f16s.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  if (has12) {
    f2.pNext = &f11;
    f11.pNext = &f12;
  } else {
    f2.pNext = &f16s;
  }
  vk.vkGetPhysicalDeviceFeatures2(d.physical, &f2);
  VkPhysicalDeviceVulkan12Features e12{};
  e12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features e11{};
  e11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDevice16BitStorageFeatures e16s{};
  e16s.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceFeatures2 e2{};
  e2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  e2.features.shaderInt16 = f2.features.shaderInt16;
  e2.features.shaderInt64 = f2.features.shaderInt64;
  e2.features.shaderFloat64 = f2.features.shaderFloat64;
  if (has12) {
    e2.pNext = &e11;
    e11.pNext = &e12;
    e11.storageBuffer16BitAccess = f11.storageBuffer16BitAccess;
    e12.storageBuffer8BitAccess = f12.storageBuffer8BitAccess;
    e12.shaderFloat16 = f12.shaderFloat16;
    e12.shaderInt8 = f12.shaderInt8;
    d.info.storage_16bit = e11.storageBuffer16BitAccess;
  } else {
    e2.pNext = &e16s;
    e16s.storageBuffer16BitAccess = f16s.storageBuffer16BitAccess;
    d.info.storage_16bit = e16s.storageBuffer16BitAccess;
  }
  d.info.storage_8bit = e12.storageBuffer8BitAccess;
  d.info.float16 = e12.shaderFloat16;
  d.info.int8 = e12.shaderInt8;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = d.queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.pNext = &e2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  check(vk.vkCreateDevice(d.physical, &dci, nullptr, &d.device), "vkCreateDevice");
  auto gdpa = vk.vkGetDeviceProcAddr;
#define SWZ_VK_LOAD_DEVICE(name)                                         \
  vk.name = reinterpret_cast<PFN_##name>(gdpa(d.device, #name));         \
  if (!vk.name) throw Error("the Vulkan device has no " #name);
  SWZ_VK_DEVICE(SWZ_VK_LOAD_DEVICE)
  vk.vkGetDeviceQueue(d.device, d.queue_family, 0, &d.queue);

  VkCommandPoolCreateInfo cpci{};

  cpci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cpci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpci.queueFamilyIndex = d.queue_family;
  check(vk.vkCreateCommandPool(d.device, &cpci, nullptr, &d.command_pool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cbai{};
  cbai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cbai.commandPool = d.command_pool;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  check(vk.vkAllocateCommandBuffers(d.device, &cbai, &d.command_buffer),
        "vkAllocateCommandBuffers");
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vk.vkCreateFence(d.device, &fci, nullptr, &d.fence), "vkCreateFence");
  if (d.info.timestamps) {
    VkQueryPoolCreateInfo qpci{};
    qpci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpci.queryCount = 2;
    check(vk.vkCreateQueryPool(d.device, &qpci, nullptr, &d.query_pool), "vkCreateQueryPool");
  }
}

namespace {

using Batch = Device::Impl::Batch;

/// Creates the command stream's batches on first use (a Device used only through
/// dispatch() never allocates them).
void init_stream(Device& dev, Device::Impl& d) {
  if (d.stream_ready) return;
  d.scalar_stride = std::max<size_t>(4, size_t(d.info.min_storage_offset_alignment));
  std::array<VkCommandBuffer, 2> cbs{};
  VkCommandBufferAllocateInfo cbai{};
  cbai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cbai.commandPool = d.command_pool;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 2;
  check(d.vk.vkAllocateCommandBuffers(d.device, &cbai, cbs.data()), "vkAllocateCommandBuffers");
  for (int i = 0; i < 2; ++i) {
    Batch& b = d.batches[i];
    b.cb = cbs[i];
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(d.vk.vkCreateFence(d.device, &fci, nullptr, &b.fence), "vkCreateFence");
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, Device::Impl::kDescriptors};
    VkDescriptorPoolCreateInfo dpci{};
    dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpci.maxSets = Device::Impl::kSets;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &size;
    check(d.vk.vkCreateDescriptorPool(d.device, &dpci, nullptr, &b.pool), "vkCreateDescriptorPool");
    b.scalars = dev.create_buffer(Device::Impl::kScalarSlots * d.scalar_stride);
  }
  d.stream_ready = true;
}

/// Waits for a submitted batch and recycles its descriptor sets and scalar slots.
void retire(Device::Impl& d, Batch& b) {
  if (!b.in_flight) return;
  VkResult r = d.vk.vkWaitForFences(d.device, 1, &b.fence, VK_TRUE, UINT64_MAX);
  b.in_flight = false;
  check(r, "vkWaitForFences (command stream)");
  check(d.vk.vkResetDescriptorPool(d.device, b.pool, 0), "vkResetDescriptorPool");
  b.commands = b.sets = b.descriptors = b.scalar_slots = 0;
}

/// Submits the current batch (if it holds commands) and moves to the other one.
void submit(Device::Impl& d) {
  Batch& b = d.batches[d.current];
  if (!b.recording) return;
  if (b.commands > 0) {
    // Shader and transfer writes -> host reads of the mapped memory (after the fence).
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT;
    d.vk.vkCmdPipelineBarrier(b.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  b.recording = false;
  check(d.vk.vkEndCommandBuffer(b.cb), "vkEndCommandBuffer (command stream)");
  if (b.commands == 0) return;  // nothing to run; the buffer is re-begun (reset) next time
  check(d.vk.vkResetFences(d.device, 1, &b.fence), "vkResetFences");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cb;
  check(d.vk.vkQueueSubmit(d.queue, 1, &si, b.fence), "vkQueueSubmit (command stream)");
  b.in_flight = true;
  d.current ^= 1;
}

/// The batch to record `descriptors` descriptors and `scalars` scalar slots into, begun
/// and preceded by a memory barrier: the current one, or the next when it is full.
Batch& record(Device& dev, Device::Impl& d, uint32_t descriptors, uint32_t scalars) {
  init_stream(dev, d);
  if (descriptors > Device::Impl::kDescriptors || scalars > Device::Impl::kScalarSlots)
    throw Error("enqueue_dispatch: " + std::to_string(descriptors) + " bindings exceed a batch's " +
                std::to_string(Device::Impl::kDescriptors));
  Batch* b = &d.batches[d.current];
  if (b->recording && (b->commands >= Device::kBatchCommands || b->sets >= Device::Impl::kSets ||
                       b->descriptors + descriptors > Device::Impl::kDescriptors ||
                       b->scalar_slots + scalars > Device::Impl::kScalarSlots)) {
    submit(d);
    b = &d.batches[d.current];
  }
  if (!b->recording) {
    retire(d, *b);
    VkCommandBufferBeginInfo cbbi{};
    cbbi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    cbbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(d.vk.vkBeginCommandBuffer(b->cb, &cbbi), "vkBeginCommandBuffer (command stream)");
    b->recording = true;
  }
  // Everything before (this batch's commands, and earlier submissions on the queue) ->
  // this command.
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  d.vk.vkCmdPipelineBarrier(b->cb, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  ++b->commands;
  return *b;
}

/// Throws unless [offset, offset + bytes) lies in `b`'s allocation.
void check_range(const Buffer::Impl* b, size_t offset, size_t bytes, const char* what) {
  if (!b) throw Error(std::string(what) + ": empty buffer");
  if (offset > b->alloc_size || bytes > b->alloc_size - offset)
    throw Error(std::string(what) + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                ") exceed the buffer's " + std::to_string(b->alloc_size));
}

}  // namespace

void Device::enqueue_dispatch(const Pipeline& pipeline, std::span<const Binding> bindings, std::array<uint32_t, 3> grid) {
  Impl& d = *impl_;
  const Pipeline::Impl* pi = pipeline.impl_.get();
  if (!pi) throw Error("enqueue_dispatch: empty pipeline");
  if (bindings.size() != pi->bindings)
    throw Error("enqueue_dispatch: " + std::to_string(bindings.size()) + " bindings for a pipeline with " +
                std::to_string(pi->bindings));
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || grid[i] > d.info.max_workgroup_count[i])
      throw Error("enqueue_dispatch: grid[" + std::to_string(i) + "] = " + std::to_string(grid[i]) + " outside 1.." +
                  std::to_string(d.info.max_workgroup_count[i]) + " (maxComputeWorkGroupCount)");
  uint32_t scalars = 0;
  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (!b.buffer) {
      ++scalars;
      continue;
    }
    const Buffer::Impl* bi = b.buffer->impl_.get();
    if (bi && b.offset <= bi->alloc_size && b.range <= bi->alloc_size - b.offset &&
        b.offset % d.info.min_storage_offset_alignment == 0 && b.range != 0 && b.range <= d.info.max_storage_range)
      continue;
    // The cold path: say what is wrong.
    const std::string what = "enqueue_dispatch: binding " + std::to_string(i);
    if (!bi) throw Error(what + ": empty buffer");
    check_range(bi, b.offset, b.range, what.c_str());
    if (b.offset % d.info.min_storage_offset_alignment != 0)
      throw Error(what + ": byte offset " + std::to_string(b.offset) + " is not a multiple of the device's " +
                  "minStorageBufferOffsetAlignment " + std::to_string(d.info.min_storage_offset_alignment));
    throw Error(what + ": range of " + std::to_string(b.range) + " bytes outside 1.." +
                std::to_string(d.info.max_storage_range) + " (maxStorageBufferRange)");
  }
  Batch& batch = record(*this, d, uint32_t(bindings.size()), scalars);
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = batch.pool;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &pi->set_layout;
  VkDescriptorSet set;
  check(d.vk.vkAllocateDescriptorSets(d.device, &dsai, &set), "vkAllocateDescriptorSets (command stream)");
  ++batch.sets;
  batch.descriptors += uint32_t(bindings.size());
  d.infos.resize(bindings.size());
  d.writes.resize(bindings.size());
  auto* arena = static_cast<char*>(batch.scalars.impl_->mapped);
  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    if (b.buffer) {
      d.infos[i] = {b.buffer->impl_->buffer, b.offset, b.range};
    } else {
      const size_t at = size_t(batch.scalar_slots++) * d.scalar_stride;
      std::memcpy(arena + at, &b.scalar, 4);  // the batch is not in flight: safe to write
      d.infos[i] = {batch.scalars.impl_->buffer, at, 4};
    }
    VkWriteDescriptorSet& w = d.writes[i];
    w = {};
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstSet = set;
    w.dstBinding = uint32_t(i);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &d.infos[i];
  }
  d.vk.vkUpdateDescriptorSets(d.device, uint32_t(d.writes.size()), d.writes.data(), 0, nullptr);
  d.vk.vkCmdBindPipeline(batch.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pi->pipeline);
  d.vk.vkCmdBindDescriptorSets(batch.cb, VK_PIPELINE_BIND_POINT_COMPUTE, pi->layout, 0, 1, &set, 0, nullptr);
  d.vk.vkCmdDispatch(batch.cb, grid[0], grid[1], grid[2]);
}

void Device::enqueue_copy(const Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset, size_t bytes) {
  Impl& d = *impl_;
  check_range(dst.impl_.get(), dst_offset, bytes, "enqueue_copy (destination)");
  check_range(src.impl_.get(), src_offset, bytes, "enqueue_copy (source)");
  if (bytes == 0) return;
  Batch& batch = record(*this, d, 0, 0);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  d.vk.vkCmdCopyBuffer(batch.cb, src.impl_->buffer, dst.impl_->buffer, 1, &region);
}

void Device::enqueue_fill(const Buffer& dst, size_t offset, size_t bytes, uint32_t pattern) {
  Impl& d = *impl_;
  check_range(dst.impl_.get(), offset, bytes, "enqueue_fill");
  if (offset % 4 || bytes % 4) throw Error("enqueue_fill: offset and size must be multiples of 4");
  if (bytes == 0) return;
  Batch& batch = record(*this, d, 0, 0);
  d.vk.vkCmdFillBuffer(batch.cb, dst.impl_->buffer, offset, bytes, pattern);
}

void Device::enqueue_update(const Buffer& dst, size_t offset, const void* src, size_t bytes) {
  Impl& d = *impl_;
  check_range(dst.impl_.get(), offset, bytes, "enqueue_update");
  if (offset % 4 || bytes % 4 || bytes > 65536)
    throw Error("enqueue_update: offset and size must be multiples of 4 and size at most 65536");
  if (bytes == 0) return;
  Batch& batch = record(*this, d, 0, 0);
  d.vk.vkCmdUpdateBuffer(batch.cb, dst.impl_->buffer, offset, bytes, src);
}

void Device::flush() {
  if (impl_->stream_ready) submit(*impl_);
}

void Device::finish() {
  Impl& d = *impl_;
  if (!d.stream_ready) return;
  submit(d);
  for (Batch& b : d.batches) retire(d, b);
}

bool Device::busy() const {
  const Impl& d = *impl_;
  if (!d.stream_ready) return false;
  for (const Batch& b : d.batches)
    if (b.in_flight || (b.recording && b.commands > 0)) return true;
  return false;
}

Device::~Device() = default;

const DeviceInfo& Device::info() const { return impl_->info; }

Buffer Device::create_buffer(size_t bytes) {
  Impl& d = *impl_;
  Buffer b;
  b.impl_ = std::make_unique<Buffer::Impl>();
  Buffer::Impl& bi = *b.impl_;
  bi.dev = &d;
  bi.size = bytes;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  // Rounded up to 16 bytes: kernels that emulate i8 / i16 arrays with 32-bit words (MLIR's
  // SPIR-V lowering without Int8 / Int16 storage) read whole words at the end.
  bci.size = (std::max<size_t>(bytes, 4) + 15) & ~size_t(15);
  bi.alloc_size = bci.size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult cr = d.vk.vkCreateBuffer(d.device, &bci, nullptr, &bi.buffer);
  if (cr == VK_ERROR_OUT_OF_DEVICE_MEMORY || cr == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemory("vkCreateBuffer(" + std::to_string(bci.size) + " bytes): " + result_name(cr));
  check(cr, "vkCreateBuffer");
  VkMemoryRequirements req;
  d.vk.vkGetBufferMemoryRequirements(d.device, bi.buffer, &req);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < d.memory.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((req.memoryTypeBits & (1u << i)) &&
        (d.memory.memoryTypes[i].propertyFlags & want) == want)
      type = i;
  if (type == UINT32_MAX)
    throw Error("Vulkan device " + d.info.name +
                " has no host-visible, host-coherent memory type for storage buffers");
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  VkResult ar = d.vk.vkAllocateMemory(d.device, &mai, nullptr, &bi.memory);
  if (ar == VK_ERROR_OUT_OF_DEVICE_MEMORY || ar == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemory("vkAllocateMemory(" + std::to_string(req.size) + " bytes): " + result_name(ar));
  check(ar, ("vkAllocateMemory(" + std::to_string(req.size) + " bytes)").c_str());
  check(d.vk.vkBindBufferMemory(d.device, bi.buffer, bi.memory, 0), "vkBindBufferMemory");
  check(d.vk.vkMapMemory(d.device, bi.memory, 0, VK_WHOLE_SIZE, 0, &bi.mapped), "vkMapMemory");
  std::memset(bi.mapped, 0, bci.size);
  return b;
}

Pipeline Device::create_pipeline(std::span<const uint32_t> spirv, const std::string& entry,
                                 uint32_t bindings) {
  Impl& d = *impl_;
  if (spirv.empty() || spirv[0] != 0x07230203u)
    throw Error("create_pipeline(" + entry + "): not a SPIR-V module (magic number missing)");
  Pipeline p;
  p.impl_ = std::make_unique<Pipeline::Impl>();
  Pipeline::Impl& pi = *p.impl_;
  pi.dev = &d;
  pi.bindings = bindings;
  VkShaderModuleCreateInfo smci{};
  smci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  smci.codeSize = spirv.size() * sizeof(uint32_t);
  smci.pCode = spirv.data();
  check(d.vk.vkCreateShaderModule(d.device, &smci, nullptr, &pi.shader),
        ("vkCreateShaderModule(" + entry + ")").c_str());
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dslci{};
  dslci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dslci.bindingCount = bindings;
  dslci.pBindings = b.data();
  check(d.vk.vkCreateDescriptorSetLayout(d.device, &dslci, nullptr, &pi.set_layout),
        "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo plci{};
  plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &pi.set_layout;
  check(d.vk.vkCreatePipelineLayout(d.device, &plci, nullptr, &pi.layout),
        "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo cpci{};
  cpci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = pi.shader;
  cpci.stage.pName = entry.c_str();
  cpci.layout = pi.layout;
  check(d.vk.vkCreateComputePipelines(d.device, VK_NULL_HANDLE, 1, &cpci, nullptr, &pi.pipeline),
        ("vkCreateComputePipelines(" + entry + ")").c_str());
  return p;
}

double Device::dispatch(const Pipeline& pipeline, std::span<Buffer* const> bindings,
                        std::array<uint32_t, 3> grid, bool timed) {
  Impl& d = *impl_;
  finish();  // ordered after the command stream
  const Pipeline::Impl* pi = pipeline.impl_.get();
  if (!pi) throw Error("dispatch: empty pipeline");
  if (bindings.size() != pi->bindings)
    throw Error("dispatch: " + std::to_string(bindings.size()) + " buffers for a pipeline with " +
                std::to_string(pi->bindings) + " bindings");
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || grid[i] > d.info.max_workgroup_count[i])
      throw Error("dispatch: grid[" + std::to_string(i) + "] = " + std::to_string(grid[i]) +
                  " outside 1.." + std::to_string(d.info.max_workgroup_count[i]) +
                  " (maxComputeWorkGroupCount)");
  if (timed && !d.query_pool)
    throw Error("dispatch: device " + d.info.name + " has no timestamp queries");
  for (size_t i = 0; i < bindings.size(); ++i)
    if (!bindings[i] || !bindings[i]->impl_)
      throw Error("dispatch: binding " + std::to_string(i) + " has no buffer");

  // One descriptor pool per dispatch: simple, and dispatches here are not hot.
  struct Pool {
    Impl& d;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    ~Pool() {
      if (pool) d.vk.vkDestroyDescriptorPool(d.device, pool, nullptr);
    }
  } pool{d};
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(pi->bindings, 1)};
  VkDescriptorPoolCreateInfo dpci{};
  dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpci.maxSets = 1;
  dpci.poolSizeCount = 1;
  dpci.pPoolSizes = &size;
  check(d.vk.vkCreateDescriptorPool(d.device, &dpci, nullptr, &pool.pool), "vkCreateDescriptorPool");
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = pool.pool;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &pi->set_layout;
  VkDescriptorSet set;
  check(d.vk.vkAllocateDescriptorSets(d.device, &dsai, &set), "vkAllocateDescriptorSets");
  std::vector<VkDescriptorBufferInfo> infos(bindings.size());
  std::vector<VkWriteDescriptorSet> writes(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    infos[i] = {bindings[i]->impl_->buffer, 0, VK_WHOLE_SIZE};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  d.vk.vkUpdateDescriptorSets(d.device, uint32_t(writes.size()), writes.data(), 0, nullptr);

  VkCommandBuffer cb = d.command_buffer;
  check(d.vk.vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo cbbi{};
  cbbi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  cbbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(d.vk.vkBeginCommandBuffer(cb, &cbbi), "vkBeginCommandBuffer");
  if (timed) {
    d.vk.vkCmdResetQueryPool(cb, d.query_pool, 0, 2);
    d.vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, d.query_pool, 0);
  }
  d.vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pi->pipeline);
  d.vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pi->layout, 0, 1, &set, 0,
                               nullptr);
  d.vk.vkCmdDispatch(cb, grid[0], grid[1], grid[2]);
  if (timed)
    d.vk.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d.query_pool, 1);
  // Shader writes -> host reads of the mapped memory.
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  d.vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                            0, 1, &barrier, 0, nullptr, 0, nullptr);
  check(d.vk.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  check(d.vk.vkResetFences(d.device, 1, &d.fence), "vkResetFences");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  check(d.vk.vkQueueSubmit(d.queue, 1, &si, d.fence), "vkQueueSubmit");
  check(d.vk.vkWaitForFences(d.device, 1, &d.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  if (!timed) return 0;
  uint64_t ticks[2] = {0, 0};
  check(d.vk.vkGetQueryPoolResults(d.device, d.query_pool, 0, 2, sizeof(ticks), ticks,
                                   sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  return double(ticks[1] - ticks[0]) * d.info.timestamp_period_ns;
}

}  // namespace swz::vulkan
