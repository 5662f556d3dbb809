// CPU reference of the attention family (docs/attention.md), the oracle for GPU checks and
// the tuner. Paged KV cache: K and V each [pages][kv_heads][page][dim], fp16 or fp8 codes
// (value = code · scale, scale per tensor or per KV head). Queries and outputs are fp16
// [tokens][heads][dim]; sequence b's q_len = cu_q[b+1] − cu_q[b] query tokens are its last
// positions (seq_lens[b] keys in all, the new ones included). Scores, softmax and the
// weighted sum are computed in fp64; a query row that sees no key gives zeros.
#pragma once
#include <cstdint>
#include <vector>

namespace onecat::cpu {

enum class KvDtype { kF16 = 0, kE4m3 = 1, kE5m2 = 2 };

// fp8 codes: decode is exact; encode rounds to nearest even and saturates to the largest
// finite value (±448, ±57344); NaN gives 0x7F. Bit-exact with templates/attention/kv_format.cuh.
float fp8_decode(uint8_t code, KvDtype dtype);
uint8_t fp8_encode(float x, KvDtype dtype);

struct PagedKv {
  int kv_heads = 0, dim = 0, page = 0;
  KvDtype dtype = KvDtype::kF16;
  bool scale_per_head = false;
  void* k = nullptr;  // element bytes: 2 (f16) or 1 (fp8)
  void* v = nullptr;
  const float* k_scale = nullptr;  // fp8: [1] or [kv_heads]
  const float* v_scale = nullptr;

  // Cached value of K (is_v = false) or V at cache row (page, head, row), element d.
  float value(bool is_v, int64_t page_id, int head, int row, int d) const;
  // The whole row's dim values into out, each equal to value(is_v, page_id, head, row, d);
  // fp8 decodes through lut (fp8_lut of the cache's dtype).
  void row(bool is_v, int64_t page_id, int head, int row, const float* lut, float* out) const;
};

// fp8_decode of the 256 codes of dtype (empty for fp16).
std::vector<float> fp8_lut(KvDtype dtype);

// kv_write: token i's K/V rows (fp16 [tokens][kv_heads][dim]) into slot slot_mapping[i]
// (page = slot / page size, row = slot % page size); negative slots are skipped. fp8 caches
// store fp8_encode(value / scale).
void kv_write(const PagedKv& cache, const uint16_t* k, const uint16_t* v, const int* slot_mapping, int64_t tokens);

struct AttentionShape {
  int heads = 0;
  bool causal = true;
  int window = 0;  // 0: none; else key j is visible to query position i iff i − window < j ≤ i
  float sm_scale = 1.f;
};

// out/q: fp16 [cu_q[batch]][heads][dim]; block_table: [batch][max_pages].
void attention(uint16_t* out, const uint16_t* q, const PagedKv& cache, const int* block_table, int max_pages,
               const int* seq_lens, const int* cu_q, int batch, const AttentionShape& shape);

}  // namespace onecat::cpu
