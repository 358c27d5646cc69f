#include "engine/scheduler.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <cmath>
#include <stdexcept>

#include "backend/backend.h"
#include "engine/logprobs.h"
#include "engine/prompt_lookup.h"
#include "engine/sampler.h"
#include "ggml/fp16.h"

namespace swz::engine {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

/// Prefill chunk of a request that wants every prompt row's logits (prompt logprobs):
/// bounds the logits of one step to 64 rows per such sequence.
constexpr int kPromptLogprobsChunk = 64;
constexpr int kTok = kvcache::kBlockTokens;

const std::vector<double>& step_seconds_bounds() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12};
  return b;
}
const std::vector<double>& batch_seqs_bounds() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64};
  return b;
}
const std::vector<double>& batch_rows_bounds() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return b;
}
// The mask of a constrained sequence's next token (null: unconstrained, or nothing allowed).
template <class S>
const uint64_t* grammar_mask_of(S& s) {
  if (!s.matcher) return nullptr;
  const uint64_t* m = s.matcher->mask();
  const size_t words = s.matcher->vocab().n_words();
  for (size_t w = 0; w < words; ++w)
    if (m[w]) return m;
  return nullptr;
}
void observe(std::vector<uint64_t>& counts, const std::vector<double>& bounds, double v) {
  ++counts[static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin())];
}

/// Where a saved atom's tokens j0 .. j0 + n - 1 lie: appends to `out`, in token order, one
/// run per piece that holds some of them (its page from `pages`, the piece's page ids in
/// order; its first slot; the count). Allocates nothing when `out` has room for one run a
/// piece (callers reserve it before they take page references).
void atom_slots(const kvcache::AtomRef& atom, std::span<const int> pages, int j0, int n,
                std::vector<exec::BatchModel::KvRun>& out) {
  int j = 0;  // atom token at the piece's first slot
  for (size_t pi = 0; pi < atom.pieces.size(); ++pi) {
    const kvcache::AtomRef::Piece& pc = atom.pieces[pi];
    const int k0 = std::max(0, j0 - j), k1 = std::min(pc.n, j0 + n - j);
    if (k1 > k0) out.push_back({pages[pi], pc.slot0 + k0, k1 - k0});
    j += pc.n;
  }
}

}  // namespace

std::vector<TokenSpan> select_deviating(std::span<const double> dev, int pos0, int budget) {
  const int n = static_cast<int>(dev.size());
  budget = std::clamp(budget, 0, n);
  const int w = kApproxSelectWindow, windows = (n + w - 1) / w;
  std::vector<double> score(static_cast<size_t>(windows), 0.0);
  for (int t = 0; t < n; ++t) score[static_cast<size_t>(t / w)] += dev[static_cast<size_t>(t)];
  std::vector<int> order(static_cast<size_t>(windows));
  for (int i = 0; i < windows; ++i) order[static_cast<size_t>(i)] = i;
  // Largest sum first; ties to the earlier window.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
  std::vector<TokenSpan> picked;
  for (int i : order) {
    if (budget <= 0) break;
    int b = i * w, e = std::min(n, b + w);
    if (e - b > budget) {  // the last one: its contiguous `budget` tokens of the largest sum
      int best = b;
      double best_sum = -1;
      for (int o = b; o + budget <= e; ++o) {
        double sum = 0;
        for (int t = o; t < o + budget; ++t) sum += dev[static_cast<size_t>(t)];
        if (sum > best_sum) best_sum = sum, best = o;
      }
      b = best, e = best + budget;
    }
    picked.push_back({pos0 + b, pos0 + e});
    budget -= e - b;
  }
  std::sort(picked.begin(), picked.end(), [](const TokenSpan& a, const TokenSpan& b) { return a.begin < b.begin; });
  std::vector<TokenSpan> runs;
  for (const TokenSpan& r : picked) {
    if (!runs.empty() && runs.back().end == r.begin) runs.back().end = r.end;
    else runs.push_back(r);
  }
  return runs;
}

/// An admission of this scheduler: the request, its prompt's block keys and the pinned
/// cached prefix; counted in admitted_ until run() ends or it is destroyed.
class Scheduler::PagedAdmission final : public Admission {
 public:
  PagedAdmission(const GenerateRequest& r, Scheduler& s) : Admission(r, 0), sched(&s) {}
  ~PagedAdmission() override {
    release_pins();
    for (Install& in : installs) release_install(in);
    uncount();
  }
  void set_cached(int n, int approx = 0) {
    cached_tokens_ = n;
    approx_tokens_ = approx;
  }
  void release_pins() {
    if (!pinned.empty()) sched->kv_.unpin(pinned);
    pinned.clear();
  }
  void uncount() {
    if (counted) sched->admitted_.fetch_sub(1);
    counted = false;
  }
  Scheduler* sched;
  /// A planned atom install (the approx mode): positions [begin, end) take `atom`'s K/V
  /// from its token `from` on, out of the prefix-cache blocks `pins` (the atom's pieces'
  /// blocks, pinned from admission until the install or the admission's end). With
  /// ApproxSelect::Deviation, `extra` of those tokens are prefilled again after the install:
  /// `runs` (positions, sorted), chosen by Scheduler::probe_atoms.
  struct Install {
    int begin = 0, end = 0, from = 0;
    int extra = 0;
    std::vector<TokenSpan> runs;
    size_t atom_index = 0;  // in GenerateRequest::approx_atoms
    std::shared_ptr<const kvcache::AtomRef> atom;
    std::vector<kvcache::BlockKey> pins;
  };
  void release_install(Install& in) {
    if (!in.pins.empty()) sched->kv_.unpin(in.pins);
    in.pins.clear();
  }
  kvcache::BlockKey model;                // the cache namespace: the model's key, or the approx mode's
  kvcache::BlockKey atoms;                // approx: the namespace of its scope's saved atoms (atom_key)
  std::string scope;                      // match_partial scope (GenerateRequest::cache_scope; approx: its own)
  std::vector<Install> installs;          // in position order
  std::vector<kvcache::BlockKey> keys;    // the prompt's full-block keys
  int disk_tenant = -1;                   // the request's disk tier (kvcache::BlockManager::disk_tenant), -1: none
  std::vector<kvcache::BlockKey> pinned;  // keys[0 .. matched), then the partial block, while pinned
  int partial = 0;                        // tokens reused from a partial block (the last pinned key)
  bool ran = false;
  bool counted = true;
};

/// A submitted request as its caller's thread and the step thread share it. Every choice
/// ends with exactly one Done or Error event.
struct Scheduler::Job {
  enum class Kind { Token, Prefilled, Done, Error };
  struct Event {
    Kind kind = Kind::Token;
    int choice = 0;
    TokenEvent token{0, {}, std::nullopt};
    std::vector<TokenLogprobs> prompt_logprobs;
    GenerateResult result;
    std::exception_ptr error;
  };
  /// Where choices 1..n-1 start (step thread only): the prompt's block table with one page
  /// reference each, and what choice 0's last prompt row gave.
  struct Fork {
    std::vector<int> table;
    int n_past = 0;
    int reused = 0;
    std::vector<float> logits;  // the last prompt row (empty: `id` is the device argmax)
    int32_t id = -1;
    std::vector<TokenLogprobs> prompt_lp;
    Clock::time_point t_prefilled;
  };
  explicit Job(PagedAdmission& a)
      : adm(a), notify(a.event_wait().notify), submitted(Clock::now()), n(std::max(1, a.request().n)),
        stop_choice(new std::atomic<bool>[static_cast<size_t>(n)]) {
    for (int i = 0; i < n; ++i) stop_choice[i] = false;
  }
  void push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(std::move(e));
    }
    cv.notify_one();
    if (notify) notify();  // a copy: the caller's run() may have returned by now
  }
  /// The caller's cancel check (Admission::set_cancel_check), called from run()'s thread
  /// while the request waits and between tokens, and from the step thread before each
  /// step of the sequence; one call at a time.
  bool poll_cancel() {
    if (cancel) return true;
    std::lock_guard<std::mutex> lock(check_mu);
    if (adm.cancel_requested()) cancel = true;
    return cancel;
  }
  PagedAdmission& adm;
  const std::function<void()> notify;  // Admission::EventWait::notify (empty: the condition variable only)
  Clock::time_point submitted;
  std::mutex check_mu;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  std::atomic<bool> cancel{false};  // every choice stops
  const int n;                      // choices
  std::unique_ptr<std::atomic<bool>[]> stop_choice;  // choice i alone stops (its callback said so)
  // step thread only
  int held = 0;         // running slots held now (at most choice_width: choices running at once)
  int reserve = 0;      // pages reserved
  int live = 0;         // its sequences in the running batch
  int next = 1;         // the next choice to start from the fork point
  bool forked = false;  // `fork` is set
  Fork fork;
  std::exception_ptr error;  // a choice failed: the others end with it
};

