// Test helper: where the tokenizer tests find their source GGUFs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace swz::tokenizer::test {

/// First existing regular file among `cands` (empty strings ignored), or "".
inline std::string first_existing(const std::vector<std::string>& cands) {
  for (const auto& c : cands)
    if (!c.empty() && std::filesystem::is_regular_file(c)) return c;
  return "";
}

/// `rel` under every <root>/.venv/lib/python3*/site-packages (the project venv of scripts/setup.sh).
inline std::vector<std::string> site_packages_candidates(const std::string& root, const std::string& rel) {
  std::vector<std::string> out;
  std::error_code ec;
  std::filesystem::path lib = std::filesystem::path(root) / ".venv" / "lib";
  if (!std::filesystem::is_directory(lib, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(lib, ec))
    if (e.path().filename().string().rfind("python3", 0) == 0) out.push_back((e.path() / "site-packages" / rel).string());
  return out;
}

inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace swz::tokenizer::test
