// attention's typed ops over a paged K/V pool [pages][kv_heads][page][dim] (docs/attention.md):
// prefill, decode and verify take Args; kv_write takes KvWriteArgs.
#pragma once
#include <cstdint>

#include "codegen/attention/config.h"
#include "codegen/attention/spec.h"
#include "codegen/kernel_call.h"

namespace onecat::attention {

struct Args {
  DevicePtr out = 0, q = 0;           // [tokens][heads][dim] fp16
  DevicePtr k_cache = 0, v_cache = 0;
  DevicePtr k_scale = 0, v_scale = 0;  // fp8 caches: [1] or [kv_heads] floats; ignored for f16
  DevicePtr block_table = 0;           // [batch][max_pages] int
  int max_pages = 0;
  DevicePtr seq_lens = 0;              // [batch] int
  DevicePtr cu_q = 0;                  // prefill: [batch + 1] int; ignored otherwise
  float sm_scale = 1.f;
  // split > 1: workspace_floats partials, workspace_counters counters zeroed once when allocated.
  DevicePtr partial = 0, counters = 0;
  int64_t batch = 0;
  int64_t max_q = 0;  // prefill: the longest query count of the batch
  // The batch tables (block_table, seq_lens, cu_q) were copied from the host on this stream
  // before the pass's first kernel, and no kernel writes them: on sm_90+ decode and verify then
  // read them, and ask L2 for their first pages of keys and values, before waiting for the
  // kernel before (common/grid.cuh). Leave it false where a kernel may have written them (a
  // caller's tensors).
  bool tables_from_host = false;
};

struct KvWriteArgs {
  DevicePtr k_cache = 0, v_cache = 0;
  DevicePtr k = 0, v = 0;             // [tokens][kv_heads][dim] fp16
  DevicePtr slot_mapping = 0;         // [tokens] int: page * page_size + offset
  DevicePtr k_scale = 0, v_scale = 0;  // fp8 caches; ignored for f16
  int64_t tokens = 0;
};

// The split-KV workspace in bytes, counters after the partials (0 without split).
int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t batch);
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);
KernelCall make_call(const Spec& spec, const Config& config, const KvWriteArgs& args);

}  // namespace onecat::attention
