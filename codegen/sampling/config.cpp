#include "codegen/sampling/config.h"

#include "codegen/spec_text.h"
#include "base/error.h"

namespace onecat::sampling {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Config c;
  c.op = spec.op;
  c.threads = static_cast<int>(r.integer("threads", 1, kMaxThreads));
  if (spec.op == Op::kSample) {
    c.cap = static_cast<int>(r.integer("cap", 1, kMaxCap));
  } else {
    c.vec = static_cast<int>(r.integer("vec", 1, 4));
    c.unroll = static_cast<int>(r.integer("unroll", 1, 8));
    c.split = static_cast<int>(r.integer("split", 1, kMaxSplit));
  }
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  if (op == Op::kSample) return join_fields({{"threads", std::to_string(threads)}, {"cap", std::to_string(cap)}});
  return join_fields({{"threads", std::to_string(threads)},
                      {"vec", std::to_string(vec)},
                      {"unroll", std::to_string(unroll)},
                      {"split", std::to_string(split)}});
}

int Config::shared_bytes(const Spec& spec) const {
  if (op == Op::kArgmax) return 8 * threads + 16;
  return 8 * threads + 8 * cap + kSampleFixedShared + 4 * ((spec.vocab + 31) / 32);
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (op != spec.op) return "the config is for op=" + std::string(op_name(op));
  // The block reductions halve a power-of-two range of threads.
  if (!power_of_two(threads) || threads < kMinThreads) {
    return "threads must be a power of two from " + std::to_string(kMinThreads) + " to " + std::to_string(kMaxThreads);
  }
  if (op == Op::kSample) {
    if (!power_of_two(cap) || cap < kMinCap) {
      return "cap must be a power of two from " + std::to_string(kMinCap) + " to " + std::to_string(kMaxCap);
    }
  } else {
    if (vec != 1 && vec != 4) return "vec must be 1 or 4";
    if (vec == 4 && spec.vocab % 4 != 0) return "vec=4 needs a vocab divisible by 4 (rows must start 16-byte aligned)";
    if (unroll != 1 && unroll != 2 && unroll != 4 && unroll != 8) return "unroll must be 1, 2, 4 or 8";
    const int vectors = (spec.vocab + vec - 1) / vec;
    if (split > 1 && (vectors + split - 1) / split < threads) {
      return "split=" + std::to_string(split) + " leaves each CTA fewer than one load per thread";
    }
  }
  if (shared_bytes(spec) > kMaxSharedBytes) {
    return std::to_string(shared_bytes(spec)) + " bytes of shared memory exceed " + std::to_string(kMaxSharedBytes) +
           "; lower threads or cap";
  }
  return std::nullopt;
}

}  // namespace onecat::sampling
