// What a decode pass costs as a function of its rows, fitted on the passes the scheduler
// runs, and what that says about speculative drafts (Scheduler::step, "draft pricing").
//
// Model: t = a + b * rows (seconds) over decode passes (every row a decode token or a
// draft token, each with its logits; passes carrying prompt rows cost differently per row
// and are not used), fitted by exponentially weighted least squares (weight 0.98^age,
// ~50 passes), so it follows the machine, the model, the context and the batch as they
// are: the fit is local to the rows the passes have had lately. `a` is what a pass costs
// whatever it carries (on a GPU: streaming the weights once), b what each row adds (on a
// CPU with 8 sequences decoding, a compute-bound pass: most of it).
//
// A draft token is worth its row when the tokens it is expected to yield per second of
// that row beat the pass's own tokens per second:
//   P(accepted) > b * tokens_of_pass / t(rows)          (DraftPricing::threshold)
// So where a row is nearly free (a GPU, a >> b * rows) drafts are kept; on a 2-core CPU
// with 8 sequences decoding a draft must be accepted most of the time to pay
// (bench/RESULTS.md, 2026-12-03). Greedy sequences only: their tokens are the same
// whatever is drafted; a sampled sequence's random draws follow its drafts, so pricing
// them would make a seeded request's text depend on the server's load.
#pragma once

#include <algorithm>
#include <optional>

namespace swz::engine {

class StepCostModel {
 public:
  struct Fit {
    double a = 0, b = 0;  ///< seconds: per pass, per row
    /// Estimated seconds of a decode pass of `rows` rows.
    double seconds(int rows) const { return a + b * rows; }
  };

  /// Records a decode pass of `rows` rows that took `seconds`.
  void observe(int rows, double seconds) {
    const double r = rows, t = seconds;
    n_ = n_ * kDecay + 1;
    sr_ = sr_ * kDecay + r;
    st_ = st_ * kDecay + t;
    srr_ = srr_ * kDecay + r * r;
    srt_ = srt_ * kDecay + r * t;
    ++count_;
  }

  /// The fit, or nothing before kMinSteps passes. While the recent passes had (nearly) all
  /// the same number of rows, which says nothing about what a row costs (pricing itself
  /// keeps passes at one size), the last fit that could be made; nothing before the first.
  std::optional<Fit> fit() {
    if (count_ < kMinSteps) return std::nullopt;
    const double mr = sr_ / n_, mt = st_ / n_;
    const double vrr = srr_ / n_ - mr * mr, vrt = srt_ / n_ - mr * mt;
    if (vrr < kMinVar) return last_;
    Fit f;
    f.b = std::max(0.0, vrt / vrr);
    f.a = std::max(0.0, mt - f.b * mr);
    last_ = f;
    return f;
  }

  static constexpr double kDecay = 0.98;
  static constexpr int kMinSteps = 8;
  static constexpr double kMinVar = 0.05;  ///< rows^2: ~5% of the passes one row off the mean

 private:
  double n_ = 0, sr_ = 0, st_ = 0, srr_ = 0, srt_ = 0;
  int count_ = 0;
  std::optional<Fit> last_;
};

/// Which draft tokens a decode pass takes (file comment).
struct DraftPricing {
  /// The acceptance probability a draft token must beat in a pass of `tokens` decode
  /// tokens and `rows` rows planned so far; 0 (every draft pays) without a fit.
  static double threshold(const std::optional<StepCostModel::Fit>& fit, int tokens, int rows) {
    if (!fit) return 0.0;
    const double t = fit->seconds(rows);
    if (t <= 0) return 0.0;
    return fit->b * tokens / t;
  }
  /// A sequence's acceptance record: of the draft tokens actually tried (the accepted ones
  /// and the first rejected one of each draft; those after it were never judged), how many
  /// were accepted, each count decayed by kDecay a verification so the estimate follows
  /// the text as it changes (prose, then a copied block of code).
  struct Record {
    static constexpr double kDecay = 0.9;
    double tried = 0, accepted = 0;
    /// A verification of a draft of `drafted` tokens accepted `accepted` of them.
    void verified(int drafted, int accepted_now) {
      tried = tried * kDecay + accepted_now + (accepted_now < drafted ? 1 : 0);
      accepted = accepted * kDecay + accepted_now;
    }
    /// Estimated probability that the next draft token is accepted, with one accepted and
    /// one rejected token added (Laplace): a new sequence starts at 1/2.
    double acceptance() const { return (accepted + 1.0) / (tried + 2.0); }
  };
  /// How many of `available` draft tokens to take: the i-th (1-based) needs the i - 1
  /// before it accepted too, so it is taken while p^i > threshold.
  static int take(double p, double threshold, int available) {
    int n = 0;
    double q = p;
    while (n < available && q > threshold) {
      ++n;
      q *= p;
    }
    return n;
  }
};

}  // namespace swz::engine
