#include "engine/speculative.h"

#include <algorithm>

namespace swz::engine {

DecodeStats decode(DecodeModel& model, Sampler& sampler, std::vector<float>& logits, const std::vector<int32_t>& prompt,
                   const DecodeOptions& opts, const std::function<bool(int32_t)>& is_eog,
                   const std::function<bool(int32_t, const float*)>& emit) {
  DecodeStats st;
  const int limit = opts.max_tokens;
  const int nv = opts.n_vocab;
  PromptLookup lookup(opts.lookup);
  if (opts.speculative) lookup.reset(prompt.data(), prompt.size());

  // Hands one sampled token to the caller. Returns whether generation goes on; `emitted`
  // says whether the token became part of the output.
  auto put = [&](int32_t t, const float* row, bool& emitted) {
    emitted = false;
    if (is_eog(t)) {
      st.finish = FinishReason::Stop;
      return false;
    }
    ++st.completion_tokens;
    emitted = true;
    if (!emit(t, row)) {
      st.finish = FinishReason::Cancelled;
      return false;
    }
    if (opts.speculative) lookup.push(t);
    return st.completion_tokens < limit;  // else finish stays Length
  };

  if (limit <= 0) return st;
  bool emitted = false;
  int32_t tok = sampler.sample(logits.data(), nv);  // emitted but not yet in the KV cache
  if (!put(tok, logits.data(), emitted)) return st;

  std::vector<int32_t> draft, batch, ids;
  for (;;) {
    const int n_past = model.n_past();
    if (n_past + 1 > opts.n_ctx) break;  // context full: Length
    if (opts.speculative) {
      // Emitting every draft token may not pass max_tokens; the batch must fit the context.
      lookup.draft(std::min(limit - st.completion_tokens, opts.n_ctx - n_past - 1), draft);
    }
    ++st.forward_passes;
    if (!opts.speculative || draft.empty()) {
      if (opts.device_argmax && model.forward_argmax(&tok, 1, 1, ids)) {
        tok = ids[0];
        if (!put(tok, nullptr, emitted)) break;
        continue;
      }
      model.forward(&tok, 1, 1, logits);
      tok = sampler.sample(logits.data(), nv);
      if (!put(tok, logits.data(), emitted)) break;
      continue;
    }
    // Verify: rows 0..k of the batch [tok, d_1..d_k] predict d_1..d_k and one more token.
    const int k = static_cast<int>(draft.size());
    batch.assign(1, tok);
    batch.insert(batch.end(), draft.begin(), draft.end());
    const bool by_ids = opts.device_argmax && model.forward_argmax(batch.data(), k + 1, k + 1, ids);
    if (!by_ids) model.forward(batch.data(), k + 1, k + 1, logits);
    st.drafted += k;
    ++st.verify_passes;
    int accepted = 0;
    bool go = true;
    for (int i = 0; i <= k; ++i) {
      const float* row = by_ids ? nullptr : logits.data() + static_cast<size_t>(i) * nv;
      bool ok = false;
      int32_t t;
      if (by_ids) {  // greedy: the row's argmax, accepted when it is the draft token
        t = ids[static_cast<size_t>(i)];
        ok = i < k && t == draft[static_cast<size_t>(i)];
      } else {
        t = i < k ? sampler.verify(row, nv, draft[static_cast<size_t>(i)], ok) : sampler.sample(row, nv);
      }
      go = put(t, row, emitted);
      if (ok && emitted) ++accepted;
      if (!go || !ok) {
        // Keep the K/V of tok, d_1..d_i only: d_{i+1}.. follow a rejected token, or
        // generation ended at t (which, like any last token, stays out of the cache).
        if (i < k) model.truncate(n_past + 1 + i);
        tok = t;
        break;
      }
    }
    st.accepted += accepted;
    lookup.update(k, accepted);
    if (!go) break;
  }
  // As after plain decoding, the KV cache holds the prompt and the emitted tokens but
  // the last one.
  return st;
}

}  // namespace swz::engine
