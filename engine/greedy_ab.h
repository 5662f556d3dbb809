// Greedy A/B between two runs of one model (onecat audit's gate 4, docs/engine.md): the target's
// greedy outputs against a variant's (the same checkpoint on default configs, or on the CPU
// backend). Two backends that sum in other orders may part where two tokens are nearly tied;
// that is rounding, not a wrong kernel. So each prompt's first divergence is judged on the
// variant's own logits there: a near tie when its token beats the target's by at most `tie` of
// the row's spread (max − min). Tokens after a divergence are not compared (the contexts differ).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "models/model/model.h"

namespace onecat::engine {

struct GreedyAb {
  int64_t identical = 0, near_ties = 0, divergences = 0;
  struct Divergence {
    size_t prompt = 0, position = 0;
    std::optional<int32_t> target, variant;  // nullopt: that output ended there
    double gap = 0;                          // the variant's logit of its token minus the target's, of the spread
    bool near_tie = false;
  };
  std::optional<Divergence> first;
  bool pass() const { return divergences == 0; }
};

// `variant` computes the logits at a divergence (its own pages, released after); `target` and
// `other` are the two runs' outputs, one per prompt. A divergence where one output ended is never
// a tie.
GreedyAb compare_greedy(model::Model& variant, std::span<const std::vector<int32_t>> prompts,
                        std::span<const std::vector<int32_t>> target, std::span<const std::vector<int32_t>> other,
                        double tie);

}  // namespace onecat::engine
