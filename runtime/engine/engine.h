// The serving core: loads a .swz package, renders chat prompts, runs prefill and
// decode on a backend, samples tokens. No JSON and no HTTP here (the server owns
// wire formats); this is the boundary the server and `swizzle-rt run` program against.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace swz::grammar {
struct Grammar;
}

namespace swz::engine {

/// A request the engine cannot run as asked (prompt longer than the context, bad
/// sampling values, unsupported message role...). what() is safe to show a client.
class InvalidRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The engine's device failed and it serves no more requests (Engine::failure()).
/// what() names the first error and says to restart.
class EngineFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The server is at its limit: every running slot is taken and the admission queue is full
/// (EngineOptions::parallel, max_queue). what() says so; retry_after_s is a hint for the
/// client (HTTP 429 with Retry-After).
class Overloaded : public std::runtime_error {
 public:
  Overloaded(const std::string& what, int retry_after_s) : std::runtime_error(what), retry_after_s(retry_after_s) {}
  int retry_after_s = 1;
};

/// A package or model that cannot be loaded (missing files, GGUF mismatch, unsupported
/// architecture or chat template). what() names the file and the reason.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct EngineOptions {
  int n_ctx = 4096;      ///< context size in tokens (prompt + generated); clamped to the model's training context
  int n_threads = 0;     ///< CPU threads; 0 = hardware concurrency
  // Paged KV cache and prefix cache (runtime/kvcache/block_manager.h, docs/server.md "Prefix cache").
  int kv_pages = 0;            ///< KV page pool (64 tokens per page); 0 = room for 4 full contexts. Minimum ceil(n_ctx/64)+1
  bool prefix_cache = true;    ///< false: pages are never shared or kept between requests (cold runs)
  uint64_t cache_host_mb = 1024;  ///< host-RAM tier budget in MiB (0 = no host tier)
  int cache_ttl_s = 300;       ///< sliding TTL of cached blocks in the RAM tiers, seconds (0 = none)
  std::string cache_dir;       ///< disk tier directory ("" = no disk tier)
  std::string cache_key;       ///< the disk tier's 32-byte master key (raw bytes; required with cache_dir)
  uint64_t cache_disk_mb = 10240;  ///< disk tier budget in MiB
  /// Code atoms the `approx` cache mode's index keeps (kvcache::AtomStore: where each
  /// atom's K/V lies in the prefix cache's blocks, ~100 bytes an atom; the K/V itself is
  /// the prefix cache's), least recently used dropped beyond; 0 = the mode reuses nothing.
  uint64_t approx_atoms = 65536;
  /// Prompt-lookup speculative decoding (engine/speculative.h) for requests that do not
  /// choose (GenerateRequest::speculative). Output is the same either way (greedy:
  /// byte-identical; sampled: the same distribution); only speed differs.
  bool speculative = true;
  int spec_draft_max = 16;  ///< upper bound of the draft length γ (>= 1)
  /// Draft pricing (engine/step_cost.h): a draft token only where its estimated acceptance
  /// pays for its row, from the measured step times; false = every proposed draft.
  bool spec_pricing = true;
  // The scheduler (engine/scheduler.h): continuous batching with chunked prefill.
  int parallel = 8;        ///< sequences decoded together at most (running slots); >= 1
  /// Rows (tokens) of one forward pass: every running sequence's decode tokens first
  /// (speculative drafts included), then prompt tokens of prefilling sequences up to this
  /// budget, so a long prompt is spread over several steps. >= parallel. Default 256:
  /// measured on the 2-core dev VM (SmolLM2, 4 streams decoding while a 2,670-token prompt
  /// arrives): 128 / 256 / 512 gave the long prompt's TTFT 29.9 / 26.4 / 30.8 s and the
  /// streams' median inter-token gap meanwhile 1.4 / 2.1 / 5.9 s (docs/server.md).
  int batch_tokens = 256;
  /// Admitted requests that may wait for a slot or for KV pages beyond the running ones;
  /// admit() throws Overloaded past parallel + max_queue outstanding admissions. >= 0.
  int max_queue = 64;
};

