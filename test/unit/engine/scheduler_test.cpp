// The scheduler (engine/scheduler.h) on the real default model (SmolLM2-135M-Instruct
// Q4_1; path from SWZ_PACKAGE, as prefix_cache_engine_test):
//  - 16 requests run together give exactly the greedy tokens each gives alone, with
//    chunked prefill (a small --batch-tokens) and speculative decoding, and without
//    either, and the steps really carried several sequences;
//  - a request cancelled while it waits for a slot ends at once without a token;
//  - admissions past parallel + max_queue throw Overloaded;
//  - a page pool that fits one request at a time queues the second, both are exact, and
//    every page is free afterwards; reservations are exact (a copy-on-write page only for
//    a prompt of whole blocks, which a full prefix-cache hit writes again);
//  - a request with n choices prefills its prompt once and its choices equal requests of
//    their own (greedy: the single request's tokens; sampled: choice i equals a request
//    seeded choice_seed(seed, i)), whether they all run at once or in waves, with the
//    prompt's last page partial or full; stopping one choice leaves the others exact,
//    cancelling the request ends them all; every page is free afterwards.
//  - a run that waits through the admission's EventWait (as the server's fibers do) is
//    notified of every event and gives the same tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "require_package.h"

namespace swz::engine {
namespace {

const char* kTopics[] = {"a binary search in C",
                         "why the sky is blue",
                         "a haiku about compilers",
                         "the difference between TCP and UDP",
                         "how to reverse a linked list in Python, with the code repeated twice",
                         "three uses of a hash map",
                         "what a KV cache is in a transformer",
                         "the rules of tic-tac-toe"};

std::vector<int32_t> prompt_for(Engine& e, int i) {
  std::string text = std::string("Explain ") + kTopics[i % 8] + ".";
  // Two prompts of over 256 tokens: decode attention over more than 256 positions runs
  // split over the context on GPU packages (partials in scratch, then a reduction).
  if (i % 4 == 3)
    for (int r = 0; r < 24; ++r) text += " Consider also item " + std::to_string(r) + " of the list, " + kTopics[r % 8] + ".";
  // Longer prompts for some, so prefill spans several steps of a small token budget.
  for (int r = 0; r < i % 3; ++r) text += " Please be precise and give a short example of " + std::string(kTopics[(i + r + 1) % 8]) + ".";
  return e.tokenize_chat({{"user", text}}, true);
}

struct Gen {
  std::vector<int32_t> tokens;
  GenerateResult r;
};

Gen greedy(Engine& e, const std::vector<int32_t>& prompt, int n, std::function<bool()> cancel = {}, bool ignore_eos = false) {
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = n;
  req.ignore_eos = ignore_eos;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> a = e.admit(req);
  if (cancel) a->set_cancel_check(cancel);
  Gen out;
  out.r = e.run(*a, [&](const TokenEvent& ev) {
    out.tokens.push_back(ev.token);
    return true;
  });
  return out;
}

EngineOptions opts() {
  EngineOptions o;
  o.n_ctx = 512;
  o.prefix_cache = false;
  return o;
}

/// Runs `prompts` concurrently (one thread each) on `e`, kTokens greedy tokens each.
std::vector<Gen> together(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int n) {
  std::vector<Gen> out(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) threads.emplace_back([&, i] { out[i] = greedy(e, prompts[i], n); });
  for (auto& t : threads) t.join();
  return out;
}

/// Steps since `before` that carried two or more sequences.
uint64_t multi_sequence_steps(const SchedulerStats& before, const SchedulerStats& after) {
  uint64_t multi = 0;
  for (size_t b = 1; b < after.batch_seqs_counts.size(); ++b) multi += after.batch_seqs_counts[b] - before.batch_seqs_counts[b];
  return multi;
}

// Issue 14 item 5: 16 different prompts (four of them past 256 tokens) give the same
// greedy tokens alone and all together, with chunked prefill (a 48-token budget) and
// speculative decoding, and without either.
TEST(Scheduler, ConcurrentGreedyEqualsAlone) {
  REQUIRE_PACKAGE(path);
  constexpr int kN = 16, kTokens = 16;
  EngineOptions o = opts();
  o.n_ctx = 1024;
  o.kv_pages = 256;  // room for all 16 at once
  o.parallel = kN;
  std::unique_ptr<Engine> alone_engine = Engine::load(path, o);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Gen> alone;
  for (int i = 0; i < kN; ++i) {
    prompts.push_back(prompt_for(*alone_engine, i));
    alone.push_back(greedy(*alone_engine, prompts.back(), kTokens));
    ASSERT_GT(alone.back().tokens.size(), 0u);
  }
  const SchedulerStats a = alone_engine->scheduler_stats();
  EXPECT_EQ(a.batch_seqs_counts[0], a.steps) << "alone, every step carries one sequence";

  struct Case {
    const char* name;
    int batch_tokens;
    bool speculative;
  };
  for (const Case& c : {Case{"chunked prefill, speculative", 48, true}, Case{"whole prompts, no speculation", 512, false}}) {
    SCOPED_TRACE(c.name);
    EngineOptions oc = o;
    oc.batch_tokens = c.batch_tokens;
    oc.speculative = c.speculative;
    std::unique_ptr<Engine> e = Engine::load(path, oc);
    const SchedulerStats before = e->scheduler_stats();
    const std::vector<Gen> got = together(*e, prompts, kTokens);
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(got[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(got[i].r.text, alone[i].r.text) << "request " << i;
      EXPECT_EQ(got[i].r.finish, alone[i].r.finish) << "request " << i;
      EXPECT_EQ(got[i].r.completion_tokens, static_cast<int>(alone[i].tokens.size()));
    }
    const SchedulerStats after = e->scheduler_stats();
    EXPECT_GT(multi_sequence_steps(before, after), 0u);
    EXPECT_GT(after.step_seqs - before.step_seqs, after.steps - before.steps) << "more sequences than steps: batching happened";
    EXPECT_EQ(after.running, 0);
    EXPECT_EQ(after.queued, 0);
    EXPECT_EQ(after.admitted, 0);
    const CacheStats cs = e->cache_stats();
    EXPECT_EQ(cs.pages_free, cs.pages_total) << "every page is back (prefix cache off)";
  }
}

TEST(Scheduler, CancelWhileQueuedEndsAtOnceWithoutTokens) {
  REQUIRE_PACKAGE(path);
  EngineOptions o = opts();
  o.parallel = 1;
  std::unique_ptr<Engine> e = Engine::load(path, o);
  const std::vector<int32_t> p = prompt_for(*e, 1);
  std::atomic<bool> first_started{false};
  Gen first;
  std::chrono::steady_clock::time_point first_end, second_end;
  std::thread t([&] {
    GenerateRequest req;
    req.prompt = p;
    req.max_tokens = 64;
    // All 64 tokens (~0.4 s on the 2-core VM): the first request must outlast the second's
    // cancel. Its greedy answer ends after 12 tokens (~80 ms), which an idle machine
    // reached before the cancelled request had left the queue (the test failed 2 of 3 runs).
    req.ignore_eos = true;
    req.sampling.temperature = 0;
    std::unique_ptr<Admission> a = e->admit(req);
    first.r = e->run(*a, [&](const TokenEvent& ev) {
      first_started = true;
      first.tokens.push_back(ev.token);
      return true;
    });
    first_end = std::chrono::steady_clock::now();
  });
  while (!first_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Gen second = greedy(*e, p, 64, [&] { return cancel.load(); });
  second_end = std::chrono::steady_clock::now();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  canceller.join();
  t.join();
  EXPECT_EQ(second.r.finish, FinishReason::Cancelled);
  EXPECT_TRUE(second.tokens.empty());
  EXPECT_EQ(second.r.completion_tokens, 0);
  EXPECT_NE(first.r.finish, FinishReason::Cancelled);
  EXPECT_EQ(first.r.completion_tokens, static_cast<int>(first.tokens.size()));
  // Left the queue within a few polls, while the first request still ran.
  EXPECT_LT(waited, 1.0);
  EXPECT_LT(second_end, first_end);
  const CacheStats cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);
}

// Admission::EventWait: run() waits through the caller's functions instead of its condition
// variable, the step thread notifies each event it queues (each token, the end of prefill,
// the choice's end), and the tokens are those of a plain run.
TEST(Scheduler, EventWaitIsNotifiedOfEveryEventAndGivesTheSameTokens) {
  REQUIRE_PACKAGE(path);
  std::unique_ptr<Engine> e = Engine::load(path, opts());
  const std::vector<int32_t> p = prompt_for(*e, 2);
  const Gen plain = greedy(*e, p, 12);

  // A waiter of its own: a semaphore of one permit (what the server's fibers are).
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false;
    int notified = 0, waits = 0, timed_out = 0;
  };
  auto w = std::make_shared<Waiter>();
  GenerateRequest req;
  req.prompt = p;
  req.max_tokens = 12;
  req.sampling.temperature = 0;
  std::unique_ptr<Admission> a = e->admit(req);
  a->set_event_wait({[w] {
                       std::lock_guard<std::mutex> lock(w->mu);
                       w->pending = true;
                       ++w->notified;
                       w->cv.notify_one();
                     },
                     [w](std::chrono::milliseconds timeout) {
                       std::unique_lock<std::mutex> lock(w->mu);
                       ++w->waits;
                       if (!w->cv.wait_for(lock, timeout, [&] { return w->pending; })) ++w->timed_out;
                       w->pending = false;
                     }});
  Gen waited;
  waited.r = e->run(*a, [&](const TokenEvent& ev) {
    waited.tokens.push_back(ev.token);
    return true;
  });
  EXPECT_EQ(waited.tokens, plain.tokens);
  EXPECT_EQ(waited.r.completion_tokens, 12);
  std::lock_guard<std::mutex> lock(w->mu);
  // 12 tokens, the end of prefill and the end of the choice: 14 events, each notified.
  EXPECT_GE(w->notified, 14);
  EXPECT_GE(w->waits, 1);  // run() waited through it (the prefill, at least)
}

TEST(Scheduler, AdmissionsPastTheQueueAreOverloaded) {
  REQUIRE_PACKAGE(path);
  EngineOptions o = opts();
  o.parallel = 1;
  o.max_queue = 1;
  std::unique_ptr<Engine> e = Engine::load(path, o);
  GenerateRequest req;
  req.prompt = prompt_for(*e, 0);
  req.max_tokens = 2;
  std::unique_ptr<Admission> a = e->admit(req), b = e->admit(req);
  try {
    (void)e->admit(req);
    FAIL() << "a third admission must be refused";
  } catch (const Overloaded& ex) {
    EXPECT_GE(ex.retry_after_s, 1);
  }
  EXPECT_EQ(e->scheduler_stats().rejected, 1u);
  EXPECT_EQ(e->scheduler_stats().admitted, 2);
  e->run(*a, nullptr);  // a finished run gives its place back
  EXPECT_EQ(e->scheduler_stats().admitted, 1);
  std::unique_ptr<Admission> c = e->admit(req);
  b.reset();  // as does a dropped admission
  std::unique_ptr<Admission> d = e->admit(req);
  EXPECT_EQ(e->scheduler_stats().admitted, 2);
}

TEST(Scheduler, KvExhaustionQueuesInsteadOfFailing) {
  REQUIRE_PACKAGE(path);
  EngineOptions o = opts();
  o.n_ctx = 256;
  o.kv_pages = 5;  // room for one request of the whole context at a time
  o.parallel = 4;
  std::unique_ptr<Engine> e = Engine::load(path, o);
  const std::vector<int32_t> p0 = prompt_for(*e, 2), p1 = prompt_for(*e, 5);
  const Gen a0 = greedy(*e, p0, -1), a1 = greedy(*e, p1, -1);  // until the end of the answer or the context
  const SchedulerStats before = e->scheduler_stats();
  Gen t0, t1;
  std::thread x([&] { t0 = greedy(*e, p0, -1); });
  std::thread y([&] { t1 = greedy(*e, p1, -1); });
  x.join();
  y.join();
  EXPECT_EQ(t0.tokens, a0.tokens);
  EXPECT_EQ(t1.tokens, a1.tokens);
  const SchedulerStats after = e->scheduler_stats();
  EXPECT_EQ(after.batch_seqs_counts[0] - before.batch_seqs_counts[0], after.steps - before.steps)
      << "the pool holds one such request: they ran one after the other";
  const CacheStats cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);
}

// A request reserves the pages its positions cover, plus one only when its prompt is whole
// blocks (a full prefix-cache hit writes its last cached block again, into a copy): two
// requests of two pages each run together in a pool of four, and a full hit in a pool of
// its reservation gets its copy and the cold run's tokens.
TEST(Scheduler, PageReservationsAreExact) {
  REQUIRE_PACKAGE(path);
  {
    EngineOptions o = opts();
    o.n_ctx = 128;
    o.kv_pages = 4;
    o.parallel = 2;
    std::unique_ptr<Engine> e = Engine::load(path, o);
    std::vector<int32_t> p0 = prompt_for(*e, 3), p1 = prompt_for(*e, 7);
    p0.resize(70), p1.resize(70);  // 70 + 50 positions: two pages each
    // ignore_eos: all 50 tokens, every position the pages were reserved for
    const Gen a0 = greedy(*e, p0, 50, {}, true), a1 = greedy(*e, p1, 50, {}, true);
    ASSERT_EQ(a0.tokens.size(), 50u);
    ASSERT_EQ(a1.tokens.size(), 50u);
    const SchedulerStats before = e->scheduler_stats();
    Gen t0, t1;
    std::thread x([&] { t0 = greedy(*e, p0, 50, {}, true); });
    std::thread y([&] { t1 = greedy(*e, p1, 50, {}, true); });
    x.join();
    y.join();
    EXPECT_EQ(t0.tokens, a0.tokens);
    EXPECT_EQ(t1.tokens, a1.tokens);
    const SchedulerStats after = e->scheduler_stats();
    EXPECT_GT(after.batch_seqs_counts[1] - before.batch_seqs_counts[1], 0u) << "no step carried both requests";
    const CacheStats cs = e->cache_stats();
    EXPECT_EQ(cs.pages_free, cs.pages_total);
  }
  {
    EngineOptions o = opts();
    o.n_ctx = 192;
    o.kv_pages = 4;  // 128 + 8 positions: three pages, and the copy of the full hit's last block
    o.prefix_cache = true;
    std::unique_ptr<Engine> e = Engine::load(path, o);
    std::vector<int32_t> p = prompt_for(*e, 3);
    p.resize(128);
    const Gen cold = greedy(*e, p, 8, {}, true), warm = greedy(*e, p, 8, {}, true);
    EXPECT_EQ(cold.r.cached_tokens, 0);
    EXPECT_EQ(warm.r.cached_tokens, 127) << "a full hit: every block but the last position";
    EXPECT_EQ(warm.tokens, cold.tokens);
    EXPECT_EQ(warm.tokens.size(), 8u);
  }
}

/// Runs `req` (req.n choices) through Engine::run_choices; choice i's tokens and result.
/// `stop_at(i, k)` true stops choice i after its k-th token (1-based).
std::vector<Gen> run_n(Engine& e, const GenerateRequest& req, std::function<bool(int, int)> stop_at = {},
                       std::function<bool()> cancel = {}) {
  std::unique_ptr<Admission> a = e.admit(req);
  if (cancel) a->set_cancel_check(cancel);
  std::vector<Gen> out(static_cast<size_t>(req.n));
  std::vector<int> done_calls(static_cast<size_t>(req.n), 0);
  std::vector<GenerateResult> rs = e.run_choices(
      *a,
      [&](int i, const TokenEvent& ev) {
        std::vector<int32_t>& t = out[static_cast<size_t>(i)].tokens;
        t.push_back(ev.token);
        return !(stop_at && stop_at(i, static_cast<int>(t.size())));
      },
      [&](int i, const GenerateResult&) { ++done_calls[static_cast<size_t>(i)]; });
  EXPECT_EQ(rs.size(), static_cast<size_t>(req.n));
  for (size_t i = 0; i < rs.size(); ++i) {
    out[i].r = rs[i];
    EXPECT_EQ(done_calls[i], 1) << "choice " << i << ": one done call";
  }
  return out;
}

GenerateRequest sampled(const std::vector<int32_t>& prompt, int max_tokens, uint64_t seed) {
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = max_tokens;
  req.sampling.temperature = 0.9f;
  req.sampling.top_k = 40;
  req.sampling.seed = seed;
  return req;
}

// Issue 14 item 2: n > 1 choices are sequences of one batch sharing the prompt's pages.
TEST(Scheduler, ChoicesShareOnePrefillAndEqualSeparateRequests) {
  REQUIRE_PACKAGE(path);
  constexpr int kTokens = 24;
  EngineOptions o = opts();
  o.n_ctx = 1024;
  o.kv_pages = 64;
  std::unique_ptr<Engine> e = Engine::load(path, o);
  const std::vector<int32_t> long_prompt = prompt_for(*e, 3);
  ASSERT_GT(long_prompt.size(), 200u);
  ASSERT_NE(long_prompt.size() % 64, 0u) << "the last prompt page is partial (copied per choice)";
  // A prompt of exactly two pages: the choices' first tokens start a page of their own.
  const std::vector<int32_t> two_pages(long_prompt.begin(), long_prompt.begin() + 128);

  for (const std::vector<int32_t>* prompt : {&long_prompt, &two_pages}) {
    SCOPED_TRACE("prompt of " + std::to_string(prompt->size()) + " tokens");
    const Gen ref = greedy(*e, *prompt, kTokens);
    ASSERT_EQ(ref.tokens.size(), static_cast<size_t>(kTokens));

    // Greedy: every choice is the single request's answer.
    GenerateRequest req;
    req.prompt = *prompt;
    req.max_tokens = kTokens;
    req.sampling.temperature = 0;
    req.n = 4;
    const SchedulerStats before = e->scheduler_stats();
    const std::vector<Gen> got = run_n(*e, req);
    const SchedulerStats after = e->scheduler_stats();
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[i].tokens, ref.tokens) << "choice " << i;
      EXPECT_EQ(got[i].r.text, ref.r.text) << "choice " << i;
      EXPECT_EQ(got[i].r.finish, FinishReason::Length);
      EXPECT_EQ(got[i].r.completion_tokens, kTokens);
      EXPECT_EQ(got[i].r.prompt_tokens, static_cast<int>(prompt->size()));
    }
    EXPECT_EQ(after.prefill_rows - before.prefill_rows, prompt->size()) << "the prompt is prefilled once";
    // Bucket 2 of {1, 2, 4, ...}: steps of 3 or 4 sequences (the choices decoding together).
    EXPECT_GT(after.batch_seqs_counts[2] - before.batch_seqs_counts[2], 0u);
    EXPECT_EQ(after.running, 0);
    EXPECT_EQ(after.admitted, 0);
    CacheStats cs = e->cache_stats();
    EXPECT_EQ(cs.pages_free, cs.pages_total) << "every page is back";

