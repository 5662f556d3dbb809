// One linear layer of a checkpoint → PackedWeight in the gemm kernels' layout, and the fusion
// of several (q|k|v, gate|up) into one weight by stacking their rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/weight_format.h"
#include "models/checkpoint/checkpoint_files.h"
#include "models/config.h"

namespace onecat::models {

// W [n][k] of the linear whose tensors start with `prefix` ("model.layers.0.self_attn.q_proj").
// A float `prefix.weight` (F16, BF16, F32) is an fp16 layer whatever the quantisation (layers
// in modules_to_not_convert / exclude_modules); otherwise the tensors of quant.method are read
// (docs/checkpoint.md lists them) and repacked by models/quant/pack.h.
quant::PackedWeight load_linear(const CheckpointFiles& files, const std::string& prefix, int64_t n, int64_t k,
                                const QuantConfig& quant);

// The parts' rows one after another: [parts[0]; parts[1]; …], so a gemm over the result
// computes every part at once (q|k|v; gate|up for epi=silu_mul). `what` names the fused layer
// in messages. InputError when the parts cannot share one packed weight (different formats,
// act-order permutations or nvfp4 per-tensor scales; fp8 blocks that straddle two parts).
quant::PackedWeight stack_rows(std::vector<quant::PackedWeight> parts, const std::string& what);

// load_linear of each prefix (parts[i] with rows[i] out features), stacked by stack_rows. Parts
// that are all float weights are read straight into the stacked fp16 weight (one allocation and
// one copy of their bytes); the same results and messages either way.
quant::PackedWeight load_stacked(const CheckpointFiles& files, const std::vector<std::string>& prefixes,
                                 const std::vector<int64_t>& rows, int64_t k, const QuantConfig& quant,
                                 const std::string& what);

}  // namespace onecat::models