/// Sampling, in the order llama.cpp applies them: top_k, top_p, min_p, temperature.
/// temperature <= 0 means greedy (argmax; ties broken by the lowest token id).
struct SamplingParams {
  float temperature = 1.0f;
  int top_k = 0;           ///< 0 = disabled
  float top_p = 1.0f;      ///< 1 = disabled
  float min_p = 0.0f;      ///< 0 = disabled
  std::optional<uint64_t> seed;  ///< absent: a fresh random seed per request
  /// OpenAI's penalties over the tokens generated so far (not the prompt), applied to the
  /// logits before the chain: logit[t] -= count[t] * frequency_penalty
  /// + (count[t] > 0) * presence_penalty. Both in [-2, 2]; 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
};

/// A function call made by an assistant turn (OpenAI `tool_calls[]`, Anthropic `tool_use`).
struct ToolCall {
  std::string id;         ///< the call's id (call_..., toolu_...); templates may show it
  std::string name;       ///< function name
  std::string arguments;  ///< the arguments, a JSON object as text (the engine parses it for the template)
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, std::string content) : role(std::move(role)), content(std::move(content)) {}
  std::string role;     ///< "system" | "user" | "assistant" | "tool" (validated by the engine)
  std::string content;  ///< UTF-8 text
  std::vector<ToolCall> tool_calls;  ///< role "assistant": the calls it made (after `content`)
  std::string tool_call_id;          ///< role "tool": the id of the call this result answers
  std::string name;                  ///< role "tool": the function's name (may be empty)
};

/// A function the model may call. Rendered as OpenAI's
/// {"type": "function", "function": {"name", "description", "parameters"}}, which is what
/// Hugging Face chat templates (`tools`) expect.
struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters = "{}";  ///< JSON Schema of the arguments, a JSON object as text
};

/// Everything tokenize_chat_prompt() renders.
struct ChatPrompt {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;  ///< empty: the template renders no tool section
  bool add_generation_prompt = true;
  /// The last message is an assistant turn to be continued (a "prefill"): the prompt ends
  /// right after its content, without the end-of-turn marker; add_generation_prompt is
  /// then not used.
  bool continue_final_message = false;
  /// Text placed after the generation prompt as if the model had written it, with its
  /// control tokens parsed (e.g. "<tool_call>\n{\"name\": \"" to force a tool call).
  std::string assistant_prefix;
};

/// The most alternatives GenerateRequest::logprobs may ask for (OpenAI's top_logprobs cap).
inline constexpr int kMaxTopLogprobs = 20;

/// A token id and its log-probability (natural log) under the model's distribution.
struct TokenLogprob {
  int32_t token = 0;
  double logprob = 0;
};

/// Log-probabilities of one position: `token` is the token taken there (generated or
/// the next prompt token) with its logprob, `top` the most likely tokens of the position,
/// most likely first (ties: lower id first). Computed by engine/logprobs.h from the raw
/// logits row of the position, before penalties, temperature and the sampling filters
/// (vLLM's default `logprobs_mode=raw_logprobs`), in double precision.
struct TokenLogprobs {
  int32_t token = 0;
  double logprob = 0;
  std::vector<TokenLogprob> top;  ///< size = the request's `logprobs` (fewer if the vocabulary is smaller)
};

/// Prompt token indices [begin, end).
struct TokenSpan {
  int begin = 0;
  int end = 0;
  bool operator==(const TokenSpan&) const = default;
};

/// Share of each reused atom's tokens the `approx` cache mode recomputes, by default:
/// CacheBlend's ~15% (Yao et al. 2025, recomputing 15% of tokens kept quality).
inline constexpr float kApproxRecompute = 0.15f;

/// Which of a reused atom's tokens the `approx` cache mode recomputes (its share
/// GenerateRequest::approx_recompute; the first kApproxMinRecompute tokens always).
enum class ApproxSelect {
  /// The atom's first tokens (EPIC's recompute of each chunk's start, Hu et al. 2024).
  Head,
  /// After the first kApproxMinRecompute, the tokens whose K/V deviates most from what
  /// would be reused (CacheBlend's selection, Yao et al. 2025, §4.3): the first
  /// kApproxProbeLayers layers are computed over the prompt after the cached prefix with
  /// its own context (exec::BatchModel::forward_layers), the last of them is compared per
  /// token with the saved atom's K/V (K re-rotated to the new position; squared error
  /// over K and V), and the windows of kApproxSelectWindow tokens with the largest sum
  /// are recomputed. Models of kApproxProbeLayers layers or fewer select Head.
  Deviation,
};