    // Sampled: choice i equals a request of its own seeded choice_seed(seed, i).
    constexpr uint64_t kSeed = 1234;
    std::vector<Gen> alone;
    for (int i = 0; i < 3; ++i) {
      GenerateRequest one = sampled(*prompt, kTokens, *choice_seed(kSeed, i));
      alone.push_back(run_n(*e, one).front());
    }
    EXPECT_NE(alone[0].tokens, alone[1].tokens) << "different seeds, different samples";
    GenerateRequest three = sampled(*prompt, kTokens, kSeed);
    three.n = 3;
    const uint64_t rows0 = e->scheduler_stats().prefill_rows;
    const std::vector<Gen> s3 = run_n(*e, three);
    EXPECT_EQ(e->scheduler_stats().prefill_rows - rows0, prompt->size());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(s3[i].tokens, alone[i].tokens) << "choice " << i;
      EXPECT_EQ(s3[i].r.text, alone[i].r.text) << "choice " << i;
    }
    cs = e->cache_stats();
    EXPECT_EQ(cs.pages_free, cs.pages_total);
  }
}

// More choices than running slots: they run in waves from the one prefill.
TEST(Scheduler, ChoicesBeyondParallelRunInWaves) {
  REQUIRE_PACKAGE(path);
  EngineOptions o = opts();
  o.parallel = 2;
  std::unique_ptr<Engine> e = Engine::load(path, o);
  const std::vector<int32_t> p = prompt_for(*e, 1);
  constexpr uint64_t kSeed = 77;
  std::vector<Gen> alone;
  for (int i = 0; i < 5; ++i) alone.push_back(run_n(*e, sampled(p, 12, *choice_seed(kSeed, i))).front());
  GenerateRequest req = sampled(p, 12, kSeed);
  req.n = 5;
  const SchedulerStats before = e->scheduler_stats();
  const std::vector<Gen> got = run_n(*e, req);
  const SchedulerStats after = e->scheduler_stats();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i].tokens, alone[i].tokens) << "choice " << i;
  EXPECT_EQ(after.prefill_rows - before.prefill_rows, p.size());
  EXPECT_EQ(after.batch_seqs_counts[2], before.batch_seqs_counts[2]) << "never more than 2 sequences in a step";
  const CacheStats cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);
}

