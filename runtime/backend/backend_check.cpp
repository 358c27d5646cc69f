// Numeric checks of a backend on a package's kernels. See backend_check.h.
#include "backend/backend_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "backend/kernel_record.h"
#include "ggml/ggml_types.h"
#include "ggml/quants.h"
#include "package/expr.h"
#include "package/package.h"

namespace swz::backend::check {
namespace {

constexpr uint32_t kSentinel = 0x7fc0dead;  // a NaN: an overrun shows up as changed bytes

/// Deterministic values in [-1, 1) (64-bit LCG, Knuth's constants).
struct Rng {
  uint64_t s;
  float next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return float(double(s >> 11) / double(1ull << 53) * 2.0 - 1.0);
  }
  std::vector<float> vec(size_t n, float scale = 1.f) {
    std::vector<float> v(n);
    for (float& x : v) x = next() * scale;
    return v;
  }
};

/// Sub-ranges of one device buffer, each at a non-zero multiple of kOffsetAlign with at
/// least kOffsetAlign sentinel bytes before and after it.
struct Layout {
  struct Region {
    size_t offset = 0, bytes = 0;
  };
  std::vector<Region> regions;
  size_t total = 0;
  size_t add(size_t bytes) {
    const size_t at = ((total + kOffsetAlign) / kOffsetAlign) * kOffsetAlign;
    regions.push_back({at, bytes});
    total = at + bytes;
    return regions.size() - 1;
  }
  size_t size() const { return ((total + 2 * kOffsetAlign - 1) / kOffsetAlign) * kOffsetAlign; }
};

/// A case's device buffer: allocated, filled with the sentinel, regions uploaded.
struct Arena {
  Backend& b;
  Layout layout;
  Buffer buf;
  Arena(Backend& backend, Layout l, const std::string& what) : b(backend), layout(std::move(l)) {
    buf = b.alloc(layout.size(), what);
    b.fill32(buf, 0, layout.size(), kSentinel);
  }
  ~Arena() {
    try {
      b.free(buf);
    } catch (const Error&) {
    }
  }
  void put(size_t region, const void* data, size_t bytes) { b.upload(buf, layout.regions[region].offset, data, bytes); }
  Arg memref(size_t region, int64_t elems) const {
    Arg a;
    a.kind = Arg::Memref;
    a.buffer = buf;
    a.offset = layout.regions[region].offset;
    a.bytes = layout.regions[region].bytes;
    a.rank = 1;
    a.sizes[0] = elems;
    return a;
  }
  std::vector<uint8_t> all() const {
    std::vector<uint8_t> out(layout.size());
    b.download(out.data(), buf, 0, out.size());
    return out;
  }
};

Arg i32(int32_t v) {
  Arg a;
  a.kind = Arg::I32;
  a.i32 = v;
  return a;
}
Arg f32(float v) {
  Arg a;
  a.kind = Arg::F32;
  a.f32 = v;
  return a;
}

/// Counts sentinel words overwritten outside every region (an overrun or a stray write).
int64_t check_gaps(const Layout& l, const std::vector<uint8_t>& bytes) {
  std::vector<bool> inside(bytes.size() / 4, false);
  for (const auto& r : l.regions)
    for (size_t w = r.offset / 4; w < (r.offset + r.bytes + 3) / 4 && w < inside.size(); ++w) inside[w] = true;
  int64_t bad = 0;
  for (size_t w = 0; w < inside.size(); ++w) {
    uint32_t v;
    std::memcpy(&v, &bytes[w * 4], 4);
    if (!inside[w] && v != kSentinel) ++bad;
  }
  return bad;
}

void compare(Result& r, double got, double ref, double tol) {
  double err = std::fabs(got - ref);
  if (err > r.max_err || std::isnan(err)) r.max_err = std::isnan(err) ? INFINITY : err;
  if (!(err <= tol)) ++r.bad;
  ++r.checked;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes, size_t offset, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), bytes.data() + offset, n * 4);
  return v;
}

