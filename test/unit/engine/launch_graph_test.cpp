// The graph executor's launch graphs (exec/executor.h: a pass shape seen twice is
// recorded into a backend launch graph; later passes evaluate only the launches that read
// pos0 / ctx and update those that changed) on the real default model through the cpu
// backend, whose graphs replay the kept launches (backend.h's default implementation):
//  - 3 sequences decoded together for 40 steps, then one of them alone, give logits
//    bitwise equal to the same passes with graphs off (SWZ_GRAPHS=0), every step;
//  - the graphs were really used: one graph per pass shape, created on its second pass,
//    launched on every later one, its dynamic launches updated as positions advance;
//  - a multi-sequence pass puts each sequence's attention launches on its own branch
//    (backend::LaunchDesc::branch), and graph_dependencies forks and joins at them;
//  - the default graphs' errors: an unknown graph, an index past the end, another kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "exec/executor.h"
#include "package/package.h"
#include "require_package.h"

namespace swz::exec {
namespace {

/// A backend that forwards to the cpu backend and counts the launch-graph calls (the
/// graphs themselves are Backend's default: kept launches replayed through launch()).
class CountingBackend final : public backend::Backend {
 public:
  /// `as`: the backend name info() reports (not "cpu": the executor then sets a replayed
  /// graph's dynamic launches for the next step right after launching it, as on a GPU).
  CountingBackend(std::unique_ptr<backend::Backend> be, const std::string& as) : be_(std::move(be)), info_(be_->info()) {
    info_.backend = as;
  }
  int created = 0, updated = 0, launched_graphs = 0, launches = 0;
  const backend::DeviceInfo& info() const override { return info_; }
  void load_kernels(const package::Manifest& m, const std::string& dir) override { be_->load_kernels(m, dir); }
  int kernel_index(const std::string& entry) const override { return be_->kernel_index(entry); }
  backend::Buffer alloc(size_t bytes, const std::string& what) override { return be_->alloc(bytes, what); }
  void free(backend::Buffer b) override { be_->free(b); }
  void upload(backend::Buffer dst, size_t off, const void* src, size_t n) override { be_->upload(dst, off, src, n); }
  void download(void* dst, backend::Buffer src, size_t off, size_t n) override { be_->download(dst, src, off, n); }
  void copy(backend::Buffer d, size_t doff, backend::Buffer s, size_t soff, size_t n) override { be_->copy(d, doff, s, soff, n); }
  void fill32(backend::Buffer d, size_t off, size_t n, uint32_t p) override { be_->fill32(d, off, n, p); }
  void launch(int k, std::array<uint32_t, 3> grid, uint32_t smem, std::span<const backend::Arg> args) override {
    ++launches;
    be_->launch(k, grid, smem, args);
  }
  void synchronize() override { be_->synchronize(); }
  /// Per created graph: how many of its launches are on each branch (LaunchDesc::branch).
  std::vector<std::map<int, int>> branches;
  int create_graph(std::span<const backend::LaunchDesc> l) override {
    ++created;
    branches.emplace_back();
    for (const backend::LaunchDesc& d : l) ++branches.back()[d.branch];
    return Backend::create_graph(l);
  }
  void update_graph(int g, size_t i, const backend::LaunchDesc& l) override {
    ++updated;
    Backend::update_graph(g, i, l);
  }
  void launch_graph(int g) override {
    ++launched_graphs;
    Backend::launch_graph(g);
  }