// Stopping one choice (its callback returns false) leaves the others exact; cancelling
// the request ends every choice; the pages come back either way.
TEST(Scheduler, ChoicesStopAloneOrAllTogether) {
  REQUIRE_PACKAGE(path);
  std::unique_ptr<Engine> e = Engine::load(path, opts());
  const std::vector<int32_t> p = prompt_for(*e, 4);
  const Gen ref = greedy(*e, p, 20);
  ASSERT_EQ(ref.tokens.size(), 20u);
  GenerateRequest req;
  req.prompt = p;
  req.max_tokens = 20;
  req.sampling.temperature = 0;
  req.n = 3;
  std::vector<Gen> got = run_n(*e, req, [](int i, int k) { return i == 1 && k == 3; });
  EXPECT_EQ(got[1].r.finish, FinishReason::Cancelled);
  EXPECT_EQ(got[1].tokens, std::vector<int32_t>(ref.tokens.begin(), ref.tokens.begin() + 3));
  EXPECT_EQ(got[1].r.completion_tokens, 3);
  for (int i : {0, 2}) {
    EXPECT_EQ(got[i].tokens, ref.tokens) << "choice " << i;
    EXPECT_EQ(got[i].r.finish, FinishReason::Length);
  }
  CacheStats cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);

  // The client goes away after a few tokens: every choice ends, cancelled.
  std::atomic<int> tokens{0};
  req.max_tokens = 200;
  got = run_n(
      *e, req,
      [&](int, int) {
        ++tokens;
        return false;
      },
      [&] { return tokens.load() >= 4; });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].r.finish, FinishReason::Cancelled) << "choice " << i;
    EXPECT_LT(got[i].tokens.size(), 200u);
  }
  EXPECT_EQ(e->scheduler_stats().running, 0);
  cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);

  // Cancelled before it ever ran: every choice reports Cancelled, no tokens.
  got = run_n(*e, req, {}, [] { return true; });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].r.finish, FinishReason::Cancelled);
    EXPECT_TRUE(got[i].tokens.empty());
  }
  cs = e->cache_stats();
  EXPECT_EQ(cs.pages_free, cs.pages_total);
}

}  // namespace
}  // namespace swz::engine
