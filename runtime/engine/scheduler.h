// The serving core's scheduler: continuous batching with chunked prefill over one
// exec::BatchModel (the graph executor, on the cpu, cuda or vulkan backend). No JSON, no
// HTTP.
//
// Requests: admit() validates nothing (the engine did) but counts the admission against the
// limits and pins the prompt's cached prefix; run() / run_choices() submit it and then, on
// the caller's thread, read the request's event queue (tokens, "prefill done", each
// choice's end) and call the caller's callbacks, polling its cancel check between events
// (waiting on a condition variable, or through the admission's EventWait: then the step thread
// notifies the caller of each event and run()'s caller decides how to wait, e.g. the server
// suspends a fiber, so that no thread is held per request). Generation itself runs
// on the scheduler's own thread, one step (forward pass) at a time:
//
//   1. start waiting requests, oldest first, while their running slots are free (one per
//      choice running at once, `parallel` in all) and the KV page pool can hold what each
//      may need (its prompt plus max_tokens, capped by the context, plus one page for
//      copy-on-write; plus each further choice's own pages): a running sequence never
//      loses a page and never waits for one; a request that does not fit waits (FIFO, no
//      overtaking);
//   2. build the step: every decoding sequence's pending token (plus its prompt-lookup
//      draft, verified in the same pass), then prompt tokens of prefilling sequences in
//      arrival order up to `batch_tokens` rows (chunked prefill: a long prompt takes many
//      steps while the others keep decoding);
//   3. make the pages each sequence writes exist and be its own (copy-on-write of pages
//      shared with the prefix cache), run one forward pass, sample / verify per sequence,
//      send tokens to the requests' queues, retire finished and cancelled sequences (their
//      pages go back at once).
//
// Choices (GenerateRequest::n > 1): a request is admitted once and its prompt prefilled
// once, by choice 0's sequence. When prefill ends, a fork point keeps the prompt's block
// table (one page reference each: kvcache's refcounts, the same ones the prefix cache
// holds, so a shared page is freed only when no sequence, fork point or cached block
// holds it) and the last prompt row's logits (or device argmax id); choices 1..n-1 start
// from it as sequences of their own, each sampling its first token from that row with its
// own sampler (seeded choice_seed(seed, i)). Full prompt pages stay shared; the partial
// last page is copied on the first write of every sequence but the last to write it
// (prepare_pages' copy-on-write through BatchModel::copy_page, the backend's
// device-to-device copy). A request with n choices holds `width` running slots (at most
// `parallel`) and reserves pages for its prompt once plus `width` choices' own generated
// tokens; when the pool or the slots cannot run all n at once, the choices run in waves
// of `width`, each new one starting from the fork point as an earlier one ends.
//
// The `approx` cache mode (GenerateRequest::approx_atoms; experimental): admit() finds, for
// each code atom after the cached prefix, K/V an earlier approx request saved for the same
// tokens (kvcache::AtomStore: where that K/V lies in the prefix cache's blocks, pinned from
// here), and plans to install it: while prefilling, the sequence's prompt segments stop at
// each planned atom's recomputed head; when the cursor reaches the rest of the atom, its
// K/V is moved into the sequence's pages (exec::BatchModel::move_kv: K re-rotated to the
// new positions) and the cursor jumps past it. With ApproxSelect::Deviation the head is the
// atom's first kApproxMinRecompute tokens, and before its first install the sequence is
// probed (probe_atoms: kApproxProbeLayers layers over the rest of its prompt) to choose
// which other tokens of each atom are prefilled again, right after its install, as prompt
// segments of their own (Install::runs, Seq::again). The segments between installs go into one
// pass up to the batch budget, a sequence of the pass each (kApproxSegmentSlots). Approx
// requests key their prefix-cache blocks in a namespace of their own (a model key derived
// from the model's), and record each atom their prefill computed when it ends.
//
// Saved atoms are keyed by their tokens and the request's cache scope (GenerateRequest::
// cache_scope), so they are reused only within the scope that computed them.
//
// Per-sequence state (block table, token history, sampler, drafter, grammar matcher, stop
// conditions) lives here, not in the model. A constrained request (GenerateRequest::grammar)
// samples and verifies every row under its matcher's mask (grammar/matcher.h) and ends with
// Stop once the matcher says the text is complete. Exactness: prompt rows always run as Rows::Prompt and generated
// rows (decode and verification) as Rows::Generated whatever the batch holds, and the
// backends compute a row independently of the other rows and sequences of the pass
// (batch invariance: executor.h, docs/package-format.md), so a request's greedy output does not
// depend on what it is batched with or how its prompt is chunked.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/step_cost.h"
#include "exec/batch_model.h"
#include "grammar/matcher.h"
#include "kvcache/atom_store.h"
#include "kvcache/block_manager.h"

