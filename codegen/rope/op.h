// rope's typed op over `tokens` tokens of a fused qkv projection (docs/rope.md): q and k
// RMSNormed per head (qk_norm=1), rotated NeoX-style at positions[t] with cos/sin =
// attention_factor · (cos, sin)(position · inv_freq[i]); q written dense, K and V dense or into
// the paged cache at slot_mapping[t] (kv_out=pages; a negative slot skips the token's K/V).
#pragma once
#include <cstdint>

#include "codegen/kernel_call.h"
#include "codegen/rope/config.h"
#include "codegen/rope/spec.h"

namespace onecat::rope {

struct Args {
  DevicePtr qkv = 0;        // [tokens][(heads + 2·kv_heads)·dim] fp16: q heads, k heads, v heads
  DevicePtr positions = 0;  // [tokens] int32
  DevicePtr inv_freq = 0;   // [dim/2] fp32: cpu::rope_table's, uploaded once
  float attention_factor = 1.f;
  DevicePtr q_norm = 0, k_norm = 0;  // [dim] fp16 each; qk_norm=1 only
  float eps = 1e-6f;
  DevicePtr q = 0;                     // [tokens][heads][dim] fp16
  DevicePtr k = 0, v = 0;              // dense: [tokens][kv_heads][dim] fp16; pages: the K and V caches
  DevicePtr slot_mapping = 0;          // pages: [tokens] int32, page · page_size + row; < 0 skips
  DevicePtr k_scale = 0, v_scale = 0;  // fp8 pages: [1] or [kv_heads] fp32
  int64_t tokens = 0;
  // positions were copied from the host on this stream before the pass's first kernel, and no
  // kernel writes them: on sm_90+ the kernel builds its cos/sin table before waiting for the
  // kernel before (common/grid.cuh). Leave it false where a kernel may have written them.
  bool positions_from_host = false;
};

inline int64_t workspace_bytes(const Spec&, const Config&, int64_t) { return 0; }
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);

}  // namespace onecat::rope
