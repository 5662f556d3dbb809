#include "codegen/rope/config.h"

#include "codegen/spec_text.h"
#include "codegen/tokens.h"
#include "base/error.h"

namespace onecat::rope {
namespace {

bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Config c;
  c.vec = static_cast<int>(r.integer("vec", 1, 8));
  c.threads = static_cast<int>(r.integer("threads", 1, kMaxCtaThreads));
  c.tokens = static_cast<int>(r.integer("tokens", 1, kMaxTokens));
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  return join_fields(
      {{"vec", std::to_string(vec)}, {"threads", std::to_string(threads)}, {"tokens", std::to_string(tokens)}});
}

int Config::lanes(const Spec& spec) const { return int(pow2_ceil(chunks(spec))); }

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) return "vec must be 1, 2, 4 or 8";
  if ((spec.dim / 2) % vec != 0) {
    return "vec=" + std::to_string(vec) + " does not divide dim/2=" + std::to_string(spec.dim / 2);
  }
  if (spec.paged && spec.kv != attention::KvType::kF16 && vec < 2) {
    return "an fp8 cache is written two codes or more per store: vec must be at least 2";
  }
  if (lanes(spec) > kWarpLanes) {
    return "a head would take " + std::to_string(lanes(spec)) + " lanes (at most a warp, 32); raise vec";
  }
  if (!power_of_two(threads) || threads < kMinCtaThreads) return "threads must be a power of two, at least 32";
  if (!power_of_two(tokens)) return "tokens must be a power of two";
  if (shared_bytes(spec) > kMaxSharedBytes) {
    return "the cos/sin table of " + std::to_string(tokens) + " tokens takes " + std::to_string(shared_bytes(spec)) +
           " bytes of shared memory (max " + std::to_string(kMaxSharedBytes) + ")";
  }
  return std::nullopt;
}

}  // namespace onecat::rope
