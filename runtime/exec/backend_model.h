// Opens a package's exec::SequenceModel on the backend its target names, with its paged
// KV cache: the graph executor over backend::create_backend(target) (cpu, cuda, vulkan)
// and a GraphModel whose KV pages live in the executor's pools (the cache's host and disk
// tiers read and write them through the executor). The engine, swz-bench and
// swz-backend-compare all open models here.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "exec/executor.h"
#include "kvcache/block_manager.h"

namespace swz::package {
struct LoadedPackage;
}

namespace swz::exec {

/// Members in destruction order's reverse: the model returns its pages to the cache, the
/// cache (its disk thread too) reads pages through the executor.
struct BackendModel {
  std::unique_ptr<GraphExecutor> executor;
  std::unique_ptr<kvcache::BlockManager> kv;
  std::unique_ptr<SequenceModel> model;
  std::string backend;                         ///< "cpu (2 threads)", "cuda (NVIDIA H200, sm_90)", "vulkan (llvmpipe ..., cpu)"
  BackendModel();
  BackendModel(BackendModel&&) noexcept;
  BackendModel& operator=(BackendModel&&) noexcept;
  ~BackendModel();
};

/// The page shape of `graph`'s KV cache: n_layer and n_head_kv * head_dim from its
/// hparams. Throws std::runtime_error when they are missing.
kvcache::PageLayout kv_layout(const nlohmann::json& graph);

/// Opens `pkg` (which must outlive the result) for sequences of up to `n_ctx` positions.
/// `cache`: the page pool size and prefix-cache tiers (read_page / write_page are set
/// here); `kv_identity`: what the model's K/V depend on (weights, graph,
/// tokenizer, backend::kv_format(target)); the prefix cache's model key hashes it, for GPU
/// packages with the device's name and architecture appended (K/V computed by another
/// device's kernels never share the disk tier). "" = a zero key (no prefix cache). `n_threads`: cpu threads (0 = all
/// cores; cpu packages only). `max_rows`, `max_seqs`: rows and sequences per forward pass
/// of the executor (longer prompts are chunked). Throws backend::Error / backend::OutOfMemory (device), std::runtime_error (a
/// package the backend cannot run: the op and field named).
BackendModel open_backend_model(const package::LoadedPackage& pkg, int n_ctx, kvcache::CacheOptions cache,
                                const std::string& kv_identity, int n_threads = 0, int max_rows = 512,
                                int max_seqs = 1);

}  // namespace swz::exec
