//===- KernelTable.cpp - which built-in kernels implement a graph op ------===//
#include "codegen/KernelTable.h"

namespace swz::codegen {

const std::map<std::string, std::vector<KernelRef>> &gpuImpls() {
  static const std::map<std::string, std::vector<KernelRef>> impls = {
      {"add.f32", {{"add_f32", "add_f32", "all"}}},
      {"rms_norm.f32", {{"rms_norm_f32", "rms_norm_f32", "all", true, true}}},
      {"rope.f32", {{"rope_f32", "rope_f32", "all"}}},
      {"swiglu.f32", {{"swiglu_f32", "swiglu_f32", "all"}}},
  };
  return impls;
}

std::vector<KernelRef> kernelsFor(const std::string &key, bool ptx) {
  auto it = gpuImpls().find(key);
  if (it == gpuImpls().end())
    return {};
  std::vector<KernelRef> out;
  bool all = false, decode = false, prefill = false;
  for (const KernelRef &k : it->second) {
    if (!(ptx ? k.ptx : k.spirv))
      continue;
    out.push_back(k);
    all |= k.phase == "all";
    decode |= k.phase == "decode";
    prefill |= k.phase == "prefill";
  }
  if (!all && !(decode && prefill))
    out.clear();
  return out;
}

} // namespace swz::codegen
