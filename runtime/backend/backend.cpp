// create_backend() and kv_format() over the registered backends. See backend.h.
#include "backend/backend.h"

namespace swz::backend {
namespace {

const BackendEntry& entry_for(const std::string& target) {
  std::string known;
  for (const BackendEntry* e : registered_backends()) {
    if (e->runs(target)) return *e;
    known += std::string(known.empty() ? "" : "; ") + e->targets + " -> " + e->name;
  }
  throw Error("no backend for package target '" + target + "' (known: " + known + ")");
}

}  // namespace

std::unique_ptr<Backend> create_backend(const std::string& target, const std::string& select, int n_threads) {
  return entry_for(target).create(select, n_threads);
}

std::string kv_format(const std::string& target) { return entry_for(target).kv_format(target); }

}  // namespace swz::backend
