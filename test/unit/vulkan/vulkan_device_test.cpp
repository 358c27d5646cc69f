// runtime/vulkan (vulkan_device.h) on Mesa lavapipe: the device CI has. Every test needs
// it; without a Vulkan loader or lavapipe the tests fail (setup.sh installs both).
#include "vulkan/vulkan_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace {

using swz::vulkan::Buffer;
using swz::vulkan::Device;
using swz::vulkan::Error;

/// The add_f32 kernel (out[i] = a[i] + b[i] for i < n; bindings a, b, out, n; LocalSize 256).
std::vector<uint32_t> addKernel() {
  std::ifstream in(SWZ_ADD_F32_SPV, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

Buffer upload(Device &dev, const std::vector<float> &v) {
  Buffer b = dev.create_buffer(v.size() * 4);
  b.write(v.data(), v.size() * 4);
  return b;
}

std::vector<float> download(const Buffer &b) {
  std::vector<float> v(b.size() / 4);
  b.read(v.data(), v.size() * 4);
  return v;
}

TEST(VulkanDevice, PicksLavapipeByName) {
  Device dev("LLVMPIPE");  // case-insensitive substring
  EXPECT_NE(dev.info().name.find("llvmpipe"), std::string::npos);
  EXPECT_EQ(dev.info().type, "cpu");
  EXPECT_GT(dev.info().subgroup_size, 0u);
  EXPECT_GE(dev.info().max_workgroup_invocations, 256u);
  // Mesa 22.3's lavapipe has all of these; kernels on f16 / i8 data need them.
  EXPECT_TRUE(dev.info().storage_16bit);
  EXPECT_TRUE(dev.info().storage_8bit);
  EXPECT_TRUE(dev.info().float16);
  EXPECT_TRUE(dev.info().int8);
}

TEST(VulkanDevice, UnknownDeviceListsTheDevicesSeen) {
  try {
    Device dev("no-such-gpu");
    FAIL() << "expected swz::vulkan::Error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'no-such-gpu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("llvmpipe"), std::string::npos) << msg;
  }
}

TEST(VulkanDevice, EnvironmentChoosesTheDevice) {
  ::setenv("SWZ_VK_DEVICE", "no-such-gpu", 1);
  EXPECT_THROW(Device(), Error);
  ::setenv("SWZ_VK_DEVICE", "llvmpipe", 1);
  EXPECT_NE(Device().info().name.find("llvmpipe"), std::string::npos);
  ::unsetenv("SWZ_VK_DEVICE");
}

TEST(VulkanDevice, BufferBoundsAreChecked) {
  Device dev("llvmpipe");
  Buffer b = dev.create_buffer(16);
  EXPECT_EQ(b.size(), 16u);
  float four[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(b.write(four, 20), Error);
  EXPECT_THROW(b.write(four, 8, 12), Error);
  b.write(four, 16);
  float back[4];
  b.read(back, 8, 8);
  EXPECT_EQ(back[0], 3.0f);
  EXPECT_EQ(back[1], 4.0f);
  EXPECT_THROW(b.read(back, 4, 16), Error);
  Buffer empty = dev.create_buffer(0);  // Vulkan forbids size 0: 4 bytes behind it
  EXPECT_EQ(empty.size(), 0u);
}

TEST(VulkanDevice, DispatchAddsAcrossWorkgroups) {
  Device dev("llvmpipe");
  auto pipeline = dev.create_pipeline(addKernel(), "add_f32", 4);
  const int n = 1000;  // 4 workgroups of 256, the last one partly masked
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = float(i) * 0.5f;
    b[i] = float(n - i) * 0.25f;
  }
  Buffer ba = upload(dev, a), bb = upload(dev, b);
  Buffer out = upload(dev, std::vector<float>(n + 8, -1.0f));  // 8 past n stay untouched
  Buffer bn = dev.create_buffer(4);
  bn.write(&n, 4);
  Buffer *bind[] = {&ba, &bb, &out, &bn};
  EXPECT_EQ(dev.dispatch(pipeline, bind, {4, 1, 1}), 0.0);
  std::vector<float> got = download(out);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], a[i] + b[i]) << i;
  for (int i = n; i < n + 8; ++i)
    EXPECT_EQ(got[i], -1.0f) << i;
  // In place (out aliases a), as the graph's residual add runs.
  Buffer *inPlace[] = {&ba, &bb, &ba, &bn};
  dev.dispatch(pipeline, inPlace, {4, 1, 1});
  got = download(ba);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(got[i], a[i] + b[i]) << i;
}

TEST(VulkanDevice, TimedDispatchReportsDeviceTime) {
  Device dev("llvmpipe");
  ASSERT_TRUE(dev.info().timestamps);
  auto pipeline = dev.create_pipeline(addKernel(), "add_f32", 4);
  const int n = 1 << 20;
  Buffer a = upload(dev, std::vector<float>(n, 1.0f)), b = upload(dev, std::vector<float>(n, 2.0f));
  Buffer out = dev.create_buffer(size_t(n) * 4), bn = dev.create_buffer(4);
  bn.write(&n, 4);
  Buffer *bind[] = {&a, &b, &out, &bn};
  double ns = dev.dispatch(pipeline, bind, {uint32_t(n / 256), 1, 1}, /*timed=*/true);
  EXPECT_GT(ns, 0.0);
  EXPECT_LT(ns, 60e9);
  EXPECT_EQ(download(out)[n - 1], 3.0f);
}

TEST(VulkanDevice, BadDispatchesAreRefusedWithTheReason) {
  Device dev("llvmpipe");
  auto pipeline = dev.create_pipeline(addKernel(), "add_f32", 4);
  Buffer a = dev.create_buffer(1024), n = dev.create_buffer(4);
  Buffer *three[] = {&a, &a, &a};
  try {
    dev.dispatch(pipeline, three, {1, 1, 1});
    FAIL() << "expected swz::vulkan::Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "dispatch: 3 buffers for a pipeline with 4 bindings");
  }
  Buffer *four[] = {&a, &a, &a, &n};
  EXPECT_THROW(dev.dispatch(pipeline, four, {0, 1, 1}), Error);
  EXPECT_THROW(dev.dispatch(pipeline, four, {dev.info().max_workgroup_count[0] + 1, 1, 1}), Error);
  Buffer *missing[] = {&a, nullptr, &a, &n};
  EXPECT_THROW(dev.dispatch(pipeline, missing, {1, 1, 1}), Error);
  std::vector<uint32_t> notSpirv = {0xdeadbeef, 0, 0, 0, 0};
  try {
    dev.create_pipeline(notSpirv, "add_f32", 4);
    FAIL() << "expected swz::vulkan::Error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("not a SPIR-V module"), std::string::npos) << e.what();
  }
}

TEST(VulkanDevice, ResultNames) {
  EXPECT_EQ(swz::vulkan::result_name(-4), "VK_ERROR_DEVICE_LOST");
  EXPECT_EQ(swz::vulkan::result_name(0), "VK_SUCCESS");
  EXPECT_EQ(swz::vulkan::result_name(-123456), "VkResult -123456");
}

} // namespace
