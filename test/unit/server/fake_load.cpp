// Engine::load for swizzle_rt_fake only: the real swizzle-rt CLI (server/main.cpp) over
// the scripted FakeEngine, to test the command line without a model. Never linked into
// swizzle-rt (which gets Engine::load from swz_engine).
#include "fake_engine.h"

#include <filesystem>

namespace swz::engine {

std::unique_ptr<Engine> Engine::load(const std::string& package_path, const EngineOptions& opts) {
  if (!std::filesystem::exists(package_path)) throw LoadError(package_path + ": no such package");
  auto e = std::make_unique<swz::test::FakeEngine>();
  e->info_.n_ctx = opts.n_ctx;
  e->info_.package_path = package_path;
  e->pieces = {"Hel", "lo", " \xF0\x9F", "\x98", "\x80 \xE4", "\xB8\x96\xE7\x95\x8C", "!"};
  e->endless_trigger = "forever";  // "tok " until cancelled, 1 ms a token
  e->slow_trigger = "forever";
  e->slow_delay_ms = 1;
  return e;
}

}  // namespace swz::engine