/// "head" or "deviation".
inline std::string_view approx_select_name(ApproxSelect s) { return s == ApproxSelect::Head ? "head" : "deviation"; }
/// ApproxSelect of its name (approx_select_name); nullopt for another string.
inline std::optional<ApproxSelect> parse_approx_select(std::string_view name) {
  if (name == "head") return ApproxSelect::Head;
  if (name == "deviation") return ApproxSelect::Deviation;
  return std::nullopt;
}

struct GenerateRequest {
  std::vector<int32_t> prompt;  ///< token ids, already templated (see tokenize_chat)
  int max_tokens = -1;          ///< -1 = until end of generation or the context is full
  SamplingParams sampling;
  std::optional<bool> speculative;  ///< speculative decoding on/off; absent = EngineOptions::speculative
  /// -1: no logprobs. 0..kMaxTopLogprobs: every TokenEvent carries the logprob of its
  /// token and this many top alternatives (TokenEvent::logprobs). Speculative decoding
  /// does not change them: a verified position's logits are bit-identical to decoding it
  /// alone (speculative.h).
  int logprobs = -1;
  /// Also compute logprobs for the prompt (GenerateResult::prompt_logprobs, with
  /// max(logprobs, 0) alternatives). Needs every prompt row's logits, so the prefix cache
  /// is not used for such a request (cached_tokens is 0; its blocks are still published).
  bool prompt_logprobs = false;
  /// The prefix cache's disk tier for this request: its blocks are read from and written
  /// to the tier of `cache_tenant` (an organisation; "" = the default tenant), each
  /// tenant's files encrypted with its own key (kvcache/block_manager.h). false: the RAM
  /// tiers only, nothing of this request reaches the disk (zero data retention for the
  /// security endpoint, docs/server.md).
  bool disk_cache = true;
  std::string cache_tenant;
  /// Who may reuse this request's prompt token by token (kvcache::BlockManager::
  /// match_partial): the prompt's blocks are partial-match candidates only for requests of
  /// the same scope (the server: "org:<organisation>" for a store key, "key:<key id>" for
  /// another key, "" without keys), so no one learns how much of another's prompt theirs
  /// shares below a whole 64-token block.
  std::string cache_scope;
  /// Grammar-constrained decoding (runtime/grammar, docs/structured-output.md): every
  /// generated token is drawn from the tokens the grammar allows next (the mask is applied
  /// to the logits before sampling and before speculative verification, so a forbidden
  /// draft token is rejected and output equals plain constrained decoding). Generation
  /// ends with FinishReason::Stop as soon as the text is a complete sentence that cannot
  /// be continued (or the model ends it where the grammar may end); max_tokens still ends
  /// it with Length, the text then a prefix of a sentence. Null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  /// Choices: n answers to the one prompt (OpenAI `n`). The request is admitted once (one
  /// place in the queue; KV pages reserved for the prompt once plus each choice's own
  /// generated tokens), its prompt is prefilled once, then it forks into n sequences that
  /// share the prompt's full KV pages (reference-counted) and decode in the same steps,
  /// each with its own sampler (choice i seeded with choice_seed(sampling.seed, i)),
  /// drafter, grammar matcher and stop conditions. Choice i's tokens are those a request
  /// with n = 1 and that seed would get. Engine::run_choices() runs them; run() needs n = 1.
  /// 1..kMaxChoices.
  int n = 1;
  /// End-of-generation tokens do not end the answer (vLLM's and llama-server's
  /// `ignore_eos`): each is emitted as a generated token (its piece as text) and counted,
  /// and only max_tokens, stop sequences, a grammar's end or the context's end stop
  /// generation. For benchmarks on random-weight models, whose greedy answers hit an EOG
  /// token after a few tokens.
  bool ignore_eos = false;
  /// The `approx` cache mode (experimental; docs/server.md "Cache modes"): the prompt's code
  /// atoms as token ranges (each past the first prompt token and before the last; sorted,
  /// not overlapping). Non-empty: position-independent reuse. After the longest cached
  /// prefix, an atom whose tokens an earlier approx request held anywhere in its prompt
  /// (kvcache::AtomStore) takes that request's K/V instead of a prefill: V as computed, K
  /// re-rotated (RoPE) to the new positions, except an approx_recompute share of its tokens
  /// (at least kApproxMinRecompute; which ones: approx_select), which are prefilled where
  /// they are, attending to everything before them, the installed K/V included (EPIC, Hu et
  /// al. 2024; CacheBlend, Yao et al. 2025).
  /// The reused tokens count as cached_tokens. That K/V is not what a prefill computes, so
  /// approx requests keep prefix-cache blocks of their own: they never match blocks of
  /// exact requests, and exact requests never match theirs. Each atom a prefill computed
  /// is saved for later requests. Empty: exact prefix caching only.
  std::vector<TokenSpan> approx_atoms;
  /// Share of each reused atom recomputed (0..1; kApproxRecompute).
  float approx_recompute = kApproxRecompute;
  /// Which of its tokens (ApproxSelect).
  ApproxSelect approx_select = ApproxSelect::Deviation;
};