namespace swz::backend {
class Error;
}

namespace swz::engine {

struct SchedulerOptions {
  int n_ctx = 4096;          ///< longest sequence (positions)
  int parallel = 8;          ///< running sequences at most (<= model.max_seqs())
  int batch_tokens = 512;    ///< rows per step (<= model.max_rows(), >= parallel)
  int max_queue = 64;        ///< outstanding admissions beyond `parallel` before Overloaded
  bool speculative = true;   ///< default for requests that do not choose
  int spec_draft_max = 16;   ///< upper bound of the draft length
  /// Draft pricing (step_cost.h): a step takes a greedy sequence's draft token only when
  /// its estimated acceptance beats what a row costs against the step's tokens per second,
  /// from a fit of the measured step times (sampled sequences keep every draft: their
  /// seeded text depends on them). false: every token the drafter proposes.
  bool spec_pricing = true;
};

/// What the scheduler needs from the tokenizer and the engine.
struct SchedulerHooks {
  std::function<bool(int32_t)> is_eog;          ///< token ends generation (not emitted)
  std::function<std::string(int32_t)> piece;    ///< TokenEvent::piece of a token
  std::function<void(const std::string&)> failed;  ///< the device failed (backend::Error); the engine records it
  /// The vocabulary's byte trie for grammar-constrained requests (GenerateRequest::grammar);
  /// called on the step thread when such a request starts, so it should be built already.
  std::function<std::shared_ptr<const grammar::Vocabulary>()> vocab;
};

/// ApproxSelect::Deviation's choice within one installed atom: of its tokens at positions
/// pos0 .. pos0 + dev.size() - 1 with per-token deviations `dev` (any non-negative unit),
/// `budget` tokens (clamped to 0 .. dev.size()) in windows of kApproxSelectWindow tokens
/// (aligned to pos0; the last window may be shorter) taken by the largest sum of deviations
/// first (ties: the earlier window); when the budget ends inside a window, its contiguous
/// `budget` tokens of the largest sum. Returns the chosen positions as sorted,
/// non-adjacent runs (adjacent windows merged), `budget` tokens in all.
std::vector<TokenSpan> select_deviating(std::span<const double> dev, int pos0, int budget);

class Scheduler {
 public:
  /// Starts the step thread. `model` and `kv` must outlive the scheduler. Throws
  /// std::invalid_argument when the options do not fit the model (parallel > max_seqs,
  /// batch_tokens > max_rows or < parallel).
  /// `atoms` (may be null: the approx cache mode then reuses nothing position-independently)
  /// holds the atoms approx requests save and reuse (GenerateRequest::approx_atoms).
  Scheduler(exec::BatchModel& model, kvcache::BlockManager& kv, const SchedulerOptions& opts, SchedulerHooks hooks,
            kvcache::AtomStore* atoms = nullptr);
  /// Stops the step thread; requests still queued or running end with an error.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Counts a (validated) request against parallel + max_queue and pins its cached prompt
  /// prefix (unless prompt_logprobs). Throws Overloaded when the limit is reached.
  std::unique_ptr<Admission> admit(const GenerateRequest& req);
  /// Runs an admission of this scheduler to its end (see the file comment); exceptions of
  /// the model (backend::Error, ...) and of `on_token` propagate. Throws
  /// std::invalid_argument for a foreign or already-run admission.
  GenerateResult run(Admission& a, const TokenCallback& on_token);
  /// Runs every choice of an admission (GenerateRequest::n) to its end on the caller's
  /// thread as run() does (Engine::run_choices: tokens interleaved through `on_token`, each
  /// choice's end through `on_done`, the results in index order). A callback that throws
  /// cancels every choice; its exception propagates once all have ended.
  std::vector<GenerateResult> run_choices(Admission& a, const ChoiceTokenCallback& on_token, const ChoiceDoneCallback& on_done);

  SchedulerStats stats() const;
  SpecStats spec_stats() const;
  /// Prompt tokens served from the prefix cache / prefilled since start.
  uint64_t hit_tokens() const { return hit_tokens_.load(); }
  uint64_t miss_tokens() const { return miss_tokens_.load(); }
  /// Prompt rows evaluated by forward passes since start (prefill chunks; a request with n
  /// choices counts its prompt once).
  uint64_t prefill_rows() const { return prefill_rows_.load(); }
  /// The model key approx requests' prefix-cache blocks are keyed under (block_keys with
  /// it name their blocks; GenerateRequest::approx_atoms). Saved atoms are keyed per cache
  /// scope under another key derived from it.
  const kvcache::BlockKey& approx_model() const { return approx_model_; }