const package::Kernel* find(const package::Manifest& m, const std::string& function) {
  for (const package::Kernel& k : m.kernels)
    if (k.launch.is_object() && k.launch.value("function", "") == function) return &k;
  return nullptr;
}

template <typename F>
Result run_case(const std::string& kernel, const std::string& label, F&& body) {
  Result r;
  r.kernel = kernel;
  r.label = label;
  try {
    body(r);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

Result check_add(Backend& b, const package::Manifest& m, const std::string& entry, int n) {
  return run_case(entry, "n=" + std::to_string(n) + ", all args at non-zero offsets of one buffer", [&](Result& r) {
    Rng rng{uint64_t(n)};
    std::vector<float> a = rng.vec(size_t(n)), c = rng.vec(size_t(n));
    Layout l;
    size_t ra = l.add(size_t(n) * 4), rb = l.add(size_t(n) * 4), ro = l.add(size_t(n) * 4);
    Arena ar(b, l, "add_f32 check");
    ar.put(ra, a.data(), a.size() * 4);
    ar.put(rb, c.data(), c.size() * 4);
    std::vector<Arg> args = {ar.memref(ra, n), ar.memref(rb, n), ar.memref(ro, n), i32(n)};
    b.launch(b.kernel_index(entry), grid_of(m, entry, {{"n", n}}), 0, args);
    std::vector<uint8_t> out = ar.all();
    std::vector<float> y = floats(out, l.regions[ro].offset, size_t(n));
    for (int i = 0; i < n; ++i) {
      double ref = double(a[size_t(i)]) + double(c[size_t(i)]);
      compare(r, y[size_t(i)], ref, 1e-6 * std::fabs(ref));
    }
    r.bad += check_gaps(l, out);
    r.tolerance = "1e-6 relative; sentinel gaps intact";
  });
}

Result check_rms_norm(Backend& b, const package::Manifest& m, const std::string& entry, int rows, int d) {
  return run_case(entry, "rows=" + std::to_string(rows) + " d=" + std::to_string(d) + ", args at non-zero offsets",
                  [&](Result& r) {
                    Rng rng{uint64_t(rows * 7919 + d)};
                    std::vector<float> x = rng.vec(size_t(rows) * d, 3.f), g = rng.vec(size_t(d));
                    const float eps = 1e-5f;
                    Layout l;
                    size_t rx = l.add(x.size() * 4), rg = l.add(g.size() * 4), ry = l.add(x.size() * 4);
                    Arena ar(b, l, "rms_norm_f32 check");
                    ar.put(rx, x.data(), x.size() * 4);
                    ar.put(rg, g.data(), g.size() * 4);
                    std::vector<Arg> args = {ar.memref(rx, int64_t(x.size())), ar.memref(rg, d),
                                             ar.memref(ry, int64_t(x.size())), i32(d), f32(eps)};
                    b.launch(b.kernel_index(entry), grid_of(m, entry, {{"rows", rows}, {"T", rows}}), 0, args);
                    std::vector<uint8_t> out = ar.all();
                    std::vector<float> y = floats(out, l.regions[ry].offset, x.size());
                    for (int row = 0; row < rows; ++row) {
                      double ss = 0;
                      for (int i = 0; i < d; ++i) ss += double(x[size_t(row) * d + i]) * x[size_t(row) * d + i];
                      const double scale = 1.0 / std::sqrt(ss / d + eps);
                      for (int i = 0; i < d; ++i) {
                        double ref = x[size_t(row) * d + i] * scale * g[size_t(i)];
                        compare(r, y[size_t(row) * d + i], ref, 2e-5 * std::fabs(ref) + 1e-6);
                      }
                    }
                    r.bad += check_gaps(l, out);
                    r.tolerance = "2e-5 relative + 1e-6; sentinel gaps intact";
                  });
}

/// matmul_<type>(w, x, y, bias, res, N, K, T, flags): y = x W^T (+ bias) (+ res).
Result check_gemv(Backend& b, const package::Manifest& m, const package::Kernel& k, ggml::Type type, int N, int K, int T,
                  int flags, bool x_f16 = false) {
  const std::string label = "N=" + std::to_string(N) + " K=" + std::to_string(K) + " T=" + std::to_string(T) +
                            (flags & 1 ? " +bias" : "") + (flags & 2 ? " +res" : "") + ", args at non-zero offsets";
  return run_case(k.entry, label, [&](Result& r) {
    const int idx = b.kernel_index(k.entry);
    std::vector<ArgSpec> spec;
    for (const auto& s : k.signature) spec.push_back(parse_arg_type(s.at("dtype").get<std::string>()));
    if (spec.size() != 9) throw Error("unexpected signature for a GEMV (" + std::to_string(spec.size()) + " arguments)");
    Rng rng{uint64_t(N * 31 + K * 7 + T)};
    std::vector<float> wf = rng.vec(size_t(N) * K);
    const size_t row_bytes = ggml::row_size(type, K);
    std::vector<uint8_t> w(row_bytes * N);
    for (int n = 0; n < N; ++n) ggml::quantize_row(type, &wf[size_t(n) * K], &w[size_t(n) * row_bytes], K);
    std::vector<float> wd(size_t(N) * K);  // the weights the kernel sees
    for (int n = 0; n < N; ++n) ggml::dequantize_row(type, &w[size_t(n) * row_bytes], &wd[size_t(n) * K], K);
    w.resize((w.size() + 3) & ~size_t(3), 0);  // the tensor's bytes, zero-padded to whole words
    std::vector<float> x = rng.vec(size_t(T) * K), bias = rng.vec(size_t(N)), res = rng.vec(size_t(T) * N);
    Layout l;
    size_t rw = l.add(w.size()), rx = l.add(x.size() * 4), ry = l.add(size_t(T) * N * 4), rbias = l.add(bias.size() * 4),
           rres = l.add(res.size() * 4);
    Arena ar(b, l, "GEMV check");
    ar.put(rw, w.data(), w.size());
    ar.put(rx, x.data(), x.size() * 4);
    ar.put(rbias, bias.data(), bias.size() * 4);
    ar.put(rres, res.data(), res.size() * 4);
    std::vector<Arg> args = {ar.memref(rw, int64_t(w.size() / spec[0].elem_bytes)),
                             ar.memref(rx, int64_t(x.size() * 4 / spec[1].elem_bytes)),
                             ar.memref(ry, int64_t(T) * N),
                             ar.memref(rbias, N),
                             ar.memref(rres, int64_t(T) * N),
                             i32(N),
                             i32(K),
                             i32(T),
                             i32(flags)};
    b.launch(idx, grid_of(m, k.entry, {{"N", N}, {"K", K}, {"T", T}}), 0, args);
    std::vector<uint8_t> out = ar.all();
    std::vector<float> y = floats(out, l.regions[ry].offset, size_t(T) * N);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        double ref = 0, mag = 0;
        for (int i = 0; i < K; ++i) {
          const double p = double(x[size_t(t) * K + i]) * wd[size_t(n) * K + i];
          ref += p;
          mag += std::fabs(p);
        }
        if (flags & 1) ref += bias[size_t(n)], mag += std::fabs(bias[size_t(n)]);
        if (flags & 2) ref += res[size_t(t) * N + n], mag += std::fabs(res[size_t(t) * N + n]);
        compare(r, y[size_t(t) * N + n], ref, (x_f16 ? 6e-4 : 1e-4) * mag + 1e-6);
      }
    r.bad += check_gaps(l, out);
    // (x_f16: the kernel rounds the activations to f16 first, up to 2^-11 of each term.)
    r.tolerance = std::string(x_f16 ? "6e-4" : "1e-4") + " x sum|terms| + 1e-6; sentinel gaps intact";
  });
}

/// Splits "ceil(N/4), ceil(T/8), 1" at top-level commas.
std::vector<std::string> split_grid(const std::string& s) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

}  // namespace

