// The .swz package: what `swizzlec compile` writes and `swizzle-rt` loads (DESIGN.md §2).
//
// A package is a directory `name.swz/` holding `manifest.json` and, for GPU targets, the
// kernel files the manifest names (`.ptx`, `.spv`). The weights are not copied: the
// manifest records the source GGUF's absolute path, size and an XXH3-128 hash of its
// tensor-data section, and the loader refuses a GGUF that does not match. The format is
// documented field by field in docs/package-format.md; this header is its reader/writer.
//
// Plain C++ (nlohmann/json, xxHash): the runtime links this, never LLVM/MLIR.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ggml/ggml_types.h"
#include "gguf/gguf.h"

namespace swz::package {

/// Any invalid, unreadable or mismatched package. what() names the package directory and
/// the manifest field at fault (e.g. "kernels[3].signature[0].dtype").
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kFormatName = "swizzle-package";
/// Bumped on any change an older reader would misinterpret. Readers refuse other versions.
inline constexpr int kFormatVersion = 1;
inline constexpr const char* kHashAlgorithm = "xxh3-128";
inline constexpr const char* kManifestFile = "manifest.json";

/// Targets a package can be compiled for. "cpu" kernels are built into swizzle-rt.
const std::vector<std::string>& known_targets();

struct ModelInfo {
  std::string architecture;   ///< "llama" | "qwen2" | "qwen3" (== hparams["arch"])
  std::string name;           ///< general.name, or the GGUF's file stem
  nlohmann::json hparams;     ///< models::HParams::to_json(); every key checked on read
};

struct TokenizerInfo {
  std::string model;                         ///< tokenizer.ggml.model, e.g. "gpt2", "llama"
  std::string pre;                           ///< tokenizer.ggml.pre ("default" when absent)
  int64_t n_vocab = 0;                       ///< entries of tokenizer.ggml.tokens
  std::optional<std::string> chat_template;  ///< tokenizer.chat_template source text
};

struct SourceGguf {
  std::string path;           ///< absolute path at compile time
  uint64_t size = 0;          ///< bytes of the whole file
  std::string hash_algorithm = kHashAlgorithm;
  std::string digest;         ///< 32 lower-case hex digits: content_hash() of the file
  uint64_t tensor_count = 0;
};

struct Kernel {
  std::string entry;                  ///< unique name, e.g. "cpu.matmul.q4_1"
  std::optional<std::string> file;    ///< kernel file relative to the package; null for cpu
  nlohmann::json launch;              ///< launch rule object; cpu: {"threads": "pool"}
  nlohmann::json signature;           ///< array of {name, dtype, shape?, role?, optional?}
  std::optional<std::string> schedule;  ///< tile schedule name (compiler/schedules/), or null
};

struct WeightTensor {
  std::string name;
  ggml::Type type = ggml::Type::F32;
  std::vector<int64_t> ne;   ///< ggml order, ne[0] contiguous
  uint64_t offset = 0;       ///< absolute byte offset of the tensor in the source GGUF file
  uint64_t bytes = 0;
};

struct WeightPlan {
  std::string strategy = "mmap-in-place";  ///< v1: the only strategy (GGUF tensors used as stored)
  std::vector<WeightTensor> tensors;
};

/// The parsed manifest. `raw` is the JSON as read (unknown extra keys kept); write_package
/// serializes the typed fields and ignores `raw`.
struct Manifest {
  int format_version = kFormatVersion;
  std::string target;       ///< one of known_targets()
  std::string created_by;   ///< e.g. "swizzlec 0.1.0"
  ModelInfo model;
  TokenizerInfo tokenizer;
  SourceGguf source_gguf;
  nlohmann::json graph;     ///< models::build_graph() output; ops may carry "kernel": entry
  std::vector<Kernel> kernels;
  WeightPlan weight_plan;
  nlohmann::json raw;

  const Kernel* find_kernel(const std::string& entry) const;
  const WeightTensor* find_weight(const std::string& name) const;
};

/// Serializes the typed fields (format tag included). Does not validate; see validate().
nlohmann::json to_json(const Manifest& m);

/// Parses and validates a manifest JSON object. `where` prefixes error messages (usually
/// the manifest path). Throws Error naming the first bad field, e.g.
/// "pkg.swz/manifest.json: source_gguf.content_hash.digest: expected 32 hex digits".
Manifest from_json(const nlohmann::json& j, const std::string& where = "manifest");

/// Checks `m` as from_json would (round-trips it). Throws Error.
void validate(const Manifest& m);

/// Extra files written beside the manifest: {relative name, bytes}.
using PackageFiles = std::vector<std::pair<std::string, std::string>>;

/// Writes `dir` (e.g. "model.swz") holding manifest.json (pretty-printed) and `files`.
/// Atomic: everything is written to a sibling temporary directory, synced, and renamed
/// over `dir` (an existing package there is replaced; a non-empty directory that is not a
/// package is refused). Validates first: never writes an invalid package. Throws Error.
void write_package(const std::string& dir, const Manifest& m, const PackageFiles& files = {});

/// Reads and validates `dir`/manifest.json, and checks that every kernel file it names
/// exists in `dir`. Throws Error naming the field or file at fault.
Manifest read_manifest(const std::string& dir);

/// Progress callback for hashing: (bytes done, bytes total).
using Progress = std::function<void(uint64_t, uint64_t)>;

/// XXH3-128 (xxHash's XXH3_128bits streaming API, seed 0) over the GGUF's tensor-data
/// section, bytes [data_offset(), file_size()), as 32 lower-case hex digits of the
/// canonical (big-endian) representation. Metadata is not hashed: the hash identifies the
/// weights. Reads the mapping sequentially; ~GB/s.
std::string content_hash(const gguf::File& f, const Progress& progress = {});

struct LoadedPackage {
  Manifest manifest;
  gguf::File gguf;
  std::string dir;
};

/// Reads the manifest and opens its source GGUF (`gguf_path` overrides the recorded path).
/// Refuses, with Error, a GGUF whose size, tensor count, hash (when verify_hash) or any
/// weight_plan tensor (name, type, shape, offset, bytes) differs from what the package
/// was compiled from: "<gguf> does not match the package: content hash X, package was
/// compiled from Y; recompile with swizzlec compile".
LoadedPackage open_package(const std::string& dir, bool verify_hash = true, const std::string& gguf_path = "",
                           const Progress& progress = {});

}  // namespace swz::package