/// A running sequence (step thread only).
struct Scheduler::Seq {
  Seq(std::shared_ptr<Job> j, const PromptLookupOptions& lo, int choice)
      : job(std::move(j)), req(job->adm.request()), choice(choice), sampler(sampling_of(req, choice)), lookup(lo) {}
  /// The request's sampling with choice `i`'s seed.
  static SamplingParams sampling_of(const GenerateRequest& r, int i) {
    SamplingParams p = r.sampling;
    p.seed = choice_seed(p.seed, i);
    return p;
  }
  std::shared_ptr<Job> job;
  const GenerateRequest& req;
  int choice = 0;                  // index among the request's choices
  bool stopped() const { return job->cancel || job->stop_choice[choice]; }
  std::vector<int> table;          // block table: position p in table[p / 64]
  int n_past = 0;                  // positions whose K/V are computed
  std::vector<int32_t> history;    // the tokens of positions 0..n_past-1
  int reused = 0;                  // prompt tokens taken from the prefix cache
  int installed = 0;               // prompt tokens whose K/V an atom install wrote (approx mode)
  std::vector<size_t> installed_atoms;  // their GenerateRequest::approx_atoms indices
  size_t next_install = 0;         // the admission's next planned install
  bool probed = false;             // ApproxSelect::Deviation: the installs' runs are chosen
  int probe_pos = -1;              // the probe's next position (-1: not started; probe_atoms)
  std::deque<TokenSpan> again;     // installed atoms' runs (Install::runs) not yet prefilled again
  int prompt_done = 0;             // prompt positions computed when prefill ended (publish_prompt_tail)
  int reserve = 0;                 // pages reserved for this sequence
  bool prefilling = true;
  bool speculative = true;
  bool argmax_ok = false;          // greedy, no penalties, no logprobs: device argmax ids suffice
  int limit = 0;                   // max tokens to emit
  Sampler sampler;
  PromptLookup lookup;
  std::unique_ptr<grammar::Matcher> matcher;  // GenerateRequest::grammar: the allowed tokens
  int32_t pending = -1;            // emitted, not yet in the KV cache
  int completion = 0;
  FinishReason finish = FinishReason::Length;
  bool done = false;
  std::vector<TokenLogprobs> prompt_lp;
  Clock::time_point t_prefilled;
  int drafted = 0, accepted = 0, verify_passes = 0, forward_passes = 0;
  DraftPricing::Record price;  // the acceptance draft pricing estimates (step_cost.h)
  // this step
  std::vector<int32_t> tokens;
  int n_draft = 0;
  int n_out = 0;
  bool use_ids = false;
  // Prefill: the prompt segments of `tokens` (first position, tokens), each a sequence of
  // the pass (several when approx installs lie between them: Scheduler::step), and the
  // cursor after the step (past the last segment, or the installs after it).
  std::vector<std::pair<int, int>> segs;
  int plan_end = 0;
};

Scheduler::Scheduler(exec::BatchModel& model, kvcache::BlockManager& kv, const SchedulerOptions& opts, SchedulerHooks hooks,
                     kvcache::AtomStore* atoms)
    : model_(model), kv_(kv), atoms_(atoms), approx_model_(kvcache::model_key("swizzle-approx/1 " + kv.model().hex())),
      opts_(opts), hooks_(std::move(hooks)), n_vocab_(model.n_vocab()) {
  if (opts_.parallel < 1 || opts_.parallel > model.max_seqs())
    throw std::invalid_argument("--parallel " + std::to_string(opts_.parallel) + " must be in 1.." + std::to_string(model.max_seqs()));
  if (opts_.batch_tokens < opts_.parallel || opts_.batch_tokens > model.max_rows())
    throw std::invalid_argument("--batch-tokens " + std::to_string(opts_.batch_tokens) + " must be in " +
                                std::to_string(opts_.parallel) + " (--parallel).." + std::to_string(model.max_rows()));
  if (opts_.max_queue < 0) throw std::invalid_argument("--max-queue must be >= 0");
  pages_total_ = kv_.stats().pages_total;
  step_s_counts_.assign(step_seconds_bounds().size() + 1, 0);
  batch_seqs_counts_.assign(batch_seqs_bounds().size() + 1, 0);
  batch_rows_counts_.assign(batch_rows_bounds().size() + 1, 0);
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int Scheduler::pages_needed(const GenerateRequest& req, int width, bool partial_hit) const {
  const int n_prompt = static_cast<int>(req.prompt.size());
  const int gen = req.max_tokens >= 0 ? req.max_tokens : opts_.n_ctx;
  const int positions = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(n_prompt) + gen, opts_.n_ctx));
  // + one page for a copy on write (Scheduler::start): a full hit of a prompt of whole
  // blocks writes its last block again, and a partial-block hit (`partial_hit`, known at
  // admission) writes after the block's reused tokens; any other prompt writes only pages
  // of its own. Reserving it for every request kept 32 streams of 3,000 tokens and a 31k
  // prompt (2,024 pages) out of a pool of 2,049, so the prompt waited for the streams to
  // end (bench/RESULTS.md, 2026-12-03).
  const int one = (positions + kTok - 1) / kTok + (n_prompt % kTok == 0 || partial_hit ? 1 : 0);
  // Each further choice running at once: its pages past the prompt's full blocks (its copy
  // of the partial last page included); the full blocks are shared.
  return one + (width - 1) * ((positions + kTok - 1) / kTok - n_prompt / kTok);
}

int Scheduler::choice_width(const GenerateRequest& req, bool partial_hit) const {
  int w = std::min(std::max(1, req.n), opts_.parallel);
  while (w > 1 && pages_needed(req, w, partial_hit) > pages_total_) --w;
  return w;
}

std::unique_ptr<Admission> Scheduler::admit(const GenerateRequest& req) {
  const int limit = opts_.parallel + opts_.max_queue;
  int n = admitted_.load();
  do {
    if (n >= limit) {
      std::lock_guard<std::mutex> lock(mu_);
      ++rejected_;
      throw Overloaded("the server is at capacity: " + std::to_string(opts_.parallel) + " requests run and " +
                           std::to_string(opts_.max_queue) + " wait (--parallel, --max-queue); retry shortly",
                       1);
    }
  } while (!admitted_.compare_exchange_weak(n, n + 1));
  auto a = std::make_unique<PagedAdmission>(req, *this);  // counted from here
  const int n_prompt = static_cast<int>(req.prompt.size());
  if (kv_.prefix_cache_enabled() && req.disk_cache) a->disk_tenant = kv_.disk_tenant(req.cache_tenant);
  const bool approx = !req.approx_atoms.empty();
  a->model = approx ? approx_model_ : kv_.model();
  a->scope = approx ? "approx\n" + req.cache_scope : req.cache_scope;
  // Atoms are reused below the block granularity, so, as match_partial's candidates, only
  // within the scope that saved them: nobody learns whether another's prompt held an atom.
  if (approx) a->atoms = kvcache::model_key("swizzle-approx-atoms/1 " + approx_model_.hex() + "\n" + req.cache_scope);
  // Prompt logprobs need every prompt row's logits: the whole prompt is evaluated.
  if (kv_.prefix_cache_enabled() && !req.prompt_logprobs) {
    a->keys = kvcache::block_keys(a->model, req.prompt.data(), req.prompt.size());
    const int matched = kv_.match_and_pin(a->keys, a->pinned, a->disk_tenant);
    // Then the start of the next block, from any cached block under the last matched key,
    // short of the last prompt position (always evaluated).
    const int room = std::min(n_prompt - 1 - matched * kTok, kTok - 1);
    a->partial = kv_.match_partial(matched ? a->keys[static_cast<size_t>(matched - 1)] : kvcache::BlockKey{},
                                   req.prompt.data() + static_cast<size_t>(matched) * kTok, room, a->pinned,
                                   a->scope);
    const int prefix = std::min(matched * kTok + a->partial, n_prompt - 1);
    // Atoms after the cached prefix whose K/V an earlier approx request saved: all but the
    // recomputed share of their tokens are installed (recomputing those restores attention
    // across atoms): the first ones (Head), or the first kApproxMinRecompute and those the
    // probe finds deviating most (Deviation).
    int approx_tokens = 0;
    const bool deviation = req.approx_select == ApproxSelect::Deviation && model_.kv_geometry().n_layer > kApproxProbeLayers;
    if (approx && atoms_) {
      int at = prefix;  // the installs are in position order and do not overlap
      for (size_t i = 0; i < req.approx_atoms.size(); ++i) {
        const TokenSpan& sp = req.approx_atoms[i];
        const int len = sp.end - sp.begin;
        if (sp.begin < at || sp.begin < 1 || sp.end > n_prompt - 1 || len <= 0) continue;
        const int recompute = std::max(
            kApproxMinRecompute, static_cast<int>(std::ceil(std::clamp(req.approx_recompute, 0.f, 1.f) * static_cast<float>(len))));
        if (len - recompute < kApproxMinRecompute) continue;
        const int head = deviation ? kApproxMinRecompute : recompute;
        const kvcache::BlockKey key = kvcache::block_key(a->atoms, {}, req.prompt.data() + sp.begin, len);
        std::shared_ptr<const kvcache::AtomRef> atom = atoms_->find(key);
        if (!atom || atom->n != len) continue;
        // Its K/V is where the request that saved it computed it: pinned in the prefix
        // cache until installed. One whose blocks the cache no longer holds (dropped, or the
        // saving request's partial last block not published yet) is erased.
        std::vector<kvcache::BlockKey> blocks, pins;
        for (const kvcache::AtomRef::Piece& pc : atom->pieces) blocks.push_back(pc.block);
        if (kv_.match_and_pin(blocks, pins, a->disk_tenant) != static_cast<int>(blocks.size())) {
          kv_.unpin(pins);
          atoms_->stale(key);
          continue;
        }
        a->installs.push_back({sp.begin + head, sp.end, head, recompute - head, {}, i, std::move(atom), std::move(pins)});
        approx_tokens += len - recompute;
        at = sp.end;
      }
    }
    a->set_cached(prefix + approx_tokens, approx_tokens);
  }
  return a;
}