std::array<uint32_t, 3> grid_of(const package::Manifest& m, const std::string& entry,
                                const std::vector<std::pair<std::string, double>>& vals) {
  const package::Kernel* k = m.find_kernel(entry);
  if (!k) throw Error("no kernel " + entry + " in the package");
  const nlohmann::json& g = k->launch.contains("grid") ? k->launch["grid"] : nlohmann::json();
  std::vector<std::string> parts;
  if (g.is_string())
    parts = split_grid(g.get<std::string>());
  else if (g.is_array())
    for (const auto& e : g) parts.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  if (parts.size() != 3) throw Error("kernel " + entry + ": launch.grid is not three expressions: " + g.dump());
  std::vector<std::string> names;
  std::vector<double> values;
  for (const auto& [n, v] : vals) {
    names.push_back(n);
    values.push_back(v);
  }
  std::array<uint32_t, 3> grid{};
  for (int i = 0; i < 3; ++i) {
    try {
      grid[size_t(i)] = uint32_t(package::Expr::parse(parts[size_t(i)], names).as_int(values.data(), "grid"));
    } catch (const package::ExprError& e) {
      throw Error("kernel " + entry + ": launch.grid[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return grid;
}

std::vector<Result> run_checks(Backend& b, const package::Manifest& m) {
  std::vector<Result> results;
  if (const package::Kernel* k = find(m, "add_f32")) {
    results.push_back(check_add(b, m, k->entry, 100003));
    results.push_back(check_add(b, m, k->entry, 7));
  }
  if (const package::Kernel* k = find(m, "rms_norm_f32")) {
    results.push_back(check_rms_norm(b, m, k->entry, 5, 576));
    results.push_back(check_rms_norm(b, m, k->entry, 2, 1000));
  }
  for (const package::Kernel& k : m.kernels) {
    const std::string fn = k.launch.is_object() ? k.launch.value("function", "") : "";
    if (fn.rfind("matmul_", 0) != 0) continue;
    // matmul_<type>, and F16's tensor-core GEMVs matmul_f16_mma[_w16] (the same contract;
    // the int8 matmul_<type>_q8x read quantize_q8_x's scratches instead: not checked here).
    std::string tname = fn.substr(7);
    bool x_f16 = false;
    for (const std::string suffix : {"_mma_w16", "_mma"})
      if (tname.size() > suffix.size() && tname.compare(tname.size() - suffix.size(), suffix.size(), suffix) == 0) {
        tname.resize(tname.size() - suffix.size());
        x_f16 = true;
        break;
      }
    ggml::Type type;
    if (!ggml::type_from_name(tname, &type)) continue;
    const int K = ggml::type_info(type).block_size > 32 ? 512 : 576;
    results.push_back(check_gemv(b, m, k, type, 301, K, 1, 0, x_f16));
    results.push_back(check_gemv(b, m, k, type, 301, K, 3, 3, x_f16));
  }
  return results;
}

std::string format_table(const std::vector<Result>& results) {
  size_t wk = 6, wl = 5;
  for (const Result& r : results) wk = std::max(wk, r.kernel.size()), wl = std::max(wl, r.label.size());
  std::string out;
  char line[1024];
  for (const Result& r : results) {
    if (!r.error.empty())
      std::snprintf(line, sizeof line, "FAIL %-*s  %-*s  %s\n", int(wk), r.kernel.c_str(), int(wl), r.label.c_str(),
                    r.error.c_str());
    else
      std::snprintf(line, sizeof line, "%s %-*s  %-*s  max |err| %-9.3g %lld/%lld bad  (%s)\n", r.ok() ? "ok  " : "FAIL",
                    int(wk), r.kernel.c_str(), int(wl), r.label.c_str(), r.max_err, (long long)r.bad,
                    (long long)r.checked, r.tolerance.c_str());
    out += line;
  }
  return out;
}

}  // namespace swz::backend::check
