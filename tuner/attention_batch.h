// One batch of attention inputs, made on the host and uploaded to the GPU: the GPU check
// (tuner/verify_attention) and the tuning workload (tuner/workload) build theirs here, so both
// run kernels on the same layout: every sequence's pages shuffled over a pool (block tables
// are not contiguous), random fp16 or fp8 caches, random queries.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "codegen/attention/config.h"
#include "codegen/attention/spec.h"
#include "runtime/cpu/attention.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"

namespace onecat {

// seq_lens[b] keys per sequence, its new tokens included; q_lens[b] query tokens (prefill;
// decode and verify take the spec's). kv_write writes q_lens[0] tokens into a cache of
// seq_lens[0] slots.
struct AttentionCase {
  std::vector<int> seq_lens;
  std::vector<int> q_lens;
};

// A paged K/V cache on the host: [pages][kv_heads][page][dim] fp16 or fp8 bytes and its
// scales (read by fp8 caches only).
struct HostKvCache {
  int64_t pages = 0;
  std::vector<uint8_t> k, v;
  std::vector<float> k_scale, v_scale;
  cpu::PagedKv view(const attention::Spec& s);  // needs every page's content (content_pages == pages)
};

// `pages` pages of which the first `content_pages` (0: all) hold random values: fp16 in
// [-1, 1), or fp8 codes of such values over random scales (never NaN or inf codes). A timing
// input repeats that content over the rest of the pool on the GPU (upload_tiled).
HostKvCache random_kv_cache(const attention::Spec& s, int64_t pages, std::mt19937_64& rng, int64_t content_pages = 0);

// Prefill, decode or verify inputs for one case.
struct AttentionBatch {
  int batch = 0, tokens = 0, max_q = 0, max_pages = 1;
  std::vector<int> seq_lens, cu_q, table;  // table: [batch][max_pages]
  HostKvCache cache;                       // the sequences' pages plus spare ones nobody reads
  std::vector<uint16_t> q;                 // [tokens][heads][dim]
  float sm_scale = 0;
};
AttentionBatch make_attention_batch(const attention::Spec& s, const AttentionCase& c, std::mt19937_64& rng,
                                    int64_t content_pages = 0);

// kv_write inputs: q_lens[0] tokens with random K/V rows (every fifth is padding, slot −1) into
// distinct random slots of a cache of seq_lens[0] slots (plus a spare page).
struct KvWriteBatch {
  int tokens = 0;
  HostKvCache cache;
  std::vector<uint16_t> k, v;  // [tokens][kv_heads][dim]
  std::vector<int> slots;
};
KvWriteBatch make_kv_write_batch(const attention::Spec& s, const AttentionCase& c, std::mt19937_64& rng);

// At least 16 bytes, so an empty input still has an address.
DeviceBuffer upload_bytes(const void* data, size_t bytes);
// A buffer of `bytes` filled with `block` repeated (the last copy cut short), on the GPU.
DeviceBuffer upload_tiled(const void* block, size_t block_bytes, size_t bytes);

struct DeviceKvCache {
  DeviceBuffer k, v, k_scale, v_scale;
  // The pool of cache.pages pages, cache's content repeated over it.
  DeviceKvCache(const attention::Spec& s, const HostKvCache& cache);
};

struct DeviceAttentionBatch {
  DeviceKvCache cache;
  DeviceBuffer q, table, seq_lens, cu_q;
  DeviceAttentionBatch(const attention::Spec& s, const AttentionBatch& b);
};

struct DeviceKvWriteBatch {
  DeviceKvCache cache;
  DeviceBuffer k, v, slots;
  DeviceKvWriteBatch(const attention::Spec& s, const KvWriteBatch& b);
};

// Enqueues one launch on `stream` (the default stream unless given). partial/counters: the
// split-KV workspace (attention::workspace_floats / workspace_counters; 0 when split = 1).
void launch_attention(const LoadedKernel& kernel, const attention::Spec& s, const attention::Config& c,
                      const AttentionBatch& b, const DeviceAttentionBatch& in, CUdeviceptr out, CUdeviceptr partial,
                      CUdeviceptr counters, CUstream stream = nullptr);
void launch_kv_write(const LoadedKernel& kernel, const attention::Spec& s, const attention::Config& c,
                     const KvWriteBatch& b, const DeviceKvWriteBatch& in, CUstream stream = nullptr);

}  // namespace onecat
