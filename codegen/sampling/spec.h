// sampling spec: what is fixed at compile time (docs/sampling.md).
//   sampling:op=sample,vocab=151936,logprobs=20   logits → sampled tokens (+ logprobs), one CTA per row
//   sampling:op=argmax,vocab=151936               logits → the argmax of each row, at bandwidth
// logprobs is the most top logprobs a row may ask for (0 … 20; each row asks for its own
// number up to it); argmax takes none.
#pragma once
#include <string>
#include <string_view>

namespace onecat::sampling {

enum class Op { kSample, kArgmax };

// The sample kernel keeps a bitmap of the seen ids in shared memory: vocab/8 bytes, 64 KiB at
// this size, which leaves room for the rest within sm_70's 96 KiB.
inline constexpr int kMaxVocab = 1 << 19;
// OpenAI's and vLLM's limit (runtime/cpu/sampling.h kMaxLogprobs).
inline constexpr int kMaxLogprobs = 20;

struct Spec {
  Op op = Op::kSample;
  int vocab = 0;
  int logprobs = 0;  // sample only

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  friend bool operator==(const Spec&, const Spec&) = default;
};

std::string_view op_name(Op op);

}  // namespace onecat::sampling