void Scheduler::cancel(Job& j) {
  j.cancel = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

GenerateResult Scheduler::run(Admission& admission, const TokenCallback& on_token) {
  if (admission.request().n != 1) throw std::invalid_argument("run: the request has several choices (run_choices)");
  ChoiceTokenCallback cb;
  if (on_token) cb = [&on_token](int, const TokenEvent& ev) { return on_token(ev); };
  return std::move(run_choices(admission, cb, {}).front());
}

std::vector<GenerateResult> Scheduler::run_choices(Admission& admission, const ChoiceTokenCallback& on_token,
                                                   const ChoiceDoneCallback& on_done) {
  auto* a = dynamic_cast<PagedAdmission*>(&admission);
  if (!a || a->sched != this) throw std::invalid_argument("run: the admission comes from another engine");
  if (a->ran) throw std::invalid_argument("run: this admission has already run");
  a->ran = true;
  struct Uncount {  // the admission leaves the limit's count when run() returns
    PagedAdmission& a;
    ~Uncount() { a.uncount(); }
  } uncount{*a};
  auto job = std::make_shared<Job>(*a);
  const Admission::EventWait& wait = a->event_wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw std::runtime_error("the engine is shutting down");
    waiting_.push_back(job);
    wake_ = true;
  }
  cv_.notify_all();

  const int n = job->n;
  std::vector<GenerateResult> res(static_cast<size_t>(n));
  std::vector<char> ended(static_cast<size_t>(n), 0), stopped_one(static_cast<size_t>(n), 0);
  int left = n;
  bool stopped = false;          // the caller stopped every choice (a callback threw, cancel check)
  std::exception_ptr cb_error;   // a callback threw
  std::exception_ptr error;      // the first error of a choice
  auto stop = [&] {
    if (!stopped) cancel(*job);
    stopped = true;
  };
  // The step thread may still use the admission (job->adm) until every choice has ended,
  // so this returns (or throws) only then.
  while (left > 0) {
    Job::Event ev;
    {
      std::unique_lock<std::mutex> lock(job->mu);
      bool arrived = false;
      if (wait.wait) {  // the caller's own way of waiting (Admission::EventWait): no thread blocks
        arrived = !job->events.empty();
        if (!arrived) {
          lock.unlock();
          wait.wait(std::chrono::milliseconds(20));
          lock.lock();
          arrived = !job->events.empty();
        }
      } else {
        arrived = job->cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return !job->events.empty(); });
      }
      if (!arrived) {
        lock.unlock();
        // Nothing arrived: the request waits for a slot or its prefill runs; the client may
        // have gone away meanwhile.
        if (!stopped && job->poll_cancel()) stop();
        continue;
      }
      ev = std::move(job->events.front());
      job->events.pop_front();
    }
    const size_t c = static_cast<size_t>(ev.choice);
    switch (ev.kind) {
      case Job::Kind::Token: {
        if (stopped || stopped_one[c] || ended[c]) break;
        ++res[c].completion_tokens;
        res[c].text += ev.token.piece;
        bool go = true;
        try {
          go = !on_token || on_token(ev.choice, ev.token);
        } catch (...) {
          cb_error = std::current_exception();
          stop();
          break;
        }
        if (!go) {
          stopped_one[c] = 1;
          job->stop_choice[c] = true;
        }
        if (job->poll_cancel()) stop();
        break;
      }
      case Job::Kind::Prefilled:
        if (stopped) break;
        try {
          a->prefilled(ev.prompt_logprobs);
        } catch (...) {
          cb_error = std::current_exception();
          stop();
        }
        break;
      case Job::Kind::Done: {
        GenerateResult& r = res[c];
        const int completion = r.completion_tokens;
        std::string text = std::move(r.text);
        r = std::move(ev.result);
        r.completion_tokens = completion;
        r.text = std::move(text);
        if (stopped || stopped_one[c]) r.finish = FinishReason::Cancelled;
        ended[c] = 1;
        --left;
        if (on_done && !cb_error && !error) {
          try {
            on_done(ev.choice, r);
          } catch (...) {
            cb_error = std::current_exception();
            stop();
          }
        }
        break;
      }
      case Job::Kind::Error:
        if (!error) error = ev.error;
        ended[c] = 1;
        --left;
        stop();  // the other choices end too
        break;
    }
  }
  if (cb_error) std::rethrow_exception(cb_error);
  if (error) std::rethrow_exception(error);
  return res;
}

void Scheduler::loop() {
  std::vector<std::unique_ptr<Seq>> running;
  std::vector<std::shared_ptr<Job>> active;  // started jobs with a choice not ended
  std::deque<std::shared_ptr<Job>> local;    // jobs taken from waiting_, in arrival order
  bool blocked = false;  // a waiting job could not start; retry after a while
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (running.empty()) {
        if (blocked) cv_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stop_ || wake_; });
        else cv_.wait(lock, [&] { return stop_ || wake_; });
      }
      wake_ = false;
      if (stop_) break;
      while (!waiting_.empty()) {
        local.push_back(std::move(waiting_.front()));
        waiting_.pop_front();
      }
    }
    // Cancelled while waiting: they end without running (nothing was computed).
    for (auto it = local.begin(); it != local.end();) {
      if ((*it)->cancel) {
        (*it)->adm.release_pins();  // before the last event: then the caller may destroy the admission
        (*it)->next = 0;
        end_unstarted(**it, nullptr);
        it = local.erase(it);
      } else {
        ++it;
      }
    }
    // Start the oldest waiting jobs while their running slots and pages are free.
    while (!local.empty()) {
      const std::shared_ptr<Job>& j = local.front();
      const GenerateRequest& req = j->adm.request();
      const int width = choice_width(req, j->adm.partial > 0);
      if (held_slots_ + width > opts_.parallel) break;
      const int need = pages_needed(req, width, j->adm.partial > 0);
      if (reserved_pages_ + need > pages_total_) break;
      PromptLookupOptions lo;
      lo.draft_max = std::max(1, opts_.spec_draft_max);
      lo.draft_init = std::min(lo.draft_init, lo.draft_max);
      auto s = std::make_unique<Seq>(j, lo, 0);
      if (!start(*s)) break;  // pages of its cached prefix cannot be restored now: retry next step
      j->held = width;
      j->reserve = need;
      j->live = 1;
      held_slots_ += width;
      reserved_pages_ += need;
      running_n_.fetch_add(1);
      running.push_back(std::move(s));
      active.push_back(j);
      local.pop_front();
    }
    blocked = !local.empty();
    {
      // Jobs not yet started count as queued (stats): put them back in front.
      std::lock_guard<std::mutex> lock(mu_);
      while (!local.empty()) {
        waiting_.push_front(std::move(local.back()));
        local.pop_back();
      }
    }
    if (running.empty()) continue;
    bool device_failed = false;
    try {
      device_failed = !step(running);
    } catch (...) {  // a bug, not the device: the running requests get the error
      auto err = std::current_exception();
      for (auto& sp : running) fail(*sp, err);
    }
    try {
      tend(running, active);
    } catch (...) {  // a bug: everything started gets the error
      auto err = std::current_exception();
      for (auto& sp : running) fail(*sp, err);
      for (auto& j : active) {
        if (!j->error) j->error = err;
      }
      tend(running, active);
    }
    if (device_failed) {
      // The device is gone: nothing queued can run either.
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& j : waiting_) {
        j->adm.release_pins();
        j->next = 0;
        end_unstarted(*j, std::make_exception_ptr(EngineFailed("the model's device failed; restart swizzle-rt")));
      }
      waiting_.clear();
    }
  }
  // Stopping: everything still here ends with an error.
  auto err = std::make_exception_ptr(std::runtime_error("the engine stopped"));
  for (auto& s : running) fail(*s, err);
  for (auto& j : active) {
    if (!j->error) j->error = err;
  }
  tend(running, active);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : waiting_) {
    j->adm.release_pins();
    j->next = 0;
    end_unstarted(*j, err);
  }
  waiting_.clear();
}

