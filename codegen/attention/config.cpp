#include "codegen/attention/config.h"

#include <algorithm>

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::attention {
namespace {

bool one_of(int v, std::initializer_list<int> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

}  // namespace

Config Config::parse(const Spec& spec, std::string_view text) {
  FieldReader r(text, "config " + quoted_input(text));
  Config c;
  c.op = spec.op;
  if (spec.op == Op::kKvWrite) {
    c.threads = static_cast<int>(r.integer("threads", 32, 1024));
  } else {
    c.atom = r.choice_or("atom", "wmma", {"wmma", "m16n8k16"}) == "wmma" ? Atom::kWmma : Atom::kM16n8k16;
    c.bm = static_cast<int>(r.integer("bm", 16, 128));
    c.bn = static_cast<int>(r.integer("bn", 16, 64));
    c.wn = static_cast<int>(r.integer("wn", 1, 8));
    if (c.atom == Atom::kM16n8k16) {
      c.stages = static_cast<int>(r.integer("stages", 2, 8));
      c.wr = static_cast<int>(r.integer_or("wr", 16, 16, 32));
    }
    c.split = static_cast<int>(r.integer("split", 1, kMaxSplit));
    c.mk = static_cast<int>(r.integer_or("mk", kDefaultMinKeys, 16, 4096));
  }
  r.finish();
  if (auto why = c.invalid_reason(spec)) {
    throw InputError("config " + quoted_input(text) + " cannot run " + spec.to_string() + ": " + *why);
  }
  return c;
}

std::string Config::to_string() const {
  if (op == Op::kKvWrite) return join_fields({{"threads", std::to_string(threads)}});
  if (atom == Atom::kM16n8k16) {
    std::vector<std::pair<std::string, std::string>> f = {
        {"atom", "m16n8k16"}, {"bm", std::to_string(bm)}, {"bn", std::to_string(bn)}, {"wn", std::to_string(wn)}};
    if (wr != 16) f.push_back({"wr", std::to_string(wr)});  // 16-row configs keep their text (and cache keys)
    f.push_back({"stages", std::to_string(stages)});
    f.push_back({"split", std::to_string(split)});
    if (mk != kDefaultMinKeys) f.push_back({"mk", std::to_string(mk)});  // the others keep their text
    return join_fields(f);
  }
  // atom=wmma keeps the text (and so the cache keys) it had before there was a second atom.
  std::vector<std::pair<std::string, std::string>> f = {{"bm", std::to_string(bm)},
                                                        {"bn", std::to_string(bn)},
                                                        {"wn", std::to_string(wn)},
                                                        {"split", std::to_string(split)}};
  if (mk != kDefaultMinKeys) f.push_back({"mk", std::to_string(mk)});
  return join_fields(f);
}

// Must equal the layout in templates/attention/attention.cuh (the template checks it):
// [Q tile | K tiles | V tiles] (reused by the warp-column merge) | S per warp | stats per warp.
int Config::shared_bytes(const Spec& spec) const {
  if (op == Op::kKvWrite) return 0;
  if (atom == Atom::kM16n8k16) {
    // Must equal templates/attention/attention_sm80.cuh: [Q tile | K stages | V stages | fp8
    // with more than one row warp or D = 256: decoded K and V], after the key loop reused for
    // the warp-column merge and row stats.
    const int keys = wn * bn;
    const bool fp8_tile = spec.kv != KvType::kF16 && (bm > 16 || spec.dim > 128);
    const int pipe = 2 * stages * keys * spec.dim * spec.kv_bytes() + (fp8_tile ? 2 * keys * spec.dim * 2 : 0);
    const int main = bm * spec.dim * 2 + pipe;
    const int end = (wn - 1) * bm * spec.dim * 4 + wn * bm * 2 * 4 + 16;
    return std::max(main, end);
  }
  const int ld = spec.dim + 8;
  const int tiles = bm * ld * 2 + 2 * wn * bn * ld * 2;
  const int merge = wn > 1 ? bm * spec.dim * 4 : 0;  // warp columns meet here
  return std::max(tiles, merge) + warps() * 16 * (bn + 4) * 4 + warps() * 16 * 3 * 4;
}

int Config::prefetch_bytes(const Spec& spec) const {
  if (atom == Atom::kM16n8k16) return 0;  // cp.async: the next tiles wait in shared memory
  // Counted as decoded fp16: fp8 codes need as many registers again while they are decoded.
  return 2 * wn * bn * spec.dim * 2 / std::max(1, cta_threads());
}

std::optional<std::string> Config::m16n8k16_invalid_reason(const Spec& spec) const {
  if (!one_of(stages, {2, 3, 4})) return "stages must be 2, 3 or 4";
  if (!one_of(wr, {16, 32})) return "wr must be 16 or 32";
  if (bm % wr != 0) return "bm must be a multiple of wr";
  // A 32-row warp keeps Q in shared memory and twice the accumulators: at D = 128 that spills
  // (NVRTC 12.8, sm_90), so D = 64 only.
  if (wr == 32 && spec.dim > 64) return "wr=32 needs D <= 64 (2·D/2 output accumulators per thread spill at D = 128)";
  if (shared_bytes(spec) > kMaxSharedBytesM16n8k16) {
    return std::to_string(shared_bytes(spec)) + " bytes of shared memory per CTA (no sm_80+ part grants more than " +
           std::to_string(kMaxSharedBytesM16n8k16) + ")";
  }
  // Per thread and 16-row m-tile: D/2 output accumulators and bn/2 scores; with 16-row warps at
  // D <= 128 also D/4 registers of Q fragments (32-row warps read Q from shared memory).
  const int registers = wr / 16 * (spec.dim / 2 + bn / 2) + (wr == 16 && spec.dim <= 128 ? spec.dim / 4 : 0);
  if (registers > 192) {
    return "about " + std::to_string(registers) + " registers of accumulators and Q fragments per thread (max 192)";
  }
  return std::nullopt;
}

std::optional<std::string> Config::invalid_reason(const Spec& spec) const {
  if (op != spec.op) return "config is for another op";
  if (op == Op::kKvWrite) {
    if (!one_of(threads, {64, 128, 256, 512})) return "threads must be 64, 128, 256 or 512";
    return std::nullopt;
  }
  if (!one_of(bm, {16, 32, 64, 128})) return "bm must be 16, 32, 64 or 128";
  if (!one_of(bn, {16, 32, 64})) return "bn must be 16, 32 or 64";
  if (!one_of(wn, {1, 2, 4, 8})) return "wn must be 1, 2, 4 or 8";
  if (op == Op::kPrefill && split != 1) return "prefill has split=1 (its token tiles fill the GPU)";
  if ((mk & (mk - 1)) != 0 || mk < 16) return "mk must be a power of two from 16 to 4096";
  if (mk != kDefaultMinKeys && split == 1) return "mk (the fewest keys per split) needs split > 1";
  // The merge keeps a weight per split and row where the BM × D fp16 Q tile was (cta.cuh).
  if (split > 1 && split * 2 > spec.dim) return "split must be at most D/2 (the split merge's weights fill the Q tile)";
  if (cta_threads() > kMaxThreads)
    return std::to_string(cta_threads()) + " threads per CTA (max " + std::to_string(kMaxThreads) + ")";
  if (atom == Atom::kM16n8k16) return m16n8k16_invalid_reason(spec);
  if (shared_bytes(spec) > kMaxSharedBytes) {
    return std::to_string(shared_bytes(spec)) + " bytes of shared memory per CTA (sm_70 allows " +
           std::to_string(kMaxSharedBytes) + ")";
  }
  if (prefetch_bytes(spec) > kMaxPrefetchBytes) {
    return std::to_string(prefetch_bytes(spec)) + " bytes of prefetched K/V per thread (max " +
           std::to_string(kMaxPrefetchBytes) + "); use fewer or smaller key tiles, or more rows";
  }
  // Per thread: D/2 output accumulators, bn/2 score accumulators and the prefetched tile.
  const int registers = spec.dim / 2 + bn / 2 + prefetch_bytes(spec) / 4;
  if (registers > 200) {
    return "about " + std::to_string(registers) + " registers of accumulators and prefetch per thread (max 200)";
  }
  return std::nullopt;
}

}  // namespace onecat::attention