 private:
  std::unique_ptr<backend::Backend> be_;
  backend::DeviceInfo info_;
};

struct Opened {
  std::unique_ptr<GraphExecutor> ex;
  CountingBackend* be = nullptr;
};

Opened open(const package::LoadedPackage& pkg, bool graphs, bool ahead = false) {
  setenv("SWZ_GRAPHS", graphs ? "1" : "0", 1);
  auto counting = std::make_unique<CountingBackend>(backend::create_backend("cpu", "", 2), ahead ? "cpu-as-async" : "cpu");
  Opened r;
  r.be = counting.get();
  ExecutorOptions o;
  o.max_rows = 64, o.max_seqs = 4, o.n_ctx = 256, o.n_pages = 16;
  r.ex = std::make_unique<GraphExecutor>(pkg, std::move(counting), o);
  unsetenv("SWZ_GRAPHS");
  return r;
}

struct Seq {
  std::vector<int32_t> tokens;  // this step's
  int pos0 = 0;
  std::vector<int> pages;
};

/// One forward pass of `seqs` (each its tokens at pos0), logits of every row.
std::vector<float> step(GraphExecutor& ex, std::vector<Seq>& seqs, SequenceModel::Rows rows) {
  std::vector<SequenceStep> steps;
  for (Seq& s : seqs) {
    SequenceStep st;
    st.tokens = s.tokens.data();
    st.n_tokens = static_cast<int>(s.tokens.size());
    st.pos0 = s.pos0;
    st.block_table = s.pages.data();
    st.n_blocks = (s.pos0 + st.n_tokens + 63) / 64;
    st.n_out = rows == SequenceModel::Rows::Generated ? st.n_tokens : 1;
    st.rows = rows;
    steps.push_back(st);
  }
  std::vector<float> logits;
  ex.forward(steps, logits);
  return logits;
}

/// The decode steps of the test below; `ahead`: the executor sets each replayed graph's
/// dynamic launches for the next step while it runs (replay(): GPU backends), and one step
/// comes at other positions than that (a sequence rewound by 3, as after rejected draft
/// tokens), so the graph must be set again for it.
void decodeSteps(bool ahead) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Opened on = open(pkg, true, ahead), off = open(pkg, false);
  const int n_vocab = on.ex->n_vocab();
  // Three prompts of different lengths; pages 4k..4k+3 for sequence k (up to 256 positions).
  std::vector<Seq> seqs(3);
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 20 + 17 * k; ++i) seqs[k].tokens.push_back(1 + (i * 37 + k * 11) % 400);
    for (int p = 0; p < 4; ++p) seqs[k].pages.push_back(4 * k + p);
  }
  auto prefill = [&](GraphExecutor& ex, std::vector<Seq> s) {
    std::vector<int32_t> next;
    for (Seq& q : s) {
      std::vector<Seq> one = {q};
      const std::vector<float> l = step(ex, one, SequenceModel::Rows::Prompt);
      next.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    }
    return next;
  };
  const std::vector<int32_t> first_on = prefill(*on.ex, seqs), first_off = prefill(*off.ex, seqs);
  ASSERT_EQ(first_on, first_off);
  for (int k = 0; k < 3; ++k) {
    seqs[k].pos0 = static_cast<int>(seqs[k].tokens.size());
    seqs[k].tokens = {first_on[k]};
  }
  const int on_before = on.be->launches, off_before = off.be->launches;
  // 40 steps of the three together (past a page boundary: positions 20..96), then 10 of
  // the first alone: two pass shapes.
  for (int t = 0; t < 50; ++t) {
    if (ahead && t == 45) seqs[0].pos0 -= 3;
    std::vector<Seq> batch = t < 40 ? seqs : std::vector<Seq>{seqs[0]};
    const std::vector<float> a = step(*on.ex, batch, SequenceModel::Rows::Generated);
    const std::vector<float> b = step(*off.ex, batch, SequenceModel::Rows::Generated);
    ASSERT_EQ(a.size(), batch.size() * n_vocab);
    ASSERT_EQ(a, b) << "step " << t << ": logits differ with launch graphs";
    for (size_t k = 0; k < batch.size(); ++k) {
      const auto row = a.begin() + static_cast<ptrdiff_t>(k * n_vocab);
      seqs[k].tokens = {static_cast<int32_t>(std::max_element(row, row + n_vocab) - row)};
      seqs[k].pos0 += 1;
    }
  }
  // Each shape: launched one by one on its first pass, recorded on its second, replayed after.
  EXPECT_EQ(on.be->created, 2);
  EXPECT_EQ(on.be->launched_graphs, 39 + 9);
  EXPECT_EQ(off.be->created, 0);
  // The 3-sequence shape's attention launches (sequence scope) are one branch per
  // sequence, one launch a layer each on the cpu package; everything else is branch 0.
  // The single-sequence shape has no branches.
  const int n_layer_ = pkg.manifest.graph.at("hparams").at("n_layer").get<int>();
  ASSERT_EQ(on.be->branches.size(), 2u);
  EXPECT_EQ(on.be->branches[0].size(), 4u);
  for (int b = 1; b <= 3; ++b) EXPECT_EQ(on.be->branches[0][b], n_layer_) << "branch " << b;
  EXPECT_EQ(on.be->branches[1].size(), 1u);
  EXPECT_EQ(on.be->branches[1].count(0), 1u);
  // Attention reads ctx: its launches were updated each replayed step (3 sequences x
  // layers x the dynamic launches of a layer, at least one per sequence and layer).
  const int n_layer = pkg.manifest.graph.at("hparams").at("n_layer").get<int>();
  EXPECT_GE(on.be->updated, 38 * 3 * n_layer + 8 * n_layer);
  // As many kernels ran, replayed or not.
  EXPECT_EQ(on.be->launches - on_before, off.be->launches - off_before);
}

