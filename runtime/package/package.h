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

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ggml/ggml_types.h"
#include "gguf/gguf.h"
#include "package/expr.h"

namespace swz::package {

/// Any invalid, unreadable or mismatched package. what() names the package directory and
/// the manifest field at fault (e.g. "kernels[3].signature[0].dtype").
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kFormatName = "swizzle-package";
/// Bumped on any change an older reader would misinterpret. Readers refuse other versions.
/// Version 2: GPU-target graph ops carry `launches` (the launch contract) instead of the
/// `kernels` phase map. Version 3: cpu-target ops carry `launches` too (cpu kernels in
/// the same contract, run by the same graph executor) instead of a `kernel` name.
inline constexpr int kFormatVersion = 3;
inline constexpr const char* kHashAlgorithm = "xxh3-128";
inline constexpr const char* kManifestFile = "manifest.json";

/// Targets a package can be compiled for. "cpu" kernels are built into swizzle-rt.
const std::vector<std::string>& known_targets();
/// known_targets() for messages: "cpu, sm_80, ..., spirv".
std::string known_targets_text();

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
  nlohmann::json graph;     ///< models::build_graph() output; each op carries "launches"
                            ///< (parse_launches) or "fused_into"
  std::vector<Kernel> kernels;
  WeightPlan weight_plan;
  nlohmann::json raw;

  const Kernel* find_kernel(const std::string& entry) const;
  const WeightTensor* find_weight(const std::string& name) const;
};

// ---------------------------------------------------------------------------------------
// The launch contract (GPU targets; docs/package-format.md, "The launch contract").
//
// Every GPU-target graph op that runs kernels carries `launches` in the graph JSON.
// from_json() validates them; parse_launches() returns them parsed, expressions compiled,
// for the graph executor, which evaluates them per pass with no MLIR and no per-kernel
// code. The typed Manifest keeps them only in `graph` (the JSON stays the one source of
// truth; parse_launches is cheap: a few thousand short expressions).

/// A GPU kernel argument's type, parsed from its signature `dtype` (an MLIR type).
struct ArgType {
  enum Kind { Memref, I32, F32 } kind = I32;
  int rank = 0;          ///< memref: 1 or 2 (sizes, row-major)
  int elem_bytes = 4;    ///< memref: bytes of one element (i8 1, f16 2, f32/i32 4, vector<4xf16> and vector<2xi32> 8, vector<4xf32> 16)
  std::string elem;      ///< memref: the element type as written ("f32", "vector<4xf32>", ...)
};

/// Parses "memref<?xf32>", "memref<?x?xf16>", "memref<?xvector<4xf32>>" (also 4xi32, 4xf16), "i32", "f32";
/// nullopt for any other type.
std::optional<ArgType> parse_arg_type(const std::string& mlir_type);

enum class Phase { All, Decode, Prefill };
enum class Scope { Batch, Sequence };

/// Symbol slots of a launch record's expressions (the `values` Expr::evaluate reads):
/// T, pos0, ctx, kv_pages, n_seq, seq_T, table_stride, max_ctx, then the record's `let`
/// symbols in order (slot kSymLet0 + i). kv_pages is the number of pages of each layer's K
/// (and V) pool, fixed at load; n_seq the sequences whose rows the launch covers (1 in
/// sequence scope), seq_T the most rows of one of them; table_stride the elements from one
/// sequence's block table to the next in a batch-scope `block_table` (fixed at load);
/// max_ctx the executor's context size (positions; fixed at load: prefill attention's
/// split length, so that a key's split does not depend on the pass).
inline constexpr int kSymT = 0, kSymPos0 = 1, kSymCtx = 2, kSymKvPages = 3, kSymNSeq = 4, kSymSeqT = 5,
                     kSymTableStride = 6, kSymMaxCtx = 7, kSymLet0 = 8;