void Scheduler::end_unstarted(Job& j, std::exception_ptr e) {
  // The caller's run_choices returns once the last choice's event is in: the admission
  // (j.adm) must not be touched after that push.
  const int prompt_tokens = j.adm.prompt_tokens(), cached_tokens = j.adm.cached_tokens();
  for (; j.next < j.n; ++j.next) {
    Job::Event ev;
    ev.choice = j.next;
    if (e) {
      ev.kind = Job::Kind::Error;
      ev.error = e;
    } else {
      ev.kind = Job::Kind::Done;
      ev.result.prompt_tokens = prompt_tokens;
      ev.result.cached_tokens = cached_tokens;
      ev.result.finish = FinishReason::Cancelled;
    }
    j.push(std::move(ev));
  }
}

void Scheduler::release_fork(Job& j) {
  for (int p : j.fork.table) kv_.unref_page(p);
  j.fork.table.clear();
  j.fork.logits.clear();
  j.fork.logits.shrink_to_fit();
}

void Scheduler::tend(std::vector<std::unique_ptr<Seq>>& running, std::vector<std::shared_ptr<Job>>& active) {
  auto drop_done = [&] {
    for (auto it = running.begin(); it != running.end();) {
      if ((*it)->done) {
        --(*it)->job->live;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  };
  drop_done();
  for (auto it = active.begin(); it != active.end();) {
    Job& j = **it;
    if (j.next < j.n) {
      if (j.error) {
        end_unstarted(j, j.error);
      } else if (j.forked) {
        spawn(*it, running);  // into the slots its ended choices left
      } else if (j.live == 0) {
        end_unstarted(j, nullptr);  // choice 0 ended before its prompt was prefilled (cancelled)
      }
    }
    // Slots no choice of it will use again go back.
    const int keep = std::min(j.held, j.live + (j.n - j.next));
    held_slots_ -= j.held - keep;
    j.held = keep;
    if (j.live == 0 && j.next >= j.n) {
      release_fork(j);
      reserved_pages_ -= j.reserve;
      held_slots_ -= j.held;
      j.held = 0;
      it = active.erase(it);
    } else {
      ++it;
    }
  }
  drop_done();  // choices that ended on their first token
}

void Scheduler::spawn(const std::shared_ptr<Job>& job, std::vector<std::unique_ptr<Seq>>& running) {
  Job& j = *job;
  PromptLookupOptions lo;
  lo.draft_max = std::max(1, opts_.spec_draft_max);
  lo.draft_init = std::min(lo.draft_init, lo.draft_max);
  while (j.next < j.n && j.live < j.held) {
    const int i = j.next++;
    auto s = std::make_unique<Seq>(job, lo, i);
    Seq& f = *s;
    // The fork point's page references pass to the last choice; the others take their own.
    if (j.next == j.n) {
      f.table = std::move(j.fork.table);
      j.fork.table.clear();
    } else {
      f.table = j.fork.table;
      for (int p : f.table) kv_.ref_page(p);
    }
    f.n_past = j.fork.n_past;
    f.prompt_done = j.fork.n_past;
    f.reused = j.fork.reused;
    f.history.assign(f.req.prompt.begin(), f.req.prompt.end());
    f.prefilling = false;
    f.t_prefilled = j.fork.t_prefilled;
    f.prompt_lp = j.fork.prompt_lp;
    init_decoding(f);
    running_n_.fetch_add(1);
    ++j.live;
    running.push_back(std::move(s));
    if (f.stopped()) {
      finish(f, FinishReason::Cancelled);
      continue;
    }
    if (f.limit <= 0) {
      finish(f, FinishReason::Length);
      continue;
    }
    const uint64_t* allow = grammar_mask_of(f);
    if (f.matcher && !allow) {
      finish(f, FinishReason::Stop);
      continue;
    }
    const float* row = j.fork.logits.empty() ? nullptr : j.fork.logits.data();
    const int32_t t = row ? f.sampler.sample(row, n_vocab_, allow) : j.fork.id;
    bool emitted = false;
    if (emit(f, t, row, emitted)) f.pending = t;
  }
}

bool Scheduler::start(Seq& s) {
  PagedAdmission& a = s.job->adm;
  const GenerateRequest& req = s.req;
  const int n_prompt = static_cast<int>(req.prompt.size());
  // The pinned blocks become the head of the block table; their pins are then redundant
  // (the table's page references keep them). Blocks published after admit() extend the
  // match: used (less prefill) but not reported, cached_tokens was final at admission.
  // A partial block (admit()'s match_partial) comes last: its first a.partial positions
  // are reused, and the first write after them copies the page (prepare_pages). One found
  // only now is not taken: its copy would need a page the admission did not reserve.
  std::vector<int> pages;
  try {
    pages = kv_.acquire(a.pinned);
  } catch (const std::length_error&) {
    return false;
  }
  a.release_pins();
  if (a.partial == 0 && kv_.prefix_cache_enabled() && !req.prompt_logprobs && pages.size() < a.keys.size()) {
    std::vector<kvcache::BlockKey> more(a.keys.begin() + static_cast<ptrdiff_t>(pages.size()), a.keys.end()), pinned;
    kv_.match_and_pin(more, pinned, a.disk_tenant);
    try {
      std::vector<int> extra = kv_.acquire(pinned);
      pages.insert(pages.end(), extra.begin(), extra.end());
    } catch (const std::length_error&) {
      // fewer cached blocks: they are prefilled instead
    }
    kv_.unpin(pinned);
  }
  s.reused = a.partial > 0 ? static_cast<int>(pages.size() - 1) * kTok + a.partial
                           : std::min(static_cast<int>(pages.size()) * kTok, n_prompt - 1);
  // A full hit keeps its last block: position n_prompt - 1 is recomputed into a copy of it.
  s.table = std::move(pages);
  s.n_past = s.reused;
  s.history.assign(req.prompt.begin(), req.prompt.begin() + s.reused);
  init_decoding(s);
  return true;
}

void Scheduler::init_decoding(Seq& s) {
  const GenerateRequest& req = s.req;
  s.speculative = req.speculative.value_or(opts_.speculative);
  s.argmax_ok = req.sampling.temperature <= 0 && req.sampling.presence_penalty == 0 && req.sampling.frequency_penalty == 0 &&
                req.logprobs < 0 && !req.grammar;
  if (req.grammar) s.matcher = std::make_unique<grammar::Matcher>(req.grammar, hooks_.vocab());
  s.limit = req.max_tokens >= 0 ? req.max_tokens : opts_.n_ctx;
  if (s.speculative) s.lookup.reset(req.prompt.data(), req.prompt.size());
}

void Scheduler::make_fork(Seq& s, const float* row, int32_t id) {
  Job& j = *s.job;
  j.forked = true;
  j.fork.table = s.table;
  for (int p : j.fork.table) kv_.ref_page(p);
  j.fork.n_past = s.n_past;
  j.fork.reused = s.reused;
  if (row) j.fork.logits.assign(row, row + n_vocab_);
  j.fork.id = id;
  j.fork.prompt_lp = s.prompt_lp;
  j.fork.t_prefilled = s.t_prefilled;
}

bool Scheduler::prepare_pages(Seq& s, int n_tokens) {
  const int first = s.n_past / kTok, last = (s.n_past + n_tokens - 1) / kTok;
  try {
    for (int b = first; b <= last; ++b) {
      if (static_cast<size_t>(b) >= s.table.size()) {
        s.table.push_back(kv_.alloc_page());
      } else if (kv_.page_refcount(s.table[static_cast<size_t>(b)]) > 1) {
        const int fresh = kv_.alloc_page();
        try {
          model_.copy_page(fresh, s.table[static_cast<size_t>(b)]);
        } catch (...) {
          kv_.unref_page(fresh);
          throw;
        }
        kv_.unref_page(s.table[static_cast<size_t>(b)]);
        s.table[static_cast<size_t>(b)] = fresh;
      }
    }
  } catch (const std::length_error&) {
    return false;  // no page now; the sequence keeps what it got and tries again
  }
  return true;
}

void Scheduler::truncate(Seq& s, int n) {
  s.n_past = std::clamp(n, 0, s.n_past);
  s.history.resize(static_cast<size_t>(s.n_past));
  const size_t keep = static_cast<size_t>((s.n_past + kTok - 1) / kTok);
  while (s.table.size() > keep) {
    kv_.unref_page(s.table.back());
    s.table.pop_back();
  }
}

std::vector<kvcache::BlockKey> Scheduler::prompt_block_keys(Seq& s, size_t n_full) {
  const std::vector<kvcache::BlockKey>& pk = s.job->adm.keys;
  std::vector<kvcache::BlockKey> keys(pk.begin(), pk.begin() + static_cast<ptrdiff_t>(std::min(n_full, pk.size())));
  if (n_full > keys.size()) {
    const size_t from = keys.size() * kTok;
    const std::vector<kvcache::BlockKey> more = kvcache::block_keys(s.job->adm.model, s.history.data() + from, n_full * kTok - from,
                                                                     keys.empty() ? kvcache::BlockKey{} : keys.back());
    keys.insert(keys.end(), more.begin(), more.end());
  }
  return keys;
}

void Scheduler::publish_prompt_blocks(Seq& s) {
  // Only prompt blocks are published: generated tokens' K/V are computed as
  // Rows::Generated, and a later prompt that holds them must get what a cold prefill
  // (Rows::Prompt) computes.
  s.prompt_done = s.n_past;
  if (!kv_.prefix_cache_enabled()) return;
  const std::vector<kvcache::BlockKey> keys = prompt_block_keys(s, static_cast<size_t>(s.n_past) / kTok);
  // Deepest block first: a prefix ends up more recently used than its extensions.
  for (size_t b = keys.size(); b-- > 0;)
    kv_.publish(keys[b], s.table[b], s.job->adm.disk_tenant, b ? keys[b - 1] : kvcache::BlockKey{},
                std::span<const int32_t>(s.history.data() + b * kTok, kTok), s.job->adm.scope);
}

void Scheduler::publish_prompt_tail(Seq& s) {
  // The prompt's partial last block (1..63 positions), published when the sequence ends:
  // its page then passes to the cache without a copy (while the sequence ran, it wrote its
  // generated tokens after the prompt's in the same page; only the prompt's positions
  // are claimed, and a reuser copies the page before writing after them).
  // Only a page the sequence wrote itself: positions reused .. prompt_done-1 were computed,
  // so block b was copied on write (or allocated fresh). A sequence that ended before
  // computing anything (cancelled while its first chunk waited) still holds the cache's
  // own page there, which must not be published a second time under another key.
  const size_t b = static_cast<size_t>(s.prompt_done) / kTok;
  const int tail = s.prompt_done % kTok;
  if (!kv_.prefix_cache_enabled() || tail == 0 || s.prompt_done <= s.reused || b >= s.table.size()) return;
  const std::vector<kvcache::BlockKey> keys = prompt_block_keys(s, b);
  const kvcache::BlockKey parent = b ? keys.back() : kvcache::BlockKey{};
  const int32_t* tokens = s.history.data() + b * kTok;
  kv_.publish(kvcache::block_key(s.job->adm.model, parent, tokens, tail), s.table[b], -1, parent,
              std::span<const int32_t>(tokens, static_cast<size_t>(tail)), s.job->adm.scope);
}

void Scheduler::end_prefill_stats(Seq& s) {
  hit_tokens_ += static_cast<uint64_t>(s.reused + s.installed);
  miss_tokens_ += static_cast<uint64_t>(s.n_past - s.reused - s.installed);
  publish_prompt_blocks(s);
  save_atoms(s);
  s.t_prefilled = Clock::now();
}

Scheduler::Installed Scheduler::install_atom(Seq& s, int begin) {
  PagedAdmission::Install& in = s.job->adm.installs[s.next_install];
  // From the cursor `begin` (>= in.begin): a longer cached prefix found at start() may
  // cover the install's head (its tail is installed, so at least what admit() reported is
  // reused).
  const int n = in.end - begin;
  if (!prepare_pages(s, in.end - s.n_past)) return Installed::Waiting;
  const kvcache::AtomRef& atom = *in.atom;
  std::vector<exec::BatchModel::KvRun> slots;  // (allocated before the pages are referenced)
  slots.reserve(atom.pieces.size());
  std::vector<exec::BatchModel::KvMove> moves;
  moves.reserve(static_cast<size_t>(n));
  std::vector<int> src;  // the pieces' pages, one reference each
  try {
    src = kv_.acquire(in.pins);
  } catch (const std::length_error&) {
    // A block spilled to host needs a page to come back to, outside what the request
    // reserved: its tokens are prefilled instead (waiting could wait for ever).
    s.job->adm.release_install(in);
    ++s.next_install;
    return Installed::Dropped;
  }
  // Atom token j is at position atom.pos0 + j where it was computed and goes to
  // in.begin - in.from + j: K is rotated by the difference.
  const int delta = in.begin - in.from - atom.pos0;
  atom_slots(atom, src, in.from + begin - in.begin, n, slots);
  int p = begin;  // the new position of the next token
  for (const exec::BatchModel::KvRun& r : slots)
    for (int k = 0; k < r.n; ++k, ++p)
      moves.push_back({r.page, r.slot0 + k, s.table[static_cast<size_t>(p / kTok)], p % kTok, delta});
  try {
    model_.move_kv(moves);
  } catch (...) {
    for (int page : src) kv_.unref_page(page);
    throw;
  }
  for (int page : src) kv_.unref_page(page);
  // Its deviating tokens (Install::runs, positions) are prefilled again next, over what
  // was just installed.
  int n_again = 0;
  for (TokenSpan r : in.runs) {
    r.begin = std::max(r.begin, begin);
    if (r.end <= r.begin) continue;
    s.again.push_back(r);
    n_again += r.end - r.begin;
  }
  s.job->adm.release_install(in);
  s.installed += n - n_again;
  s.installed_atoms.push_back(in.atom_index);
  ++s.next_install;
  return Installed::Done;
}

bool Scheduler::device_failed(std::vector<std::unique_ptr<Seq>>& running, const backend::Error& e) {
  if (hooks_.failed) hooks_.failed(e.what());
  const std::exception_ptr err = std::current_exception();
  for (auto& r : running) fail(*r, err);
  return false;
}

int Scheduler::probe_atoms(Seq& s, int budget) {
  auto& installs = s.job->adm.installs;
  int probe_end = 0;  // the end of the last install with tokens to choose (past the cursor)
  for (size_t i = s.next_install; i < installs.size(); ++i)
    if (installs[i].extra > 0 && installs[i].end > s.n_past) probe_end = std::max(probe_end, installs[i].end);
  if (probe_end == 0) {
    s.probed = true;
    return 0;
  }
  if (!prepare_pages(s, probe_end - s.n_past)) return -1;  // no page now: try again next step
  // The first kApproxProbeLayers layers of the prompt from the cursor to the last atom's
  // end, with its own context (each pass attends to what the passes before wrote), in
  // passes of at most max_rows. A probe row costs kApproxProbeLayers / n_layer of a full
  // row: `budget` full rows allow budget * n_layer / kApproxProbeLayers probe rows this
  // step, and the full rows returned are the probe rows' share, rounded up.
  const kvcache::KvGeometry g = model_.kv_geometry();
  const int n_layer = std::max(g.n_layer, kApproxProbeLayers);
  const int64_t allowed = static_cast<int64_t>(budget) * n_layer / kApproxProbeLayers;
  if (s.probe_pos < s.n_past) s.probe_pos = s.n_past;
  int64_t used = 0;
  auto charge = [&] {
    return static_cast<int>(std::min<int64_t>(budget, (used * kApproxProbeLayers + n_layer - 1) / n_layer));
  };
  while (s.probe_pos < probe_end && used < allowed) {
    const int p = s.probe_pos;
    exec::SequenceStep st;
    st.tokens = s.req.prompt.data() + p;
    st.n_tokens = static_cast<int>(std::min<int64_t>({probe_end - p, model_.max_rows(), allowed - used}));
    st.pos0 = p;
    st.block_table = s.table.data();
    st.n_blocks = (p + st.n_tokens + kTok - 1) / kTok;
    st.rows = exec::SequenceModel::Rows::Prompt;
    model_.forward_layers({&st, 1}, kApproxProbeLayers);
    s.probe_pos += st.n_tokens;
    used += st.n_tokens;
    ++probe_passes_;
    probe_rows_ += static_cast<uint64_t>(st.n_tokens);
  }
  if (s.probe_pos < probe_end) return charge();  // the rest in later steps
  s.probed = true;
  const size_t kvw = static_cast<size_t>(g.kv_width());
  for (size_t i = s.next_install; i < installs.size(); ++i) {
    PagedAdmission::Install& in = installs[i];
    if (in.extra <= 0) continue;
    const int begin = std::max(in.begin, s.n_past);  // (a longer cached prefix may cover its start)
    const int n = in.end - begin;
    if (n <= 0) continue;
    // Atom token j is at position atom.pos0 + j where it was computed and goes to
    // in.begin - in.from + j (install_atom).
    const kvcache::AtomRef& atom = *in.atom;
    const int j0 = in.from + begin - in.begin, delta = in.begin - in.from - atom.pos0;
    std::vector<exec::BatchModel::KvRun> fresh, saved;
    for (int p = begin; p < in.end;) {
      const int m = std::min(kTok - p % kTok, in.end - p);
      fresh.push_back({s.table[static_cast<size_t>(p / kTok)], p % kTok, m});
      p += m;
    }
    // (Everything allocated before the pages are referenced: nothing between acquire and
    // unref_page throws but the reads.)
    std::vector<uint16_t> kf(static_cast<size_t>(n) * kvw), vf(kf.size()), ks(kf.size()), vs(kf.size());
    saved.reserve(atom.pieces.size());
    std::vector<int> src;
    try {
      src = kv_.acquire(in.pins);
    } catch (const std::length_error&) {
      // A block spilled to host cannot come back now: its first tokens, as Head selects.
      in.runs = {{begin, std::min(in.end, begin + in.extra)}};
      continue;
    }
    atom_slots(atom, src, j0, n, saved);
    try {
      model_.read_kv(fresh, kf.data(), vf.data(), kApproxProbeLayers - 1);
      model_.read_kv(saved, ks.data(), vs.data(), kApproxProbeLayers - 1);
    } catch (...) {
      for (int page : src) kv_.unref_page(page);
      throw;
    }
    for (int page : src) kv_.unref_page(page);
    // Per token: squared error of the saved K (re-rotated as install_atom's move rotates
    // it) and V against the fresh ones.
    const kvcache::RopeDelta rot(g, delta);
    std::vector<double> dev(static_cast<size_t>(n), 0.0);
    for (int t = 0; t < n; ++t) {
      uint16_t* k = ks.data() + static_cast<size_t>(t) * kvw;
      for (int h = 0; h < g.n_head_kv; ++h) kvcache::rerotate_head(k + static_cast<size_t>(h) * g.head_dim, g, rot);
      double e = 0;
      for (size_t d = 0; d < kvw; ++d) {
        const size_t x = static_cast<size_t>(t) * kvw + d;
        const double dk = ggml::fp16_to_fp32(kf[x]) - ggml::fp16_to_fp32(ks[x]);
        const double dv = ggml::fp16_to_fp32(vf[x]) - ggml::fp16_to_fp32(vs[x]);
        e += dk * dk + dv * dv;
      }
      // (An f16 overflow's inf - inf would give NaN, which the window sort cannot order.)
      dev[static_cast<size_t>(t)] = std::isfinite(e) ? e : std::numeric_limits<double>::max();
    }
    in.runs = select_deviating(dev, begin, in.extra);
  }
  return charge();
}

void Scheduler::save_atoms(Seq& s) {
  // Each atom whose K/V is now in the sequence's prompt blocks is recorded for later
  // approx requests of its scope: where it lies in those blocks, under
  // the keys they are published with (publish_prompt_blocks now; the partial last block,
  // publish_prompt_tail, when the sequence ends), so its K/V stays in the prefix cache and
  // is never copied out. Not those installed here (their K/V is a saved atom's, moved:
  // saving it again would only add the rotation's rounding). An atom prefilled after an
  // installed one attended to approximate K/V; it is saved as computed.
  // (Without a prefix cache there are no blocks to keep it in.)
  if (!atoms_ || !kv_.prefix_cache_enabled() || s.req.approx_atoms.empty() || s.choice != 0) return;
  const int full = s.prompt_done / kTok, tail = s.prompt_done % kTok;
  const std::vector<kvcache::BlockKey> keys = prompt_block_keys(s, static_cast<size_t>(full));
  auto block_of = [&](int b) {
    if (b < full) return keys[static_cast<size_t>(b)];
    return kvcache::block_key(s.job->adm.model, b ? keys.back() : kvcache::BlockKey{}, s.history.data() + static_cast<size_t>(b) * kTok, tail);
  };
  for (size_t i = 0; i < s.req.approx_atoms.size(); ++i) {
    const TokenSpan& sp = s.req.approx_atoms[i];
    if (sp.end <= sp.begin || sp.begin < 0 || sp.end > s.prompt_done) continue;
    if (std::find(s.installed_atoms.begin(), s.installed_atoms.end(), i) != s.installed_atoms.end()) continue;
    // (Saved again when saved before: this newest location is the one most likely cached.)
    const kvcache::BlockKey key = kvcache::block_key(s.job->adm.atoms, {}, s.req.prompt.data() + sp.begin, sp.end - sp.begin);
    auto atom = std::make_shared<kvcache::AtomRef>();
    atom->pos0 = sp.begin;
    atom->n = sp.end - sp.begin;
    for (int p = sp.begin; p < sp.end;) {
      const int b = p / kTok, slot = p % kTok, m = std::min(kTok - slot, sp.end - p);
      atom->pieces.push_back({block_of(b), slot, m});
      p += m;
    }
    atoms_->put(key, std::move(atom));
  }
}

void Scheduler::finish(Seq& s, FinishReason why) {
  if (s.done) return;
  // Cancelled during prefill: what was computed is shared (exact, or an approx request's
  // K/V under its own namespace). Not past deviating tokens still to be prefilled again
  // (Seq::again): their K/V is the saved atom's, which a later request must not take as
  // this prompt's.
  if (s.prefilling && !s.again.empty()) {
    truncate(s, s.again.front().begin);
    s.again.clear();
    s.installed = std::min(s.installed, s.n_past - s.reused);
  }
  if (s.prefilling) end_prefill_stats(s);
  publish_prompt_tail(s);
  s.done = true;
  running_n_.fetch_sub(1);
  s.finish = why;
  for (int p : s.table) kv_.unref_page(p);
  s.table.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    spec_.drafted_tokens += static_cast<uint64_t>(s.drafted);
    spec_.accepted_tokens += static_cast<uint64_t>(s.accepted);
    spec_.verify_passes += static_cast<uint64_t>(s.verify_passes);
    spec_.decode_passes += static_cast<uint64_t>(s.forward_passes);
    spec_.decode_tokens += static_cast<uint64_t>(s.completion);
  }
  Job::Event ev;
  ev.kind = Job::Kind::Done;
  ev.choice = s.choice;
  GenerateResult& r = ev.result;
  r.prompt_tokens = s.job->adm.prompt_tokens();
  r.cached_tokens = s.job->adm.cached_tokens();
  r.finish = why;
  r.prefill_ms = ms_between(s.job->submitted, s.prefilling ? Clock::now() : s.t_prefilled);
  r.decode_ms = s.prefilling ? 0 : ms_between(s.t_prefilled, Clock::now());
  r.spec_drafted = s.drafted;
  r.spec_accepted = s.accepted;
  if (why != FinishReason::Cancelled || !s.prefilling) r.prompt_logprobs = s.prompt_lp;
  s.job->push(std::move(ev));
}

void Scheduler::fail(Seq& s, std::exception_ptr e) {
  if (s.done) return;
  s.done = true;
  running_n_.fetch_sub(1);
  for (int p : s.table) kv_.unref_page(p);
  s.table.clear();
  if (!s.job->error) s.job->error = e;  // choices not started yet end with it
  Job::Event ev;
  ev.kind = Job::Kind::Error;
  ev.choice = s.choice;
  ev.error = std::move(e);
  s.job->push(std::move(ev));
}

bool Scheduler::emit(Seq& s, int32_t t, const float* row, bool& emitted) {
  emitted = false;
  if (!s.req.ignore_eos && hooks_.is_eog(t)) {
    finish(s, FinishReason::Stop);
    return false;
  }
  ++s.completion;
  emitted = true;
  Job::Event ev;
  ev.kind = Job::Kind::Token;
  ev.choice = s.choice;
  ev.token = TokenEvent{t, hooks_.piece(t), std::nullopt};
  // The raw logits of t's position (verified rows are bit-identical to plain decoding's).
  if (s.req.logprobs >= 0 && row) ev.token.logprobs = token_logprobs(row, n_vocab_, t, s.req.logprobs);
  s.job->push(std::move(ev));
  if (s.speculative) s.lookup.push(t);
  if (s.stopped()) {
    finish(s, FinishReason::Cancelled);
    return false;
  }
  // The token was drawn under the grammar's mask, so the matcher takes it; a complete
  // sentence that nothing may extend ends generation.
  if (s.matcher && (!s.matcher->accept(t) || s.matcher->must_end())) {
    finish(s, FinishReason::Stop);
    return false;
  }
  if (s.completion >= s.limit) {
    finish(s, FinishReason::Length);
    return false;
  }
  return true;
}

bool Scheduler::step(std::vector<std::unique_ptr<Seq>>& running) {
  const int nv = n_vocab_;
  auto grammar_mask = [](Seq& s) { return grammar_mask_of(s); };
  // Ends a sequence's turn with token t (sampled from `row`, null for device ids).
  // Returns whether generation goes on.
  auto put = [&](Seq& s, int32_t t, const float* row, bool& emitted) { return emit(s, t, row, emitted); };

  // 1. Who is in this step: decoding sequences first, then prefill chunks.
  std::vector<Seq*> decode, prefill;
  for (auto& sp : running) {
    Seq& s = *sp;
    // The client may have gone away: checked before each of its steps (a prompt chunk, a
    // decode step), as the single-sequence engine did before each chunk and token.
    if (s.job->poll_cancel() || s.stopped()) {
      finish(s, FinishReason::Cancelled);
      continue;
    }
    if (s.prefilling) {
      prefill.push_back(&s);
    } else if (s.n_past + 1 > opts_.n_ctx) {
      finish(s, FinishReason::Length);  // context full
    } else {
      decode.push_back(&s);
    }
  }
  int rows_left = opts_.batch_tokens - static_cast<int>(decode.size());
  std::vector<Seq*> step;
  std::vector<int32_t> draft;
  // Draft pricing (step_cost.h): the fit of recent step times says what a row costs; a
  // draft token is taken while its estimated acceptance beats that cost against the
  // step's tokens per second. A sequence whose drafts do not pay still tries one token
  // every kExplore steps, so its estimate can recover when its text turns repetitive.
  // Greedy sequences only: their text is the same whatever is drafted, while a sampled
  // sequence's random draws follow its drafts, and a seeded request must give the same
  // text however busy the server is (its drafts depend on its tokens alone).
  constexpr int kExplore = 8;
  const std::optional<StepCostModel::Fit> fit = opts_.spec_pricing ? cost_.fit() : std::nullopt;
  const int n_decode = static_cast<int>(decode.size());
  int planned_rows = n_decode;
  for (Seq* sp : decode) {
    Seq& s = *sp;
    draft.clear();
    if (s.speculative && rows_left > 0) {
      // Emitting every draft token may not pass max_tokens; the batch must fit the context.
      s.lookup.draft(std::min({s.limit - s.completion, opts_.n_ctx - s.n_past - 1, rows_left}), draft);
      if (fit && !draft.empty() && s.req.sampling.temperature <= 0) {
        const double bar = DraftPricing::threshold(fit, n_decode, planned_rows);
        int take = DraftPricing::take(s.price.acceptance(), bar, static_cast<int>(draft.size()));
        if (take == 0 && s.forward_passes % kExplore == 0) take = 1;
        draft.resize(static_cast<size_t>(take));
      }
      planned_rows += static_cast<int>(draft.size());
    }
    s.tokens.assign(1, s.pending);
    s.tokens.insert(s.tokens.end(), draft.begin(), draft.end());
    s.n_draft = static_cast<int>(draft.size());
    s.n_out = 1 + s.n_draft;
    if (!prepare_pages(s, static_cast<int>(s.tokens.size()))) {
      // Cannot happen while reservations hold (pinned blocks of queued requests may keep
      // pages); the sequence waits a step, keeping its pages.
      continue;
    }
    rows_left -= s.n_draft;
    step.push_back(&s);
  }
  // Prompt rows. An approx request's prompt alternates atoms to install (their K/V moved
  // into its pages now, before the pass) and rows to prefill (the atoms' recomputed heads,
  // the code around them): its rows up to the batch budget go in this one pass, a
  // sequence of the pass per segment between installs, each attending through the
  // request's block table to what the installs and the segments before it wrote (the KV
  // write of a layer precedes its attention for every sequence of a pass). One pass a
  // segment would cost a whole pass over the weights each.
  int slots_left = model_.max_seqs() - static_cast<int>(step.size());
  bool probing = false;  // a deviation probe ran a pass this step (see below)
  for (size_t pi = 0; pi < prefill.size(); ++pi) {
    if (rows_left <= 0 || slots_left <= 0) break;
    Seq& s = *prefill[pi];
    const int n_prompt = static_cast<int>(s.req.prompt.size());
    const int others = static_cast<int>(prefill.size() - pi - 1);  // later sequences keep a slot each
    auto& installs = s.job->adm.installs;
    s.tokens.clear();
    s.segs.clear();
    try {
      if (!s.probed && s.next_install < installs.size()) {
        const int probed_rows = probe_atoms(s, rows_left);
        if (probed_rows < 0) continue;  // no pages now
        rows_left -= probed_rows;
        probing |= probed_rows > 0;
        if (!s.probed || rows_left <= 0) continue;  // probing goes on (or prefill starts) next step
      }
    } catch (const backend::Error& e) {
      return device_failed(running, e);
    } catch (...) {
      fail(s, std::current_exception());
      continue;
    }
    int cur = s.n_past;
    for (;;) {
      // Approx mode: an atom install at the cursor (or one whose head a longer cached
      // prefix found at start covers) is written now and the cursor passes it; one wholly
      // behind the cursor is dropped.
      bool waiting = false;
      while (s.next_install < installs.size() && installs[s.next_install].begin <= cur) {
        if (installs[s.next_install].end <= cur) {
          s.job->adm.release_install(installs[s.next_install]);
          ++s.next_install;
          continue;
        }
        try {
          const int end = installs[s.next_install].end;
          const Installed r = install_atom(s, cur);
          if (r == Installed::Waiting) {
            waiting = true;  // no page now: try again next step
            break;
          }
          if (r == Installed::Done) cur = end;
        } catch (const backend::Error& e) {
          return device_failed(running, e);
        }
      }
      if (waiting) break;
      // An installed atom's deviating tokens (ApproxSelect::Deviation) are prefilled again
      // first, a segment each, over the K/V installed around them (a run longer than the
      // rows left goes on in the next pass).
      bool full = false, any = false;
      while (!s.again.empty()) {
        TokenSpan& r = s.again.front();
        const int m = std::min(r.end - r.begin, rows_left);
        if (m <= 0 || slots_left <= others) {
          full = true;
          break;
        }
        s.segs.emplace_back(r.begin, m);
        s.tokens.insert(s.tokens.end(), s.req.prompt.begin() + r.begin, s.req.prompt.begin() + r.begin + m);
        rows_left -= m;
        --slots_left;
        any = true;
        r.begin += m;
        if (r.begin < r.end) {
          full = true;
          break;
        }
        s.again.pop_front();
      }
      if (full || (any && slots_left <= others)) break;
      int n = std::min(n_prompt - cur, rows_left);
      if (s.next_install < installs.size()) n = std::min(n, installs[s.next_install].begin - cur);
      if (s.req.prompt_logprobs) n = std::min(n, kPromptLogprobsChunk);
      if (n <= 0 || !prepare_pages(s, cur + n - s.n_past)) break;
      s.segs.emplace_back(cur, n);
      s.tokens.insert(s.tokens.end(), s.req.prompt.begin() + cur, s.req.prompt.begin() + cur + n);
      rows_left -= n;
      --slots_left;
      cur += n;
      // Another segment only after an install, while rows and sequence slots are left.
      if (s.next_install >= installs.size() || installs[s.next_install].begin != cur || rows_left <= 0 ||
          slots_left <= others)
        break;
    }
    s.plan_end = cur;
    if (s.segs.empty()) {  // installs only (or nothing) this step: the cursor moves now
      s.history.insert(s.history.end(), s.req.prompt.begin() + s.n_past, s.req.prompt.begin() + cur);
      s.n_past = cur;
      continue;
    }
    s.n_draft = 0;
    s.n_out = s.req.prompt_logprobs ? s.segs.front().second : static_cast<int>(s.segs.size());
    step.push_back(&s);
  }
  if (step.empty()) {
    if (probing) return true;  // the probe was this step's work
    if (!running.empty() && std::all_of(running.begin(), running.end(), [](const auto& s) { return s->done; })) return true;
    // Every live sequence waits for pages that nothing running will free: end the newest.
    for (auto it = running.rbegin(); it != running.rend(); ++it) {
      if (!(*it)->done) {
        fail(**it, std::make_exception_ptr(std::runtime_error("out of KV cache pages (--kv-pages)")));
        break;
      }
    }
    return true;
  }

  // 2. One forward pass.
  bool need_logits = false, need_ids = false;
  for (Seq* s : step) {
    s->use_ids = s->argmax_ok && model_.has_device_argmax();
    need_logits |= !s->use_ids;
    need_ids |= s->use_ids;
  }
  std::vector<exec::SequenceStep> seqs;
  seqs.reserve(step.size());
  int rows = 0, prompt_rows = 0;
  for (Seq* s : step) {
    exec::SequenceStep st;
    st.block_table = s->table.data();
    if (!s->prefilling) {
      st.tokens = s->tokens.data();
      st.n_tokens = static_cast<int>(s->tokens.size());
      st.pos0 = s->n_past;
      st.n_blocks = (s->n_past + st.n_tokens + kTok - 1) / kTok;
      st.n_out = s->n_out;
      st.rows = exec::SequenceModel::Rows::Generated;
      rows += st.n_tokens;
      seqs.push_back(st);
      continue;
    }
    size_t off = 0;
    for (const auto& [pos0, n] : s->segs) {
      st.tokens = s->tokens.data() + off;
      st.n_tokens = n;
      st.pos0 = pos0;
      st.n_blocks = (pos0 + n + kTok - 1) / kTok;
      st.n_out = s->segs.size() == 1 ? s->n_out : 1;
      st.rows = exec::SequenceModel::Rows::Prompt;
      rows += n;
      prompt_rows += n;
      off += static_cast<size_t>(n);
      seqs.push_back(st);
    }
  }
  std::vector<float> logits;
  std::vector<int32_t> ids;
  const auto t0 = Clock::now();
  try {
    model_.forward(seqs, need_logits ? &logits : nullptr, need_ids ? &ids : nullptr);
  } catch (const backend::Error& e) {
    return device_failed(running, e);
  } catch (...) {
    auto err = std::current_exception();
    for (Seq* s : step) fail(*s, err);
    return true;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (prompt_rows == 0) cost_.observe(rows, secs);  // decode passes only (step_cost.h)
  prefill_rows_ += static_cast<uint64_t>(prompt_rows);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++steps_;
    step_rows_ += static_cast<uint64_t>(rows);
    step_seqs_ += step.size();
    step_s_sum_ += secs;
    observe(step_s_counts_, step_seconds_bounds(), secs);
    observe(batch_seqs_counts_, batch_seqs_bounds(), static_cast<double>(step.size()));
    observe(batch_rows_counts_, batch_rows_bounds(), rows);
  }

  // 3. Per sequence: sample, verify, emit.
  size_t out = 0;  // output row index of the sequence's first row
  for (Seq* sp : step) {
    Seq& s = *sp;
    const size_t out0 = out;
    out += static_cast<size_t>(s.n_out);
    auto row = [&](int i) { return need_logits ? logits.data() + (out0 + static_cast<size_t>(i)) * nv : nullptr; };
    const int n = static_cast<int>(s.tokens.size());
    const int n_past0 = s.n_past;
    if (s.prefilling) {  // past the segments and the installs between them
      s.history.insert(s.history.end(), s.req.prompt.begin() + s.n_past, s.req.prompt.begin() + s.plan_end);
      s.n_past = s.plan_end;
    } else {
      s.n_past += n;
      s.history.insert(s.history.end(), s.tokens.begin(), s.tokens.end());
    }
    if (s.prefilling) {
      const int n_prompt = static_cast<int>(s.req.prompt.size());
      if (s.req.prompt_logprobs) {
        // Row r (position n_past0 + r) predicts prompt token n_past0 + r + 1.
        for (int r = 0; r < n && n_past0 + r + 1 < n_prompt; ++r)
          s.prompt_lp.push_back(token_logprobs(row(r), nv, s.req.prompt[static_cast<size_t>(n_past0 + r + 1)],
                                               std::max(0, s.req.logprobs)));
      }
      if (s.n_past < n_prompt) continue;
      s.prefilling = false;
      end_prefill_stats(s);
      // Several choices: the others start from here (Scheduler::spawn).
      if (s.job->n > 1)
        make_fork(s, s.use_ids ? nullptr : row(s.n_out - 1), s.use_ids ? ids[out0 + static_cast<size_t>(s.n_out - 1)] : -1);
      if (s.stopped()) {
        finish(s, FinishReason::Cancelled);
        continue;
      }
      Job::Event ev;
      ev.kind = Job::Kind::Prefilled;
      ev.prompt_logprobs = s.prompt_lp;
      s.job->push(std::move(ev));
      if (s.limit <= 0) {
        finish(s, FinishReason::Length);
        continue;
      }
      const float* last = row(s.n_out - 1);
      const uint64_t* allow = grammar_mask(s);
      if (s.matcher && !allow) {
        finish(s, FinishReason::Stop);
        continue;
      }
      const int32_t t = s.use_ids ? ids[out0 + static_cast<size_t>(s.n_out - 1)] : s.sampler.sample(last, nv, allow);
      bool emitted = false;
      if (put(s, t, last, emitted)) s.pending = t;
      continue;
    }
    // Decode: rows 0..k of [tok, d_1..d_k] predict d_1..d_k and one more token.
    ++s.forward_passes;
    const int k = s.n_draft;
    if (k > 0) {
      s.drafted += k;
      ++s.verify_passes;
    }
    int accepted = 0;
    for (int i = 0; i <= k; ++i) {
      const float* r = row(i);
      bool ok = false;
      int32_t t;
      // The grammar's mask at this row: the matcher has taken every token emitted before it.
      const uint64_t* allow = grammar_mask(s);
      if (s.matcher && !allow) {
        if (i < k) truncate(s, n_past0 + 1 + i);
        finish(s, FinishReason::Stop);
        break;
      }
      if (s.use_ids) {  // greedy: the row's argmax, accepted when it is the draft token
        t = ids[out0 + static_cast<size_t>(i)];
        ok = i < k && t == s.tokens[static_cast<size_t>(i + 1)];
      } else if (i < k) {
        t = s.sampler.verify(r, nv, s.tokens[static_cast<size_t>(i + 1)], ok, allow);
      } else {
        t = s.sampler.sample(r, nv, allow);
      }
      bool emitted = false;
      const bool go = put(s, t, r, emitted);
      if (ok && emitted) ++accepted;
      if (!go || !ok) {
        // Keep the K/V of tok, d_1..d_i only: d_{i+1}.. follow a rejected token, or
        // generation ended at t (which, like any last token, stays out of the cache).
        if (!s.done && i < k) truncate(s, n_past0 + 1 + i);
        s.pending = t;
        break;
      }
    }
    s.accepted += accepted;
    if (k > 0) {
      s.lookup.update(k, accepted);
      s.price.verified(k, accepted);
    }
  }
  return true;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st;
  st.parallel = opts_.parallel;
  st.batch_tokens = opts_.batch_tokens;
  st.running = running_n_.load();
  st.admitted = admitted_.load();
  std::lock_guard<std::mutex> lock(mu_);
  st.queued = static_cast<int>(waiting_.size());
  st.rejected = rejected_;
  st.steps = steps_;
  st.step_rows = step_rows_;
  st.step_seqs = step_seqs_;
  st.prefill_rows = prefill_rows_.load();
  st.probe_passes = probe_passes_.load();
  st.probe_rows = probe_rows_.load();
  st.step_seconds_bounds = step_seconds_bounds();
  st.step_seconds_counts = step_s_counts_;
  st.step_seconds_sum = step_s_sum_;
  st.batch_seqs_bounds = batch_seqs_bounds();
  st.batch_seqs_counts = batch_seqs_counts_;
  st.batch_rows_bounds = batch_rows_bounds();
  st.batch_rows_counts = batch_rows_counts_;
  return st;
}

SpecStats Scheduler::spec_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spec_;
}

}  // namespace swz::engine
