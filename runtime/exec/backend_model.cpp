#include "exec/backend_model.h"

#include <stdexcept>
#include <thread>

#include "backend/backend.h"
#include "package/package.h"

namespace swz::exec {

BackendModel::BackendModel() = default;
BackendModel::BackendModel(BackendModel&&) noexcept = default;
BackendModel& BackendModel::operator=(BackendModel&&) noexcept = default;
BackendModel::~BackendModel() {
  model.reset();  // pages back to the cache before the cache goes
  kv.reset();     // its disk thread may still read pages through the executor
  executor.reset();
}

kvcache::PageLayout kv_layout(const nlohmann::json& graph) {
  try {
    const nlohmann::json& hp = graph.at("hparams");
    return kvcache::PageLayout{hp.at("n_layer").get<int>(), hp.at("n_head_kv").get<int>() * hp.at("head_dim").get<int>()};
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("graph: malformed hparams: ") + e.what());
  }
}

BackendModel open_backend_model(const package::LoadedPackage& pkg, int n_ctx, kvcache::CacheOptions cache,
                                const std::string& kv_identity, int n_threads, int max_rows, int max_seqs) {
  const package::Manifest& mf = pkg.manifest;
  const kvcache::PageLayout layout = kv_layout(mf.graph);
  BackendModel r;
  ExecutorOptions eo;
  eo.max_rows = max_rows;
  eo.max_seqs = max_seqs;
  eo.n_ctx = n_ctx;
  eo.n_pages = cache.n_pages;
  r.executor = std::make_unique<GraphExecutor>(pkg, backend::create_backend(mf.target, "", n_threads), eo);
  const backend::DeviceInfo& d = r.executor->device();
  // cpu: "cpu (2 threads)"; GPUs: "cuda (NVIDIA H200, sm_90)".
  r.backend = d.backend + " (" + d.name + (d.arch.empty() || d.backend == "cpu" ? "" : ", " + d.arch) + ")";
  if (r.executor->page_elems() != layout.page_elems())
    throw std::runtime_error("the executor's KV page holds " + std::to_string(r.executor->page_elems()) +
                             " values, the cache's layout " + std::to_string(layout.page_elems()));
  cache.read_page = [ex = r.executor.get()](int page, uint16_t* dst) { ex->read_page(page, dst); };
  cache.write_page = [ex = r.executor.get()](int page, const uint16_t* src) { ex->write_page(page, src); };
  // K/V computed by another device's kernels never share the disk tier; every cpu computes
  // the same bits (the cpu kernels do not depend on the thread count).
  // Nor does K/V of prompt rows whose attention split its keys at other offsets (prefill's
  // split length follows the context size: package::prefill_split_len).
  const std::string device =
      d.backend == "cpu" ? ""
                         : "\nkv device: " + d.name + " " + d.arch + "\nprefill split: " +
                               std::to_string(package::prefill_split_len(pkg.manifest, n_ctx));
  const kvcache::BlockKey key = kv_identity.empty() ? kvcache::BlockKey{} : kvcache::model_key(kv_identity + device);
  r.kv = std::make_unique<kvcache::BlockManager>(layout, key, std::move(cache));
  r.model = std::make_unique<GraphModel>(*r.executor, *r.kv);
  return r;
}

}  // namespace swz::exec
