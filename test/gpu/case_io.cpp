// swz-case-io: writes the numeric cases of test/gpu/cases.h to files and checks
// results read back from files, so that a runner outside C++ can execute them (today
// test/gpu/simt_interp.py, which interprets PTX-only kernels on the CPU;
// test/python/test_simt_interp.py).
//
//   swz-case-io list  FORMAT MODULE                  one line per case: case<i>, entry, label
//   swz-case-io dump  FORMAT MODULE DIR [case<i>...]  DIR/case<i>/meta.txt and buf<j>.bin
//   swz-case-io check FORMAT MODULE DIR [case<i>...]  reads DIR/case<i>/out<j>.bin, prints
//                                                    each verdict; exit 1 if any case fails
//
// With case names, dump and check only those (i = index in allCases(FORMAT)).
// FORMAT is "ptx" or "spv" (as allCases); MODULE a gpu.module name, e.g.
// swz_attention_f16kv_mma. meta.txt: "<module> <entry>", "<grid x> <y> <z>", "block <x> <y> <z>", then
// "buffer <j> <element bytes> <memref sizes...>" per buffer and "arg m <buffer>" / "arg i <int32>" /
// "arg f <float>" per kernel argument in order. Buffers are raw little-endian bytes.
// Errors (unknown command, unreadable or short output file) exit 2 with a message.
#include "cases.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

int usage() {
  std::fprintf(stderr, "usage: swz-case-io list|dump|check FORMAT MODULE [DIR [case<i>...]]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  using namespace swz::check;
  if (argc < 4)
    return usage();
  const std::string cmd = argv[1], format = argv[2], module = argv[3];
  if ((cmd == "dump" || cmd == "check") && argc < 5)
    return usage();
  if (cmd != "list" && cmd != "dump" && cmd != "check")
    return usage();
  const std::string dir = argc > 4 ? argv[4] : "";
  const std::vector<std::string> only(argv + std::min(argc, 5), argv + argc);
  std::vector<Case> cases = allCases(format);
  int failed = 0, n = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    const std::string name = "case" + std::to_string(i);
    if (c.module != module ||
        (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()))
      continue;
    ++n;
    const std::string d = dir + "/case" + std::to_string(i);
    if (cmd == "list") {
      std::printf("case%zu %s %s\n", i, c.entry.c_str(), c.label.c_str());
    } else if (cmd == "dump") {
      std::filesystem::create_directories(d);
      std::ofstream meta(d + "/meta.txt");
      meta << c.module << " " << c.entry << "\n"
           << c.grid[0] << " " << c.grid[1] << " " << c.grid[2] << "\n"
           << "block " << c.block[0] << " " << c.block[1] << " " << c.block[2] << "\n";
      for (size_t b = 0; b < c.buffers.size(); ++b) {
        std::ofstream(d + "/buf" + std::to_string(b) + ".bin", std::ios::binary)
            .write(reinterpret_cast<const char *>(c.buffers[b].bytes.data()),
                   std::streamsize(c.buffers[b].bytes.size()));
        meta << "buffer " << b << " " << c.buffers[b].elemBytes;
        for (int64_t d : c.buffers[b].sizes)
          meta << " " << d;
        meta << "\n";
      }
      for (const Arg &a : c.args) {
        if (a.kind == Arg::Memref) {
          meta << "arg m " << a.buffer << "\n";
        } else if (a.kind == Arg::I32) {
          meta << "arg i " << a.i32 << "\n";
        } else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.9g", double(a.f32));
          meta << "arg f " << buf << "\n";
        }
      }
      std::printf("case%zu %s %s\n", i, c.entry.c_str(), c.label.c_str());
    } else {
      std::vector<std::vector<uint8_t>> out;
      for (size_t b = 0; b < c.buffers.size(); ++b) {
        const std::string path = d + "/out" + std::to_string(b) + ".bin";
        std::ifstream in(path, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        const std::string s = ss.str();
        if (!in || s.size() != c.buffers[b].bytes.size()) {
          std::fprintf(stderr, "error: %s: expected %zu bytes, read %zu\n", path.c_str(),
                       c.buffers[b].bytes.size(), s.size());
          return 2;
        }
        out.emplace_back(s.begin(), s.end());
      }
      Verdict v = c.check(out);
      std::printf("%s case%zu %s.%s %s: max |err| %.3g, %lld of %lld outside tolerance (%s)\n",
                  v.bad ? "FAIL" : "ok  ", i, c.module.c_str(), c.entry.c_str(), c.label.c_str(),
                  v.maxErr, static_cast<long long>(v.bad), static_cast<long long>(v.checked),
                  v.note.c_str());
      failed += v.bad > 0;
    }
  }
  if (n == 0) {
    std::fprintf(stderr, "error: no %s case for module %s%s\n", format.c_str(), module.c_str(),
                 only.empty() ? "" : " with those names");
    return 2;
  }
  return failed ? 1 : 0;
}
