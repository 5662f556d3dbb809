// Draft tokens for speculative decoding (EngineOptions::num_speculative_tokens). N-gram prompt
// lookup: the sequence's last n tokens, for n from max_n down to min_n, are looked for earlier in
// the sequence (prompt and output), and the tokens that followed their latest earlier
// occurrence are the draft — no model needed, and on text that repeats its context (code being
// edited, quoted passages, lists) the target often agrees.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace onecat::engine {

// Up to k tokens after the latest earlier match of the longest suffix (n in [min_n, max_n])
// that has one; empty when none matches.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int k, int min_n, int max_n);

}  // namespace onecat::engine