/// Symbol slots of a scratch binding's `bytes`: max_T, max_ctx (evaluated once at load).
inline constexpr int kScratchMaxT = 0, kScratchMaxCtx = 1;

/// One argument binding of a launch record (docs/package-format.md, "Bindings").
struct Binding {
  enum Kind { Buffer, Weight, Tokens, Positions, Kv, BlockTable, Sequences, RowTables, KvMoves, Scratch, Absent, I32, F32 } kind = Absent;
  std::string name;          ///< Buffer: graph buffer; Weight: weight_plan tensor; Scratch: its
                             ///< name; Kv: "k" or "v"
  int layer = -1;            ///< Kv: the layer
  std::vector<Expr> shape;   ///< memref kinds: sizes in elements of the argument's element type
  Expr value;                ///< I32: the value; Scratch: bytes (slots kScratchMaxT/MaxCtx)
  float f32 = 0.f;           ///< F32: the value
  bool memref() const { return kind != I32 && kind != F32; }
};

/// One launch record, parsed.
struct Launch {
  std::string kernel;        ///< kernels[].entry
  size_t kernel_index = 0;   ///< index of that entry in Manifest::kernels
  Phase phase = Phase::All;
  Scope scope = Scope::Batch;
  bool output_rows = false;  ///< `rows: "output"`: T counts the rows whose logits are wanted
  std::vector<std::string> let_names;  ///< evaluate let[i] into slot kSymLet0 + i, in order
  std::vector<Expr> let;
  std::array<Expr, 3> grid;  ///< workgroups in x, y, z; a launch with a 0 in its grid is skipped
  Expr dynamic_smem;
  std::vector<Binding> args;      ///< one per kernel argument, in signature order
  std::vector<ArgType> arg_types; ///< the kernel signature's parsed dtypes (same order)
  /// The symbol names of this record's slots: T, pos0, ctx, kv_pages, n_seq, seq_T,
  /// table_stride, max_ctx, let names.
  std::vector<std::string> symbols() const;
};

/// The launches of graph op `op` (an index into graph.ops), in order.
struct OpLaunches {
  size_t op = 0;
  std::vector<Launch> launches;
};

/// Every GPU-target graph op's launch records, in graph order (ops fused into another and
/// cpu packages have none: empty for target cpu). Throws Error naming the field
/// ("manifest: graph.ops[12].launches[2].args[5]: ...") for an invalid record; a manifest
/// that from_json() accepted never throws.
std::vector<OpLaunches> parse_launches(const Manifest& m);

/// The keys of prefill attention's splits at an executor context of `max_ctx` positions:
/// the first prefill record's `split_len` let, evaluated (it names max_ctx alone;
/// compiler/driver/launch_bindings.cpp prefillSplitLen). Which split a key falls in, hence
/// the bits of a prompt row's attention, depends on it, so K/V shared between executors
/// (the prefix cache's disk tier) must agree on it. 0 when the package has no such record
/// (cpu packages). Throws Error as parse_launches, std::runtime_error when the rule names
/// another symbol.
int64_t prefill_split_len(const Manifest& m, int max_ctx);

/// Greedy sampling on the device, `graph.sampling.argmax` (GPU targets; empty when the
/// package has none): records over the output rows of the graph's output (the logits)
/// writing one i32 token id per row (argmax, ties to the lowest id) into the scratch the
/// pseudo op's `out` names. Throws Error as parse_launches.
std::vector<Launch> parse_argmax_launches(const Manifest& m);

/// K/V moved between cache slots on the device, `graph.kv_move` (GPU targets; empty when
/// the package has none): records over T moves, each {source slot, destination slot,
/// RoPE offset} as i32 (a slot is page * 64 + slot in the page) in the `kv_moves`
/// binding, together binding every layer's K and V; they copy each move's K and V and
/// re-rotate K (exec::BatchModel::move_kv, the approx cache mode). Throws Error as
/// parse_launches.
std::vector<Launch> parse_kv_move_launches(const Manifest& m);

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