TEST(LaunchGraphs, DecodeStepsEqualLaunchByLaunchAndReuseOneGraphPerShape) { decodeSteps(false); }

TEST(LaunchGraphs, NextStepSetAheadEqualsLaunchByLaunchAlsoWhenPositionsJump) { decodeSteps(true); }

// A sequence of more rows than the executor's max_rows is refused before any of its rows
// is staged (each sequence's position slots hold max_rows: a 2,092-row pass at max_rows
// 512 corrupted the heap of swz-backend-compare instead of throwing), and the executor
// runs the next pass as before.
TEST(LaunchGraphs, APassOverMaxRowsIsRefusedAndTheExecutorKeepsRunning) {
  REQUIRE_PACKAGE(path);
  const package::LoadedPackage pkg = package::open_package(path);
  Opened on = open(pkg, true);
  std::vector<Seq> seqs(1);
  for (int i = 0; i < 100; ++i) seqs[0].tokens.push_back(1 + i);
  for (int p = 0; p < 2; ++p) seqs[0].pages.push_back(p);
  try {
    step(*on.ex, seqs, SequenceModel::Rows::Prompt);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "forward: 100 rows, at most 64");
  }
  seqs[0].tokens.resize(10);
  const std::vector<float> logits = step(*on.ex, seqs, SequenceModel::Rows::Prompt);
  EXPECT_EQ(logits.size(), static_cast<size_t>(on.ex->n_vocab()));
}

// backend::graph_dependencies: what each launch waits for, from the branches.
TEST(LaunchGraphs, DependenciesForkAtBranchesAndJoinAtTheNextBranchZeroLaunch) {
  std::vector<backend::LaunchDesc> l(9);
  //          0  1  2  3  4  5  6  7  8
  int br[] = {0, 0, 1, 2, 1, 2, 0, 3, 3};
  for (size_t i = 0; i < l.size(); ++i) l[i].branch = br[i];
  const std::vector<std::vector<int>> d = backend::graph_dependencies(l);
  const std::vector<std::vector<int>> want = {{}, {0}, {1}, {1}, {2}, {3}, {4, 5}, {6}, {7}};
  EXPECT_EQ(d, want);
  // A graph whose first launch is on a branch, and one with no branches: a chain.
  std::vector<backend::LaunchDesc> f(2);
  f[0].branch = 5;
  EXPECT_EQ(backend::graph_dependencies(f), (std::vector<std::vector<int>>{{}, {0}}));
  std::vector<backend::LaunchDesc> c(3);
  EXPECT_EQ(backend::graph_dependencies(c), (std::vector<std::vector<int>>{{}, {0}, {1}}));
}

TEST(LaunchGraphs, DefaultGraphsRefuseUnknownGraphsIndicesAndKernels) {
  auto be = backend::create_backend("cpu", "", 1);
  backend::LaunchDesc l;
  l.kernel = 3;
  const int g = be->create_graph(std::vector<backend::LaunchDesc>{l, l});
  EXPECT_THROW(be->update_graph(g + 1, 0, l), backend::Error);
  EXPECT_THROW(be->update_graph(g, 2, l), backend::Error);
  backend::LaunchDesc other = l;
  other.kernel = 4;
  try {
    be->update_graph(g, 1, other);
    FAIL() << "expected backend::Error";
  } catch (const backend::Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs kernel 3, not 4"), std::string::npos) << e.what();
  }
  be->destroy_graph(g);
  EXPECT_THROW(be->launch_graph(g), backend::Error);
  // A freed id is reused.
  EXPECT_EQ(be->create_graph(std::vector<backend::LaunchDesc>{l}), g);
}

}  // namespace
}  // namespace swz::exec
