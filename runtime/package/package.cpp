#include "package/package.h"

#include "package/checker.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace swz::package {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using detail::Checker;
using detail::json_type;

bool is_hex_digest(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The keys of models::HParams::to_json() and their kinds (kept in step with models/model.cpp;
// the runtime does not link swz_models, so the check lives here).
void check_hparams(const Checker& c, const json& hp, const std::string& path) {
  for (const char* k : {"n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_rot", "n_ff", "n_vocab",
                        "n_ctx_train"}) {
    if (c.uint(hp, path, k) == 0) c.fail(Checker::join(path, k), "must be positive");
  }
  for (const char* k : {"rope_theta", "rms_eps"}) {
    if (!(c.number(hp, path, k) > 0)) c.fail(Checker::join(path, k), "must be positive");
  }
  std::string rt = c.string(hp, path, "rope_type");
  if (rt != "norm" && rt != "neox") c.fail(path + ".rope_type", "expected \"norm\" or \"neox\", got \"" + rt + "\"");
  for (const char* k : {"qkv_bias", "qk_norm", "tied_output"}) c.boolean(hp, path, k);
  c.string(hp, path, "arch");
  if (c.uint(hp, path, "n_head") % c.uint(hp, path, "n_head_kv") != 0)
    c.fail(path + ".n_head_kv", "n_head is not a multiple of n_head_kv");
}

// Names that graph ops may read besides weights: activation buffers and the token ids.
std::set<std::string> graph_values(const Checker& c, const json& graph) {
  std::set<std::string> names{"tokens"};
  const json& buffers = c.object(graph, "graph", "buffers");
  for (auto& [name, width] : buffers.items()) {
    if (c.uint_value(width, "graph.buffers." + name) == 0) c.fail("graph.buffers." + name, "width must be positive");
    names.insert(name);
  }
  return names;
}

void check_graph(const Checker& c, const Manifest& m) {
  const json& g = m.graph;
  if (!g.is_object()) c.fail("graph", std::string("expected an object, got ") + json_type(g));
  check_hparams(c, c.object(g, "graph", "hparams"), "graph.hparams");
  if (c.object(g, "graph", "hparams") != m.model.hparams) c.fail("graph.hparams", "differs from model.hparams");
  std::set<std::string> values = graph_values(c, g);
  std::string output = c.string(g, "graph", "output");
  if (!values.count(output)) c.fail("graph.output", "'" + output + "' is not a graph buffer");
  const json& ops = c.array(g, "graph", "ops");
  if (ops.empty()) c.fail("graph.ops", "must not be empty");
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string p = Checker::idx("graph.ops", i);
    const json& op = ops[i];
    c.string(op, p, "op");
    const json& in = c.array(op, p, "in");
    for (size_t k = 0; k < in.size(); ++k) {
      if (!in[k].is_string()) c.fail(Checker::idx(p + ".in", k), "expected a string");
      std::string name = in[k].get<std::string>();
      if (!values.count(name) && !m.find_weight(name))
        c.fail(Checker::idx(p + ".in", k), "'" + name + "' is neither a graph buffer nor a weight_plan tensor");
    }
    std::string out = c.string(op, p, "out");
    if (!values.count(out)) c.fail(p + ".out", "'" + out + "' is not a graph buffer");
    if (op.contains("kernel"))  // format 2's cpu ops named one kernel; format 3 ops carry launch records
      c.fail(p + ".kernel", "ops name their kernels in \"launches\" (format version " + std::to_string(kFormatVersion) +
                                "); recompile the package with this swizzlec");
    if (op.contains("fused_into")) {  // folded into another op's launches
      if (op.contains("launches"))
        c.fail(p, "an op fused into another has no launches of its own");
      const json& into = op["fused_into"];
      const int64_t at = into.is_number_integer() ? into.get<int64_t>() : -1;
      if (at < 0 || size_t(at) >= ops.size() || size_t(at) == i) {
        c.fail(p + ".fused_into", "must be the index of another graph op");
      } else {
        const json& anchor = ops[size_t(at)];
        bool listed = false;
        if (anchor.contains("fused") && anchor["fused"].is_array())
          for (const json& f : anchor["fused"]) listed |= f.is_number_integer() && f.get<int64_t>() == int64_t(i);
        if (!listed || anchor.contains("fused_into"))
          c.fail(p + ".fused_into", "op " + into.dump() + " does not list this op in its \"fused\"");
      }
    } else if (!op.contains("launches")) {
      c.fail(p, "an op needs \"launches\" or \"fused_into\"");
    }
  }
  detail::parse_launches(c, m);  // every op's launch records (launches.cpp)
}

bool safe_relative(const std::string& f) {
  if (f.empty() || f.front() == '/') return false;
  for (const auto& part : fs::path(f)) {
    if (part == ".." || part == ".") return false;
  }
  return f != kManifestFile;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

const std::vector<std::string>& known_targets() {
  // The CUDA targets are compiler/schedules/sm_*.json (one file a GPU generation).
  static const std::vector<std::string> t{"cpu", "sm_80", "sm_86", "sm_89", "sm_90", "spirv"};
  return t;
}

std::string known_targets_text() {
  std::string text;
  for (const std::string& t : known_targets()) {
    if (!text.empty()) text += ", ";
    text += t;
  }
  return text;
}

const Kernel* Manifest::find_kernel(const std::string& entry) const {
  for (const Kernel& k : kernels)
    if (k.entry == entry) return &k;
  return nullptr;
}

const WeightTensor* Manifest::find_weight(const std::string& name) const {
  for (const WeightTensor& w : weight_plan.tensors)
    if (w.name == name) return &w;
  return nullptr;
}

json to_json(const Manifest& m) {
  json kernels = json::array();
  for (const Kernel& k : m.kernels) {
    kernels.push_back({{"entry", k.entry},
                       {"file", k.file ? json(*k.file) : json(nullptr)},
                       {"launch", k.launch},
                       {"signature", k.signature},
                       {"schedule", k.schedule ? json(*k.schedule) : json(nullptr)}});
  }
  json tensors = json::array();
  for (const WeightTensor& w : m.weight_plan.tensors) {
    tensors.push_back({{"name", w.name},
                       {"type", lower(ggml::type_info(w.type).name)},
                       {"ne", w.ne},
                       {"offset", w.offset},
                       {"bytes", w.bytes}});
  }
  return json{
      {"format", kFormatName},
      {"format_version", m.format_version},
      {"target", m.target},
      {"created_by", m.created_by},
      {"model", {{"architecture", m.model.architecture}, {"name", m.model.name}, {"hparams", m.model.hparams}}},
      {"tokenizer",
       {{"model", m.tokenizer.model},
        {"pre", m.tokenizer.pre},
        {"n_vocab", m.tokenizer.n_vocab},
        {"chat_template", m.tokenizer.chat_template ? json(*m.tokenizer.chat_template) : json(nullptr)}}},
      {"source_gguf",
       {{"path", m.source_gguf.path},
        {"size", m.source_gguf.size},
        {"content_hash", {{"algorithm", m.source_gguf.hash_algorithm}, {"digest", m.source_gguf.digest}}},
        {"tensor_count", m.source_gguf.tensor_count}}},
      {"graph", m.graph},
      {"kernels", kernels},
      {"weight_plan", {{"strategy", m.weight_plan.strategy}, {"tensors", tensors}}},
  };
}

Manifest from_json(const json& j, const std::string& where) {
  Checker c(where);
  if (!j.is_object()) c.fail("(top level)", std::string("expected an object, got ") + json_type(j));
  Manifest m;
  m.raw = j;
  std::string format = c.string(j, "", "format");
  if (format != kFormatName) c.fail("format", "expected \"" + std::string(kFormatName) + "\", got \"" + format + "\"");
  uint64_t version = c.uint(j, "", "format_version");
  if (version != static_cast<uint64_t>(kFormatVersion)) {
    c.fail("format_version", "package format version " + std::to_string(version) + " is not supported (this build reads version " +
                                 std::to_string(kFormatVersion) + "); recompile the package with this swizzlec");
  }
  m.format_version = kFormatVersion;
  m.target = c.string(j, "", "target");
  const auto& targets = known_targets();
  if (std::find(targets.begin(), targets.end(), m.target) == targets.end())
    c.fail("target", "unknown target \"" + m.target + "\" (known: " + known_targets_text() + ")");
  m.created_by = c.string(j, "", "created_by");

  const json& model = c.object(j, "", "model");
  m.model.architecture = c.string(model, "model", "architecture");
  m.model.name = c.string(model, "model", "name", false);
  m.model.hparams = c.object(model, "model", "hparams");
  check_hparams(c, m.model.hparams, "model.hparams");
  if (m.model.hparams["arch"] != m.model.architecture)
    c.fail("model.hparams.arch", "\"" + m.model.hparams["arch"].get<std::string>() + "\" differs from model.architecture \"" +
                                     m.model.architecture + "\"");

  const json& tok = c.object(j, "", "tokenizer");
  m.tokenizer.model = c.string(tok, "tokenizer", "model");
  m.tokenizer.pre = c.string(tok, "tokenizer", "pre");
  m.tokenizer.n_vocab = static_cast<int64_t>(c.uint(tok, "tokenizer", "n_vocab"));
  if (m.tokenizer.n_vocab == 0) c.fail("tokenizer.n_vocab", "must be positive");
  m.tokenizer.chat_template = c.string_or_null(tok, "tokenizer", "chat_template");

  const json& src = c.object(j, "", "source_gguf");
  m.source_gguf.path = c.string(src, "source_gguf", "path");
  if (m.source_gguf.path.front() != '/') c.fail("source_gguf.path", "must be absolute, got \"" + m.source_gguf.path + "\"");
  m.source_gguf.size = c.uint(src, "source_gguf", "size");
  const json& ch = c.object(src, "source_gguf", "content_hash");
  m.source_gguf.hash_algorithm = c.string(ch, "source_gguf.content_hash", "algorithm");
  if (m.source_gguf.hash_algorithm != kHashAlgorithm)
    c.fail("source_gguf.content_hash.algorithm",
           "expected \"" + std::string(kHashAlgorithm) + "\", got \"" + m.source_gguf.hash_algorithm + "\"");
  m.source_gguf.digest = c.string(ch, "source_gguf.content_hash", "digest");
  if (!is_hex_digest(m.source_gguf.digest))
    c.fail("source_gguf.content_hash.digest", "expected 32 lower-case hex digits, got \"" + m.source_gguf.digest + "\"");
  m.source_gguf.tensor_count = c.uint(src, "source_gguf", "tensor_count");

  const json& kernels = c.array(j, "", "kernels");
  std::set<std::string> entries;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string p = Checker::idx("kernels", i);
    const json& kj = kernels[i];
    Kernel k;
    k.entry = c.string(kj, p, "entry");
    if (!entries.insert(k.entry).second) c.fail(p + ".entry", "duplicate entry \"" + k.entry + "\"");
    k.file = c.string_or_null(kj, p, "file");
    if (m.target == "cpu" && k.file)
      c.fail(p + ".file", "must be null for target cpu (cpu kernels are built into swizzle-rt)");
    if (m.target != "cpu" && !k.file) c.fail(p + ".file", "target " + m.target + " needs a kernel file");
    if (k.file && !safe_relative(*k.file))
      c.fail(p + ".file", "\"" + *k.file + "\" must be a plain relative path inside the package");
    k.launch = c.object(kj, p, "launch");
    if (m.target == "cpu" && k.launch != json{{"threads", "pool"}})
      c.fail(p + ".launch", "target cpu expects {\"threads\": \"pool\"}, got " + k.launch.dump());
    k.signature = c.array(kj, p, "signature");
    for (size_t a = 0; a < k.signature.size(); ++a) {
      const std::string ap = Checker::idx(p + ".signature", a);
      c.string(k.signature[a], ap, "name");
      c.string(k.signature[a], ap, "dtype");
    }
    k.schedule = c.string_or_null(kj, p, "schedule");
    m.kernels.push_back(std::move(k));
  }

  const json& wp = c.object(j, "", "weight_plan");
  m.weight_plan.strategy = c.string(wp, "weight_plan", "strategy");
  if (m.weight_plan.strategy != "mmap-in-place")
    c.fail("weight_plan.strategy", "unknown strategy \"" + m.weight_plan.strategy + "\" (format version " + std::to_string(kFormatVersion) + " knows mmap-in-place)");
  const json& tensors = c.array(wp, "weight_plan", "tensors");
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string p = Checker::idx("weight_plan.tensors", i);
    const json& tj = tensors[i];
    WeightTensor w;
    w.name = c.string(tj, p, "name");
    if (!names.insert(w.name).second) c.fail(p + ".name", "duplicate tensor \"" + w.name + "\"");
    std::string type = c.string(tj, p, "type");
    if (!ggml::type_from_name(type, &w.type)) c.fail(p + ".type", "unknown ggml type \"" + type + "\"");
    const json& ne = c.array(tj, p, "ne");
    if (ne.empty() || ne.size() > 4) c.fail(p + ".ne", "expected 1 to 4 dimensions, got " + std::to_string(ne.size()));
    for (size_t d = 0; d < ne.size(); ++d) {
      uint64_t v = c.uint_value(ne[d], Checker::idx(p + ".ne", d));
      if (v == 0 || v > (uint64_t{1} << 40)) c.fail(Checker::idx(p + ".ne", d), "dimension out of range");
      w.ne.push_back(static_cast<int64_t>(v));
    }
    const ggml::TypeInfo& ti = ggml::type_info(w.type);
    if (w.ne[0] % ti.block_size != 0)
      c.fail(p + ".ne", "ne[0] = " + std::to_string(w.ne[0]) + " is not a multiple of " + ti.name + "'s block size " +
                            std::to_string(ti.block_size));
    w.offset = c.uint(tj, p, "offset");
    w.bytes = c.uint(tj, p, "bytes");
    uint64_t rows = 1;
    for (size_t d = 1; d < w.ne.size(); ++d) rows *= static_cast<uint64_t>(w.ne[d]);
    uint64_t expect = ggml::row_size(w.type, w.ne[0]) * rows;
    if (w.bytes != expect)
      c.fail(p + ".bytes", std::to_string(w.bytes) + " does not match " + ti.name + " " + shape_str(w.ne) + " (" +
                               std::to_string(expect) + " bytes)");
    if (w.offset + w.bytes > m.source_gguf.size || w.offset + w.bytes < w.offset)
      c.fail(p + ".offset", "tensor extends past source_gguf.size");
    m.weight_plan.tensors.push_back(std::move(w));
  }

  m.graph = c.field(j, "", "graph");
  check_graph(c, m);
  return m;
}

