// moe search space: the tuner's candidates and the deterministic untuned default.
#pragma once
#include <cstdint>
#include <vector>

#include "base/arch.h"
#include "codegen/moe/config.h"

namespace onecat::moe {

Config default_config(const Spec& spec, int64_t m, Arch arch);
std::vector<Config> candidate_configs(const Spec& spec, Arch arch);  // tc_small from sm_80
// Whether the tuner times this candidate for token count m.
bool fits_bucket(const Spec& spec, const Config& config, int64_t m);
// op=decode's range, the token counts it is tuned and checked for: while the pairs are no more
// than the experts, where the projections' defaults are tiles of one pair (tc_small from as
// many pairs as experts on sm_80+, which decodes a weight chunk once for several pairs, takes
// over above). At least 1.
int64_t decode_max_tokens(const Spec& spec);
// The most tokens for which a model (and onecat.moe) runs its MoE layer as one op=decode
// launch instead of four (spec: the layer's decode spec); 0: never. One token with 4-bit
// weights: there the launches saved outweigh what one pair per CTA and the routing in every
// CTA cost (bench/RESULTS.md, H100: 14.8 and 16.4 µs against the four launches' 16.0 and
// 17.8 in awq4 and nvfp4); with 8- and 16-bit weights, and from 4 tokens in every format, the
// four launches were faster.
int64_t decode_layer_tokens(const Spec& spec);

}  // namespace onecat::moe
