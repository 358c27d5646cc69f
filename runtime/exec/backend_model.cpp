#include "exec/backend_model.h"

#include <stdexcept>
#include <thread>

#include "backend/backend.h"
#include "cpu/cpu_model.h"
#include "ggml/thread_pool.h"
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

std::string kv_format(const std::string& target) {
  return target == "cpu" ? "cpu f16 page64 v-transposed" : target + " f16 page64 per-layer-tiles";
}

BackendModel open_backend_model(const package::LoadedPackage& pkg, int n_ctx, kvcache::CacheOptions cache,
                                const std::string& kv_identity, int n_threads, int max_rows, int max_seqs) {
  const package::Manifest& mf = pkg.manifest;
  const kvcache::PageLayout layout = cpu::kv_layout(mf.graph);
  BackendModel r;
  if (mf.target == "cpu") {
    r.pool = std::make_unique<ggml::ThreadPool>(n_threads > 0 ? n_threads
                                                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    r.backend = "cpu (" + std::to_string(r.pool->size()) + " threads)";
    const kvcache::BlockKey key = kv_identity.empty() ? kvcache::BlockKey{} : kvcache::model_key(kv_identity);
    r.kv = std::make_unique<kvcache::BlockManager>(layout, key, std::move(cache));
    r.model = std::make_unique<cpu::CpuModel>(mf.graph, pkg.gguf, n_ctx, *r.pool, *r.kv);
    return r;
  }
  ExecutorOptions eo;
  eo.max_rows = max_rows;
  eo.max_seqs = max_seqs;
  eo.n_ctx = n_ctx;
  eo.n_pages = cache.n_pages;
  r.executor = std::make_unique<GraphExecutor>(pkg, backend::create_backend(mf.target), eo);
  const backend::DeviceInfo& d = r.executor->device();
  r.backend = d.backend + " (" + d.name + (d.arch.empty() ? "" : ", " + d.arch) + ")";
  if (r.executor->page_elems() != layout.page_elems())
    throw std::runtime_error("the executor's KV page holds " + std::to_string(r.executor->page_elems()) +
                             " values, the cache's layout " + std::to_string(layout.page_elems()));
  cache.read_page = [ex = r.executor.get()](int page, uint16_t* dst) { ex->read_page(page, dst); };
  cache.write_page = [ex = r.executor.get()](int page, const uint16_t* src) { ex->write_page(page, src); };
  const kvcache::BlockKey key =
      kv_identity.empty() ? kvcache::BlockKey{} : kvcache::model_key(kv_identity + "\nkv device: " + d.name + " " + d.arch);
  r.kv = std::make_unique<kvcache::BlockManager>(layout, key, std::move(cache));
  r.model = std::make_unique<GraphModel>(*r.executor, *r.kv);
  return r;
}

}  // namespace swz::exec
