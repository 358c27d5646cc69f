//===- Schedule.cpp - per-target tile schedules ---------------------------===//
#include "compiler/mlir/Schedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace swz::schedule {

namespace {
using nlohmann::json;

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string &path, const std::string &what) const {
    throw std::runtime_error(origin + ": " + path + ": " + what);
  }
  const json &field(const json &obj, const std::string &path,
                    const std::string &key) const {
    if (!obj.is_object())
      fail(path, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end())
      fail(path + "." + key, "missing field");
    return *it;
  }
  int64_t integer(const json &obj, const std::string &path, const std::string &key,
                  int64_t min, int64_t max = INT64_MAX) const {
    const json &v = field(obj, path, key);
    if (!v.is_number_integer())
      fail(path + "." + key, "expected an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < min)
      fail(path + "." + key, "must be >= " + std::to_string(min) + ", got " +
                                 std::to_string(x));
    if (x > max)
      fail(path + "." + key, std::to_string(x) + " is more than " + std::to_string(max));
    return x;
  }
  /// Fails on a key of `obj` not in `allowed`: "<what> (<allowed, in order>)".
  void onlyFields(const json &obj, const std::string &path,
                  std::initializer_list<const char *> allowed, const std::string &what) const {
    std::string list;
    for (const char *a : allowed)
      list += (list.empty() ? "" : ", ") + std::string(a);
    for (const auto &[key, value] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(path + "." + key, what + " (" + list + ")");
  }
  std::string string(const json &obj, const std::string &path,
                     const std::string &key) const {
    const json &v = field(obj, path, key);
    if (!v.is_string())
      fail(path + "." + key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  bool boolean(const json &obj, const std::string &path, const std::string &key) const {
    const json &v = field(obj, path, key);
    if (!v.is_boolean())
      fail(path + "." + key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  /// Reads "swizzle": null | {"bits", "base", "shift": int | "row", "units"}.
  std::optional<bank::Swizzle> swizzle(const json &obj, const std::string &path,
                                       bool &shiftFromRow) const {
    shiftFromRow = false;
    auto it = obj.find("swizzle");
    if (it == obj.end() || it->is_null())
      return std::nullopt;
    std::string p = path + ".swizzle";
    if (string(*it, p, "units") != "elements")
      fail(p + ".units", "only \"elements\" (CuTe element offsets) is supported");
    bank::Swizzle s;
    s.bits = integer(*it, p, "bits", 0);
    s.base = integer(*it, p, "base", 0);
    const json &shift = field(*it, p, "shift");
    if (shift.is_string() && shift.get<std::string>() == "row") {
      shiftFromRow = true;
      return s;
    }
    s.shift = integer(*it, p, "shift", 0);
    if (s.shift < s.bits)
      fail(p, "shift (" + std::to_string(s.shift) + ") must be >= bits (" +
                  std::to_string(s.bits) + ")");
    return s;
  }
};
} // namespace

/// The fields of a `gemm` entry (or of a class merged into it) at `path`.
static GemmSchedule readGemm(const Reader &r, const json &g, const std::string &path) {
  GemmSchedule s;
  s.elementType = r.string(g, path, "element_type");
  s.tileM = r.integer(g, path, "tile_m", 1);
  s.tileN = r.integer(g, path, "tile_n", 1);
  s.tileK = r.integer(g, path, "tile_k", 1);
  s.warps = r.integer(g, path, "warps", 1);
  s.stages = r.integer(g, path, "stages", 1);
  s.vectorBytes = r.integer(g, path, "vector_bytes", 1);
  s.mma = r.string(g, path, "mma");
  s.copy = r.string(g, path, "copy");
  s.swizzle = r.swizzle(g, path, s.swizzleShiftFromRow);
  s.conflictFree = r.boolean(g, path, "conflict_free");
  if (g.contains("skinny")) {
    const std::string p = path + ".skinny";
    const json &k = r.field(g, path, "skinny");
    SkinnyGemmSchedule sk;
    sk.warps = r.integer(k, p, "warps", 1);
    if ((sk.warps & (sk.warps - 1)) != 0 || sk.warps > 32)
      r.fail(p + ".warps", std::to_string(sk.warps) + " is not a power of two up to 32");
    sk.mTiles = r.integer(k, p, "m_tiles", 1);
    if ((sk.mTiles & (sk.mTiles - 1)) != 0 || sk.mTiles > 8)
      r.fail(p + ".m_tiles", std::to_string(sk.mTiles) + " is not 1, 2, 4 or 8");
    const json &st = r.field(k, p, "stages");
    if (!st.is_object())
      r.fail(p + ".stages", "expected an object {\"q4_k\": n, \"q6_k\": n, \"q8_0\": n}");
    for (const auto &[ty, value] : st.items()) {
      if (ty != "q4_k" && ty != "q6_k" && ty != "q8_0")
        r.fail(p + ".stages." + ty, "not a block format the skinny GEMM reads (q4_k, q6_k, q8_0)");
      sk.stages[ty] = r.integer(st, p + ".stages", ty, 2);
    }
    for (const char *ty : {"q4_k", "q6_k", "q8_0"})
      if (!sk.stages.count(ty))
        r.fail(p + ".stages." + ty, "missing field");
    s.skinny = std::move(sk);
  }
  if (g.contains("skinny_max_rows")) {
    s.skinnyMaxRows = r.integer(g, path, "skinny_max_rows", 0);
    if (s.skinnyMaxRows > 0 && !s.skinny)
      r.fail(path + ".skinny_max_rows", "is " + std::to_string(s.skinnyMaxRows) +
                                            " but there is no " + path +
                                            ".skinny (the kernel's geometry)");
    if (s.skinny && s.skinnyMaxRows > 16 * s.skinny->mTiles)
      r.fail(path + ".skinny_max_rows",
             std::to_string(s.skinnyMaxRows) + " is more than the skinny GEMM's " +
                 std::to_string(16 * s.skinny->mTiles) + " rows (" + path + ".skinny.m_tiles " +
                 std::to_string(s.skinny->mTiles) + " of 16)");
  }
  if (g.contains("mma_in_flight")) {
    s.mmaInFlight = r.integer(g, path, "mma_in_flight", 0);
    if (*s.mmaInFlight > 1)
      r.fail(path + ".mma_in_flight", std::to_string(*s.mmaInFlight) + " is not 0 or 1");
  }
  return s;
}

TargetSchedule parseSchedule(std::string_view text, std::string_view origin) {
  Reader r{std::string(origin)};
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    r.fail("$", "not valid JSON");
  if (r.integer(doc, "$", "format_version", 0) != 1)
    r.fail("$.format_version", "unsupported version (this compiler reads 1)");

  TargetSchedule s;
  s.target = r.string(doc, "$", "target");
  const json &dev = r.field(doc, "$", "device");
  s.arch = r.string(dev, "$.device", "arch");
  if (dev.contains("ptx_version"))
    s.ptxVersion = r.string(dev, "$.device", "ptx_version");
  s.warpSize = r.integer(dev, "$.device", "warp_size", 1);
  s.maxSmemBytesPerBlock = r.integer(dev, "$.device", "max_smem_bytes_per_block", 0);

  const json &g = r.field(doc, "$", "gemm");
  s.gemm = readGemm(r, g, "$.gemm");
  if (auto it = g.find("classes"); it != g.end()) {
    if (!it->is_array())
      r.fail("$.gemm.classes", "expected an array, got " + it->dump());
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string p = "$.gemm.classes[" + std::to_string(i) + "]";
      const json &c = (*it)[i];
      GemmClass gc;
      gc.name = r.string(c, p, "name");
      if (gc.name.empty() ||
          gc.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        r.fail(p + ".name", "\"" + gc.name + "\" is not [a-z0-9_]+ (it names the kernel gemm_f16_<name>)");
      for (const GemmClass &o : s.gemmClasses)
        if (o.name == gc.name)
          r.fail(p + ".name", "\"" + gc.name + "\" names two classes");
      bool bounded = false;
      for (auto [key, field] : {std::pair{"n_min", &gc.nMin}, std::pair{"n_max", &gc.nMax},
                                std::pair{"k_min", &gc.kMin}, std::pair{"k_max", &gc.kMax}})
        if (c.contains(key)) {
          *field = r.integer(c, p, key, 0);
          bounded = true;
        }
      if (!bounded)
        r.fail(p, "a class needs at least one of n_min, n_max, k_min, k_max");
      if (gc.nMin > gc.nMax || gc.kMin > gc.kMax)
        r.fail(p, "an empty range (n_min > n_max or k_min > k_max): no weight falls in it");
      // The base entry's tile fields with the class's in place of its own (the target-wide
      // skinny GEMM and the class list stay the base entry's).
      static const std::set<std::string> kTileFields = {
          "element_type", "tile_m", "tile_n", "tile_k", "warps", "stages", "vector_bytes",
          "mma", "copy", "swizzle", "conflict_free", "mma_in_flight"};
      json merged = g;
      for (const char *key : {"classes", "skinny", "skinny_max_rows"})
        merged.erase(key);
      for (const auto &[key, value] : c.items()) {
        if (key == "name" || key == "n_min" || key == "n_max" || key == "k_min" || key == "k_max")
          continue;
        if (!kTileFields.count(key))
          r.fail(p + "." + key, "not a field a class may set (the gemm tile's: element_type, "
                                "tile_m, tile_n, tile_k, warps, stages, vector_bytes, mma, copy, "
                                "swizzle, conflict_free, mma_in_flight)");
        merged[key] = value;
      }
      gc.gemm = readGemm(r, merged, p);
      s.gemmClasses.push_back(std::move(gc));
    }
  }

  const json &a = r.field(doc, "$", "attention");
  s.attention.elementType = r.string(a, "$.attention", "element_type");
  s.attention.blockQ = r.integer(a, "$.attention", "block_q", 1);
  s.attention.blockKv = r.integer(a, "$.attention", "block_kv", 1);
  s.attention.warps = r.integer(a, "$.attention", "warps", 1);
  s.attention.stages = r.integer(a, "$.attention", "stages", 1);
  s.attention.mma = r.string(a, "$.attention", "mma");
  s.attention.copy = r.string(a, "$.attention", "copy");
  s.attention.swizzle = r.swizzle(a, "$.attention", s.attention.swizzleShiftFromRow);
  s.attention.conflictFree = r.boolean(a, "$.attention", "conflict_free");
  if (a.contains("prefill_split_min")) {
    s.attention.prefillSplitMin = r.integer(a, "$.attention", "prefill_split_min", 64);
    if (s.attention.prefillSplitMin % 64 != 0)
      throw std::runtime_error("$.attention.prefill_split_min: " + std::to_string(s.attention.prefillSplitMin) +
                               " is not a multiple of 64 (the tensor-core kernel's key tile)");
  }

  if (a.contains("decode")) {
    const std::string p = "$.attention.decode";
    const json &d = r.field(a, "$.attention", "decode");
    DecodeAttentionSchedule ds;
    ds.warps = r.integer(d, p, "warps", 1);
    if (ds.warps != 4 && ds.warps != 8)
      r.fail(p + ".warps", std::to_string(ds.warps) + " is not 4 or 8 (the warps combine the "
                           "8 query rows in groups of 128 threads)");
    ds.keysInFlight = r.integer(d, p, "keys_in_flight", 1, 16);
    if (d.contains("min_ctas_per_sm"))
      ds.minCtasPerSm = r.integer(d, p, "min_ctas_per_sm", 0);
    r.onlyFields(d, p, {"warps", "keys_in_flight", "min_ctas_per_sm"}, "not a decode field");
    s.attention.decode = ds;
  }

  const json &v = r.field(doc, "$", "gemv");
  r.onlyFields(v, "$.gemv",
               {"f32", "q8x", "f16_mma", "f16_mma_split_k", "f16_mma_split_k_below_rows",
                "q4_k_mma", "q4_k_mma_split_k_below_rows"},
               "not a gemv field");
  auto f16Mma = [&](const char *key) -> std::optional<GemvSchedule::F16Mma> {
    if (!v.contains(key))
      return std::nullopt;
    const std::string p = std::string("$.gemv.") + key;
    const json &e = r.field(v, "$.gemv", key);
    GemvSchedule::F16Mma m;
    m.warps = r.integer(e, p, "warps", 1, 16);
    m.mTiles = r.integer(e, p, "m_tiles", 1, 4);
    m.unitsInFlight = r.integer(e, p, "units_in_flight", 1, 8);
    r.onlyFields(e, p, {"warps", "m_tiles", "units_in_flight"},
                 "not a field of the tensor-core GEMV");
    return m;
  };
  s.gemv.f16Mma = f16Mma("f16_mma");
  s.gemv.f16MmaSplitK = f16Mma("f16_mma_split_k");
  if (v.contains("f16_mma_split_k_below_rows"))
    s.gemv.f16MmaSplitKBelowRows = r.integer(v, "$.gemv", "f16_mma_split_k_below_rows", 0);
  if (v.contains("q4_k_mma"))
    s.gemv.q4kMma = r.boolean(v, "$.gemv", "q4_k_mma");
  if (v.contains("q4_k_mma_split_k_below_rows"))
    s.gemv.q4kMmaSplitKBelowRows = r.integer(v, "$.gemv", "q4_k_mma_split_k_below_rows", 0);
  // gemv.q8x.<type> and gemv.f32.<type>: the decode GEMVs' geometry per weight type (the
  // f32 path takes one row a warp: no rows_per_warp field).
  auto gemvTable = [&](const char *key, const std::set<std::string> &types, const char *what,
                       bool rows) {
    std::map<std::string, GemvTypeSchedule> out;
    if (!v.contains(key))
      return out;
    const std::string path = std::string("$.gemv.") + key;
    const json &q = r.field(v, "$.gemv", key);
    if (!q.is_object())
      r.fail(path, "must be an object of weight types");
    std::string list;
    for (const std::string &t : types)
      list += (list.empty() ? "" : ", ") + t;
    const std::string notAField = std::string("not a field of the ") + what;
    for (const auto &[ty, e] : q.items()) {
      const std::string p = path + "." + ty;
      if (!types.count(ty))
        r.fail(p, std::string("not a weight type of the ") + what + " (" + list + ")");
      GemvTypeSchedule g;
      g.rowsPerWarp = rows ? r.integer(e, p, "rows_per_warp", 1, 8) : 1;
      g.unitsInFlight = r.integer(e, p, "units_in_flight", 1, 8);
      if (e.contains("min_ctas_per_sm"))
        g.minCtasPerSm = r.integer(e, p, "min_ctas_per_sm", 0, 32);
      if (rows)
        r.onlyFields(e, p, {"rows_per_warp", "units_in_flight", "min_ctas_per_sm"}, notAField);
      else
        r.onlyFields(e, p, {"units_in_flight", "min_ctas_per_sm"}, notAField);
      out[ty] = g;
    }
    return out;
  };
  s.gemv.q8x = gemvTable("q8x", {"q4_1", "q4_k", "q5_0", "q6_k", "q8_0"}, "int8 GEMVs", true);
  s.gemv.f32 = gemvTable("f32", {"f16", "q4_0", "q4_1", "q4_k", "q5_0", "q6_k", "q8_0"},
                         "f32 GEMVs", false);
  return s;
}

TargetSchedule loadSchedule(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read schedule file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parseSchedule(ss.str(), path);
}

const GemmClass *gemmClassFor(const TargetSchedule &s, int64_t n, int64_t k) {
  for (const GemmClass &c : s.gemmClasses)
    if (n >= c.nMin && n <= c.nMax && k >= c.kMin && k <= c.kMax)
      return &c;
  return nullptr;
}

int64_t gemmSmemAlign(bool wgmma) { return wgmma ? 1024 : 128; }

int64_t gemmDynamicSmemBytes(int64_t tileBytes, bool wgmma) {
  return tileBytes > kStaticSmemBytes ? tileBytes + gemmSmemAlign(wgmma) - 16 : 0;
}

int64_t gemmSmemBytes(const GemmSchedule &s, unsigned elemBytes) {
  return s.stages * (s.tileM + s.tileN) * s.tileK * int64_t(elemBytes);
}

std::string ptxArch(const TargetSchedule &s, const std::string &target) {
  return s.arch.rfind(target, 0) == 0 ? s.arch : target;
}

} // namespace swz::schedule