 private:
  struct Job;
  struct Seq;
  class PagedAdmission;
  void loop();
  bool start(Seq& s);
  void init_decoding(Seq& s);
  bool step(std::vector<std::unique_ptr<Seq>>& running);
  bool emit(Seq& s, int32_t t, const float* row, bool& emitted);
  void make_fork(Seq& s, const float* row, int32_t id);
  void tend(std::vector<std::unique_ptr<Seq>>& running, std::vector<std::shared_ptr<Job>>& active);
  void spawn(const std::shared_ptr<Job>& j, std::vector<std::unique_ptr<Seq>>& running);
  void end_unstarted(Job& j, std::exception_ptr e);
  void release_fork(Job& j);
  void finish(Seq& s, FinishReason why);
  void fail(Seq& s, std::exception_ptr e);
  bool prepare_pages(Seq& s, int n_tokens);
  void truncate(Seq& s, int n);
  std::vector<kvcache::BlockKey> prompt_block_keys(Seq& s, size_t n_full);
  void publish_prompt_blocks(Seq& s);
  void publish_prompt_tail(Seq& s);
  void end_prefill_stats(Seq& s);
  /// Moves the next planned atom install's K/V into `s`'s pages from position `begin` on:
  /// Done; Waiting when its pages cannot be had now; Dropped when its source blocks cannot
  /// come back to the device (its tokens are then prefilled).
  enum class Installed { Done, Waiting, Dropped };
  Installed install_atom(Seq& s, int begin);
  /// ApproxSelect::Deviation, before a sequence's first install: the first
  /// kApproxProbeLayers layers of the prompt after s.n_past (exec::BatchModel::
  /// forward_layers, through its pages, which it prepares), within `budget` full rows a
  /// step (the step's prompt-row budget; a probe row costs kApproxProbeLayers / n_layer of
  /// one: a long prompt's probe takes several steps, so the running sequences' decode goes
  /// on between them; Seq::probe_pos), in passes of at most max_rows, then, once it has
  /// reached the last install, for each planned install with Install::extra tokens to
  /// choose, its runs (select_deviating over the per-token squared error of layer
  /// kApproxProbeLayers - 1's K/V, the saved atom's K re-rotated as install_atom moves it,
  /// against the fresh) and Seq::probed. Returns the full rows of the budget it used this
  /// step (its probe rows' share, rounded up; at most `budget`), or -1 when its pages
  /// cannot be had now. Throws what the model throws.
  int probe_atoms(Seq& s, int budget);
  /// The device failed (`e`, being handled: its exception is current): the engine hears of
  /// it (SchedulerHooks::failed) and every running sequence ends with it. Returns false
  /// (step()'s answer: the step thread stops).
  bool device_failed(std::vector<std::unique_ptr<Seq>>& running, const backend::Error& e);
  void save_atoms(Seq& s);
  int pages_needed(const GenerateRequest& req, int width = 1, bool partial_hit = false) const;
  int choice_width(const GenerateRequest& req, bool partial_hit = false) const;
  void cancel(Job& j);

  exec::BatchModel& model_;
  kvcache::BlockManager& kv_;
  kvcache::AtomStore* atoms_ = nullptr;
  kvcache::BlockKey approx_model_;  // the approx mode's cache namespace (GenerateRequest::approx_atoms)
  SchedulerOptions opts_;
  SchedulerHooks hooks_;
  int n_vocab_ = 0;
  int pages_total_ = 0;
  int reserved_pages_ = 0;  // step thread only
  int held_slots_ = 0;      // step thread only: running slots held by started requests

  StepCostModel cost_;  // step thread only: step seconds against rows (draft pricing)
  mutable std::mutex mu_;  // waiting_, stop_, stats below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> waiting_;
  bool stop_ = false;
  bool wake_ = false;  // a waiting job was cancelled
  std::atomic<int> admitted_{0};
  std::atomic<int> running_n_{0};
  std::atomic<uint64_t> hit_tokens_{0}, miss_tokens_{0}, prefill_rows_{0}, probe_passes_{0}, probe_rows_{0};
  // stats (mu_)
  uint64_t rejected_ = 0, steps_ = 0, step_rows_ = 0, step_seqs_ = 0;
  std::vector<uint64_t> step_s_counts_, batch_seqs_counts_, batch_rows_counts_;
  double step_s_sum_ = 0;
  SpecStats spec_;
  std::thread thread_;
};

}  // namespace swz::engine