void validate(const Manifest& m) { from_json(to_json(m), "manifest"); }

void write_package(const std::string& dir, const Manifest& m, const PackageFiles& files) {
  json j = to_json(m);
  from_json(j, dir + "/" + kManifestFile + " (being written)");
  for (const auto& [name, bytes] : files) {
    if (!safe_relative(name)) throw Error(dir + ": refusing to write package file \"" + name + "\" (not a plain relative path)");
  }
  for (const Kernel& k : m.kernels) {
    if (k.file && std::none_of(files.begin(), files.end(), [&](const auto& f) { return f.first == *k.file; }))
      throw Error(dir + ": kernel " + k.entry + " names file \"" + *k.file + "\", which is not among the files to write");
  }

  fs::path target = fs::path(dir);
  if (target.filename().empty()) target = target.parent_path();  // "x.swz/"
  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec)) throw Error(dir + ": exists and is not a directory; refusing to replace it");
    if (!fs::is_empty(target, ec) && !fs::exists(target / kManifestFile, ec))
      throw Error(dir + ": is a non-empty directory without " + kManifestFile + "; refusing to replace it");
  }
  fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  fs::path tmp = parent / (target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) || ec) throw Error(dir + ": cannot create " + tmp.string() + ": " + ec.message());

  auto write_file = [&](const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path(), ec);
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(dir + ": cannot write " + p.string() + ": " + std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = errno;
        ::close(fd);
        throw Error(dir + ": cannot write " + p.string() + ": " + std::strerror(e));
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) throw Error(dir + ": cannot sync " + p.string() + ": " + std::strerror(errno));
  };
  try {
    write_file(tmp / kManifestFile, j.dump(2) + "\n");
    for (const auto& [name, bytes] : files) write_file(tmp / name, bytes);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }

  // Swap the new directory in. renameat2(RENAME_EXCHANGE) replaces an existing package in
  // one step; a fresh target is a plain rename.
  if (fs::exists(target, ec)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp, ec);  // now holds the old package
      return;
    }
    // Filesystems without RENAME_EXCHANGE: move the old package aside, then rename.
    fs::path old = parent / (target.filename().string() + ".old-" + std::to_string(::getpid()));
    fs::remove_all(old, ec);
    fs::rename(target, old, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      throw Error(dir + ": cannot replace the existing package: " + ec.message());
    }
    fs::rename(tmp, target, ec);
    if (ec) {
      fs::rename(old, target, ec);
      throw Error(dir + ": cannot move the new package into place");
    }
    fs::remove_all(old, ec);
    return;
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ec2;
    fs::remove_all(tmp, ec2);
    throw Error(dir + ": cannot move the new package into place: " + ec.message());
  }
}