/// Tokens of a reused atom the `approx` mode recomputes at least (its first ones).
inline constexpr int kApproxMinRecompute = 2;
/// ApproxSelect::Deviation: layers of the probe pass (the K/V of the last one compared).
inline constexpr int kApproxProbeLayers = 2;
/// ApproxSelect::Deviation: tokens recomputed together (a window is one prompt segment of a
/// pass, so fewer, longer segments than single tokens would make).
inline constexpr int kApproxSelectWindow = 4;
/// Sequence slots of a forward pass beyond EngineOptions::parallel: an approx request's
/// prompt segments between its atom installs run in one pass, a sequence of the pass each
/// (Scheduler::step), instead of a pass each.
inline constexpr int kApproxSegmentSlots = 16;

/// The most choices GenerateRequest::n may ask for.
inline constexpr int kMaxChoices = 64;

/// The seed of choice `index` of a request with `seed`: the seed itself for choice 0 (so
/// n = 1 is unchanged), else a SplitMix64 mix (Steele, Lea, Flood 2014) of seed and index,
/// so each choice has its own reproducible stream of randomness. Absent stays absent
/// (fresh randomness per choice).
inline std::optional<uint64_t> choice_seed(std::optional<uint64_t> seed, int index) {
  if (!seed || index == 0) return seed;
  uint64_t z = *seed + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

enum class FinishReason { Stop, Length, Cancelled };

/// One generated token. `piece` is its raw UTF-8 bytes, which may be a partial
/// character; the caller joins pieces before cutting on character boundaries.
struct TokenEvent {
  int32_t token;
  std::string piece;
  std::optional<TokenLogprobs> logprobs;  ///< present when GenerateRequest::logprobs >= 0
};

struct GenerateResult {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  ///< prompt tokens served from the prefix cache (the longest cached prefix, token-granular), at most prompt_tokens - 1
  FinishReason finish = FinishReason::Stop;
  std::string text;       ///< all pieces joined (bytes)
  double prefill_ms = 0, decode_ms = 0;
  int spec_drafted = 0;   ///< draft tokens verified (speculative decoding; 0 when off)
  int spec_accepted = 0;  ///< draft tokens accepted into the output (<= spec_drafted)
  /// GenerateRequest::prompt_logprobs: entry i is prompt token i + 1 given tokens 0..i
  /// (the first prompt token has none); empty otherwise or when prefill was cancelled.
  std::vector<TokenLogprobs> prompt_logprobs;
};

/// Return false to stop generation (client went away); the result then says Cancelled.
using TokenCallback = std::function<bool(const TokenEvent&)>;
/// A token of choice `index` (0 .. GenerateRequest::n - 1). Return false to stop that
/// choice (its result then says Cancelled); the other choices go on.
using ChoiceTokenCallback = std::function<bool(int index, const TokenEvent&)>;
/// Choice `index` has ended with `result` (called once per choice, before run_choices returns).
using ChoiceDoneCallback = std::function<void(int index, const GenerateResult& result)>;

struct ModelInfo {
  std::string id;          ///< model id shown in /v1/models (general.name or file stem)
  std::string architecture;
  int n_ctx = 0;           ///< the context size in force
  int n_ctx_train = 0;
  int n_vocab = 0;
  std::string package_path;
  std::string backend;     ///< what runs it: "cpu (2 threads)", "cuda (NVIDIA H200, sm_90)", "vulkan (llvmpipe ..., cpu)"
};

/// Polled by run() to learn that the client went away; true = stop now.
using CancelCheck = std::function<bool()>;

/// A request the engine has accepted: validated, and its cached prompt prefix looked
/// up. The counts are known before any prefill runs, so a server can put them in the
/// headers of a streamed response; run() reports the same cached_tokens. The matched
/// cache blocks are pinned from admit() until run() takes them (or the admission is
/// destroyed), so the count is final. Blocks published by requests that run between
/// admit() and run() are used as well (less prefill) but not counted in cached_tokens,
/// which was already reported. An Admission must not outlive its engine.
class Admission {
 public:
  virtual ~Admission() = default;
  const GenerateRequest& request() const { return req_; }
  int prompt_tokens() const { return static_cast<int>(req_.prompt.size()); }
  int cached_tokens() const { return cached_tokens_; }
  /// Of cached_tokens, those reused position-independently (GenerateRequest::approx_atoms).
  int approx_tokens() const { return approx_tokens_; }
  int uncached_tokens() const { return prompt_tokens() - cached_tokens_; }
  /// Cancellation while no token is being delivered: `check` is called before every step
  /// of the request's sequence (each prefill chunk, at most --batch-tokens prompt tokens
  /// apart, and each decode step) from the engine's scheduler thread, and from run()'s
  /// thread every 20 ms while the request waits and after every token; never two calls at
  /// once. When it returns true, the sequence leaves at its next step and run() returns
  /// FinishReason::Cancelled (completion_tokens 0 if prefill was not finished). The
  /// TokenCallback returning false still cancels between generated tokens. Set it before
  /// run(); it must be callable from another thread.
  void set_cancel_check(CancelCheck check) { cancel_ = std::move(check); }
  bool cancel_requested() const { return cancel_ && cancel_(); }
  /// Called by run() once, from its thread, when prefill has finished (not when it was
  /// cancelled), before the first token: with GenerateRequest::prompt_logprobs' entries
  /// (empty when not asked). Lets a stream send what depends on the prompt (echo) first.
  void set_prefill_callback(std::function<void(const std::vector<TokenLogprobs>&)> cb) { prefilled_ = std::move(cb); }
  void prefilled(const std::vector<TokenLogprobs>& prompt_logprobs) const {
    if (prefilled_) prefilled_(prompt_logprobs);
  }
  /// How run() waits, on its caller's thread, for the request's next event (a token, the
  /// end of prefill, a choice's end). Unset (the default): run() blocks its thread on a
  /// condition variable. A caller that must not block a thread while a request generates
  /// (the HTTP server runs each request on a fiber, server/fiber.h) sets both functions:
  struct EventWait {
    /// Called from the scheduler's step thread after each event is queued for the request,
    /// and when the request is cancelled; never blocks. It may be called after run()
    /// returned, so it must own (not borrow) whatever it touches.
    std::function<void()> notify;
    /// Called from run()'s thread when no event is queued: returns once `notify` has been
    /// called since its previous return, or after `timeout` (run() then polls the cancel
    /// check); returning early is allowed, run() looks at the queue again either way.
    std::function<void(std::chrono::milliseconds timeout)> wait;
  };
  /// Set before run(); both functions or neither.
  void set_event_wait(EventWait w) { wait_ = std::move(w); }
  const EventWait& event_wait() const { return wait_; }

 protected:
  Admission(GenerateRequest req, int cached_tokens) : req_(std::move(req)), cached_tokens_(cached_tokens) {}
  GenerateRequest req_;
  int cached_tokens_ = 0;
  int approx_tokens_ = 0;
  CancelCheck cancel_;
  std::function<void(const std::vector<TokenLogprobs>&)> prefilled_;
  EventWait wait_;
};

/// Prefix-cache counters since the engine started (all zero for an engine without one).
/// Token counters count prompt tokens of requests that ran; block counts are a snapshot.
struct CacheStats {
  uint64_t hit_tokens = 0;     ///< prompt tokens served from the cache (incl. blocks found at run time, see Admission)
  uint64_t miss_tokens = 0;    ///< prompt tokens evaluated (prefill)
  uint64_t blocks_device = 0;  ///< cached blocks resident in the backend's KV memory
  uint64_t blocks_host = 0;    ///< cached blocks spilled to host RAM
  uint64_t blocks_disk = 0;    ///< cached blocks in the disk tier
  uint64_t evictions = 0;      ///< blocks dropped from the last tier
  // Additions beyond the first /metrics contract:
  uint64_t pages_total = 0;    ///< KV page pool size (64 tokens per page)
  uint64_t pages_free = 0;     ///< pages neither in a block table nor holding a cached block
  uint64_t spills = 0;         ///< device -> host copies
  uint64_t restores = 0;       ///< host -> device copies on a hit
  uint64_t disk_reads = 0, disk_writes = 0;
  uint64_t disk_rejects = 0;   ///< disk files ignored as corrupt, truncated or foreign
  // The approx cache mode's atom store (kvcache::AtomStore):
  uint64_t approx_atoms = 0;       ///< atoms indexed now
  uint64_t approx_atom_hits = 0;   ///< atoms approx requests found saved, blocks held, at admission
  uint64_t approx_atom_stale = 0;  ///< atoms found whose blocks the prefix cache did not hold
};

/// Speculative-decoding counters since the engine started (for /metrics).
struct SpecStats {
  uint64_t drafted_tokens = 0;    ///< draft tokens verified
  uint64_t accepted_tokens = 0;   ///< draft tokens accepted (acceptance rate = accepted / drafted)
  uint64_t verify_passes = 0;     ///< decode forward passes that verified a draft
  uint64_t decode_passes = 0;     ///< all decode forward passes (plain and verifying)
  uint64_t decode_tokens = 0;     ///< tokens emitted by decode (tokens per pass = decode_tokens / decode_passes)
};

/// The scheduler's state and counters (for /metrics). Histogram counts are per bucket
/// (not cumulative); the last count is the +Inf bucket.
struct SchedulerStats {
  int parallel = 0;          ///< running slots (EngineOptions::parallel)
  int batch_tokens = 0;      ///< rows per forward pass at most
  int running = 0;           ///< sequences in the running batch now
  int queued = 0;            ///< submitted requests waiting for a slot or KV pages
  int admitted = 0;          ///< admissions outstanding (queued, running, or admitted and not yet submitted)
  uint64_t rejected = 0;     ///< admissions refused with Overloaded (queue full)
  uint64_t steps = 0;        ///< forward passes run
  uint64_t step_rows = 0;    ///< rows (tokens) over all steps
  uint64_t step_seqs = 0;    ///< sequences over all steps (batch size = step_seqs / steps)
  uint64_t prefill_rows = 0; ///< prompt rows evaluated (prefill; a request's n choices share one prefill)
  uint64_t probe_passes = 0; ///< approx deviation probes' passes (kApproxProbeLayers layers each)
  uint64_t probe_rows = 0;   ///< prompt rows those passes evaluated
  std::vector<double> step_seconds_bounds;  ///< upper bounds of the step-time histogram, seconds
  std::vector<uint64_t> step_seconds_counts;
  double step_seconds_sum = 0;
  std::vector<double> batch_seqs_bounds;    ///< upper bounds of the sequences-per-step histogram
  std::vector<uint64_t> batch_seqs_counts;
  std::vector<double> batch_rows_bounds;    ///< upper bounds of the rows-per-step histogram
  std::vector<uint64_t> batch_rows_counts;
};

class Engine {
 public:
  /// Loads a package directory written by `swizzlec compile`. Throws LoadError.
  static std::unique_ptr<Engine> load(const std::string& package_path, const EngineOptions& opts);
  virtual ~Engine() = default;

  virtual const ModelInfo& info() const = 0;
  /// Renders `messages` with the model's own chat template and tokenizes the result.
  /// Text of the messages never becomes a special/control token. Throws InvalidRequest.
  virtual std::vector<int32_t> tokenize_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) = 0;
  /// Like tokenize_chat, with tool definitions, tool-call/tool-result messages, a
  /// continued final assistant message and a forced assistant prefix (see ChatPrompt).
  /// Tool calls use the template's own syntax when it renders `tools` (Qwen2.5:
  /// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`); for a template without
  /// tool support the engine describes the tools in the system message and writes calls
  /// and results in that same `<tool_call>` / `<tool_response>` syntax (Hermes format).
  /// The default implementation serves plain prompts through tokenize_chat and throws
  /// InvalidRequest for anything else. Throws InvalidRequest (bad role, arguments that
  /// are not a JSON object, a continuation whose last message is not the assistant's).
  virtual std::vector<int32_t> tokenize_chat_prompt(const ChatPrompt& p) {
    bool plain = p.tools.empty() && !p.continue_final_message && p.assistant_prefix.empty();
    for (const ChatMessage& m : p.messages) plain = plain && m.tool_calls.empty() && m.role != "tool";
    if (!plain) throw InvalidRequest("this engine does not support tools or continued messages");
    return tokenize_chat(p.messages, p.add_generation_prompt);
  }
  /// Plain-text tokenization (optionally adding BOS as the model's metadata says).
  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) = 0;
  virtual std::string detokenize(const std::vector<int32_t>& tokens) = 0;
  /// The raw bytes of one token as generation emits them (TokenEvent::piece; may be a
  /// partial UTF-8 character). Default: detokenize({id}).
  virtual std::string token_piece(int32_t id) { return detokenize({id}); }
  /// Validates `req` and looks up its cached prefix. Throws Overloaded when the
  /// scheduler's queue is full (EngineOptions::max_queue), InvalidRequest when the
  /// prompt is empty, holds an id outside the vocabulary, does not leave room in the
  /// context, the sampling values are invalid, or logprobs is outside -1..kMaxTopLogprobs.
  virtual std::unique_ptr<Admission> admit(const GenerateRequest& req) = 0;
  /// Generates for an admitted request until an end-of-generation token, max_tokens, a
  /// full context, or the callback returns false. Thread-safe: concurrent calls run
  /// together (PackageEngine: the scheduler's step loop batches them; the callback and
  /// the cancel check run on the caller's thread). `a` must come from this engine's admit().
  virtual GenerateResult run(Admission& a, const TokenCallback& on_token) = 0;
  /// Runs every choice of an admitted request (GenerateRequest::n) to its end and returns
  /// their results in index order (each with the request's prompt_tokens, cached_tokens
  /// and prompt_logprobs). Tokens of the choices arrive interleaved, on the caller's
  /// thread, through `on_token`, and `on_done` (optional) hears of each choice as it ends.
  /// The admission's cancel check cancels every choice; the prefill callback is called
  /// once. If a choice fails, the others are cancelled and the first error is rethrown
  /// once all have ended. PackageEngine prefills the prompt once and decodes the choices
  /// as sequences of one batch sharing the prompt's KV pages. This default runs n = 1
  /// through run() and, for n > 1, admits and runs the choices one after another (choice
  /// i with n = 1 and choice_seed(seed, i)), as engines without a scheduler did.
  virtual std::vector<GenerateResult> run_choices(Admission& a, const ChoiceTokenCallback& on_token,
                                                  const ChoiceDoneCallback& on_done = {});
  /// admit() then run().
  GenerateResult generate(const GenerateRequest& req, const TokenCallback& on_token) {
    std::unique_ptr<Admission> a = admit(req);
    return run(*a, on_token);
  }
  virtual CacheStats cache_stats() const { return {}; }
  virtual SpecStats spec_stats() const { return {}; }
  virtual SchedulerStats scheduler_stats() const { return {}; }
  /// Empty while the engine can serve; after its device failed (a CUDA fault, a lost
  /// Vulkan device: such errors stick to the context) the reason, and every later
  /// admit() and run() throws EngineFailed. A server reports it on /health (503) so that
  /// a supervisor restarts the process.
  virtual std::string failure() const { return {}; }
};

inline std::vector<GenerateResult> Engine::run_choices(Admission& a, const ChoiceTokenCallback& on_token,
                                                       const ChoiceDoneCallback& on_done) {
  const int n = std::max(1, a.request().n);
  std::vector<GenerateResult> out;
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Admission> own;  // n > 1: choice i as a request of its own
    Admission* run_on = &a;
    if (n > 1) {
      GenerateRequest r = a.request();
      r.n = 1;
      r.sampling.seed = choice_seed(r.sampling.seed, i);
      own = admit(r);
      own->set_cancel_check([&a] { return a.cancel_requested(); });
      own->set_event_wait(a.event_wait());
      if (i == 0) own->set_prefill_callback([&a](const std::vector<TokenLogprobs>& lp) { a.prefilled(lp); });
      run_on = own.get();
    }
    out.push_back(run(*run_on, [&](const TokenEvent& ev) { return !on_token || on_token(i, ev); }));
    out.back().cached_tokens = a.cached_tokens();
    if (on_done) on_done(i, out.back());
  }
  return out;
}

}  // namespace swz::engine