Manifest read_manifest(const std::string& dir) {
  const fs::path mpath = fs::path(dir) / kManifestFile;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a package directory (does not exist or is not a directory)");
  std::ifstream in(mpath, std::ios::binary);
  if (!in) throw Error(mpath.string() + ": cannot open (is " + dir + " a swizzle package?)");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw Error(mpath.string() + ": not valid JSON: " + e.what());
  }
  Manifest m = from_json(j, mpath.string());
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const Kernel& k = m.kernels[i];
    if (k.file && !fs::is_regular_file(fs::path(dir) / *k.file, ec))
      throw Error(mpath.string() + ": kernels[" + std::to_string(i) + "].file: \"" + *k.file + "\" is missing from " + dir);
  }
  return m;
}

std::string content_hash(const gguf::File& f, const Progress& progress) {
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw Error("content_hash: out of memory");
  XXH3_128bits_reset(st);
  const uint64_t begin = f.data_offset(), end = f.file_size();
  const uint64_t total = end > begin ? end - begin : 0;
  constexpr uint64_t kChunk = uint64_t{16} << 20;  // progress granularity; speed is unaffected
  for (uint64_t done = 0; done < total;) {
    const uint64_t n = std::min(kChunk, total - done);
    XXH3_128bits_update(st, f.base() + begin + done, n);
    done += n;
    if (progress) progress(done, total);
  }
  if (total == 0 && progress) progress(0, 0);
  XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : canon.digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

LoadedPackage open_package(const std::string& dir, bool verify_hash, const std::string& gguf_path,
                           const Progress& progress) {
  Manifest m = read_manifest(dir);
  const std::string path = gguf_path.empty() ? m.source_gguf.path : gguf_path;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(path + ": the package " + dir + " was compiled from this GGUF, which is missing; pass the model's path or recompile with swizzlec compile");
  gguf::File f = [&] {
    try {
      return gguf::File::open(path);
    } catch (const gguf::Error& e) {
      throw Error(std::string("cannot open the package's GGUF: ") + e.what());
    }
  }();
  auto mismatch = [&](const std::string& what) {
    throw Error(path + " does not match the package " + dir + ": " + what + "; recompile with swizzlec compile");
  };
  if (f.file_size() != m.source_gguf.size)
    mismatch("size " + std::to_string(f.file_size()) + " bytes, package was compiled from " +
             std::to_string(m.source_gguf.size) + " bytes");
  if (f.tensors().size() != m.source_gguf.tensor_count)
    mismatch(std::to_string(f.tensors().size()) + " tensors, package was compiled from " +
             std::to_string(m.source_gguf.tensor_count));
  for (const WeightTensor& w : m.weight_plan.tensors) {
    const gguf::TensorInfo* t = f.tensor(w.name);
    if (!t) mismatch("tensor " + w.name + " is missing");
    if (t->type != w.type || t->ne != w.ne || f.data_offset() + t->offset != w.offset || t->n_bytes != w.bytes)
      mismatch("tensor " + w.name + " is " + ggml::type_info(t->type).name + " " + shape_str(t->ne) + " at offset " +
               std::to_string(f.data_offset() + t->offset) + ", package expects " + ggml::type_info(w.type).name + " " +
               shape_str(w.ne) + " at offset " + std::to_string(w.offset));
  }
  if (verify_hash) {
    std::string h = content_hash(f, progress);
    if (h != m.source_gguf.digest)
      mismatch("content hash " + h + ", package was compiled from " + m.source_gguf.digest);
  }
  return LoadedPackage{std::move(m), std::move(f), dir};
}

}  // namespace swz::package
