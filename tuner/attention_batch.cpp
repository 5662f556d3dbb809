#include "tuner/attention_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/error.h"
#include "base/half.h"
#include "codegen/attention/emit.h"
#include "codegen/attention/op.h"
#include "tuner/random_weight.h"

namespace onecat {
namespace {

using attention::Op;

constexpr float kQueryRange = 3.f;  // scores of a few units: a peaked softmax, not a flat one
constexpr float kNewKvRange = 4.f;  // kv_write's rows: beyond fp8's scaled range sometimes
constexpr int kSparePages = 3;      // pages nobody reads, so a wrong page id reads garbage

cpu::KvDtype dtype_of(const attention::Spec& s) { return cpu::KvDtype(int(s.kv)); }

template <class T>
DeviceBuffer upload_vector(const std::vector<T>& v) {
  return upload_bytes(v.data(), v.size() * sizeof(T));
}

// The first `count` entries of a random permutation of 0 .. n−1.
std::vector<int> shuffled(int64_t n, size_t count, std::mt19937_64& rng) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(count);
  return order;
}

}  // namespace

cpu::PagedKv HostKvCache::view(const attention::Spec& s) {
  cpu::PagedKv p;
  p.kv_heads = s.kv_heads, p.dim = s.dim, p.page = s.page, p.dtype = dtype_of(s);
  p.scale_per_head = s.kv_scale == attention::KvScale::kHead;
  p.k = k.data(), p.v = v.data(), p.k_scale = k_scale.data(), p.v_scale = v_scale.data();
  return p;
}

HostKvCache random_kv_cache(const attention::Spec& s, int64_t pages, std::mt19937_64& rng, int64_t content_pages) {
  HostKvCache c;
  c.pages = pages;
  if (content_pages <= 0 || content_pages > pages) content_pages = pages;
  const size_t n = size_t(content_pages) * s.kv_heads * s.page * s.dim;
  const int scales = s.kv_scale == attention::KvScale::kHead ? s.kv_heads : 1;
  std::uniform_real_distribution<float> sd(0.004f, 0.02f);
  for (int i = 0; i < scales; ++i) c.k_scale.push_back(sd(rng)), c.v_scale.push_back(sd(rng));
  if (s.kv == attention::KvType::kF16) {
    c.k.resize(n * 2), c.v.resize(n * 2);
    random_half_into(rng, c.k.data(), n, -1.f, 1.f);
    random_half_into(rng, c.v.data(), n, -1.f, 1.f);
    return c;
  }
  c.k.resize(n), c.v.resize(n);
  const size_t per_head = size_t(s.page) * s.dim;
  fill_random_chunks(rng, n, [&](size_t begin, size_t end, SplitMix64& r) {
    for (size_t i = begin; i < end; ++i) {
      const int h = scales == 1 ? 0 : int(i / per_head % s.kv_heads);
      c.k[i] = cpu::fp8_encode(r.uniform(-1.f, 1.f) / c.k_scale[size_t(h)], dtype_of(s));
      c.v[i] = cpu::fp8_encode(r.uniform(-1.f, 1.f) / c.v_scale[size_t(h)], dtype_of(s));
    }
  });
  return c;
}

AttentionBatch make_attention_batch(const attention::Spec& s, const AttentionCase& c, std::mt19937_64& rng,
                                    int64_t content_pages) {
  AttentionBatch b;
  b.batch = int(c.seq_lens.size());
  b.seq_lens = c.seq_lens;
  b.cu_q.assign(1, 0);
  for (int i = 0; i < b.batch; ++i) {
    const int q = s.op == Op::kPrefill ? c.q_lens.at(size_t(i)) : s.q;
    b.cu_q.push_back(b.cu_q.back() + q), b.max_q = std::max(b.max_q, q);
    b.max_pages = std::max(b.max_pages, (b.seq_lens[size_t(i)] + s.page - 1) / s.page);
  }
  b.tokens = b.cu_q.back();
  const int64_t pages = int64_t(b.batch) * b.max_pages + kSparePages;
  b.table = shuffled(pages, size_t(b.batch) * b.max_pages, rng);
  b.cache = random_kv_cache(s, pages, rng, content_pages);
  b.q = random_half(rng, size_t(b.tokens) * s.heads * s.dim, -kQueryRange, kQueryRange);
  b.sm_scale = 1.f / std::sqrt(float(s.dim));
  return b;
}

KvWriteBatch make_kv_write_batch(const attention::Spec& s, const AttentionCase& c, std::mt19937_64& rng) {
  KvWriteBatch b;
  b.tokens = c.q_lens.at(0);
  const int slots = std::max(c.seq_lens.at(0), b.tokens);
  const int64_t pages = (slots + s.page - 1) / s.page + 1;
  b.cache = random_kv_cache(s, pages, rng);
  const std::vector<int> order = shuffled(pages * s.page, size_t(b.tokens), rng);
  for (int t = 0; t < b.tokens; ++t) b.slots.push_back(t % 5 == 4 ? -1 : order[size_t(t)]);
  b.k = random_half(rng, size_t(b.tokens) * s.kv_heads * s.dim, -kNewKvRange, kNewKvRange);
  b.v = random_half(rng, b.k.size(), -kNewKvRange, kNewKvRange);
  return b;
}

DeviceBuffer upload_bytes(const void* data, size_t bytes) {
  DeviceBuffer b(std::max<size_t>(bytes, 16));
  if (bytes) b.upload(data, bytes);
  return b;
}

DeviceBuffer upload_tiled(const void* block, size_t block_bytes, size_t bytes) {
  if (block_bytes >= bytes) return upload_bytes(block, bytes);
  DeviceBuffer b(bytes);
  Driver& d = *Driver::find();
  d.check(d.cuMemcpyHtoD(b.ptr(), block, block_bytes), "cuMemcpyHtoD", "filling a buffer on the GPU");
  // The filled prefix (whole blocks) is copied after itself: log2(bytes / block_bytes) copies,
  // not one upload per block (half a million for an RMSNorm input of 256 bytes).
  for (size_t filled = block_bytes; filled < bytes;) {
    const size_t n = std::min(filled, bytes - filled);
    d.check(d.cuMemcpyDtoDAsync(b.ptr() + filled, b.ptr(), n, nullptr), "cuMemcpyDtoDAsync", "filling a buffer on the GPU");
    filled += n;
  }
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "filling a buffer on the GPU");
  return b;
}

DeviceKvCache::DeviceKvCache(const attention::Spec& s, const HostKvCache& c)
    : k(upload_tiled(c.k.data(), c.k.size(), size_t(c.pages) * s.kv_heads * s.page * s.dim * s.kv_bytes())),
      v(upload_tiled(c.v.data(), c.v.size(), size_t(c.pages) * s.kv_heads * s.page * s.dim * s.kv_bytes())),
      k_scale(upload_vector(c.k_scale)),
      v_scale(upload_vector(c.v_scale)) {}

DeviceAttentionBatch::DeviceAttentionBatch(const attention::Spec& s, const AttentionBatch& b)
    : cache(s, b.cache),
      q(upload_vector(b.q)),
      table(upload_vector(b.table)),
      seq_lens(upload_vector(b.seq_lens)),
      cu_q(upload_vector(b.cu_q)) {}

DeviceKvWriteBatch::DeviceKvWriteBatch(const attention::Spec& s, const KvWriteBatch& b)
    : cache(s, b.cache), k(upload_vector(b.k)), v(upload_vector(b.v)), slots(upload_vector(b.slots)) {}

void launch_attention(const LoadedKernel& kernel, const attention::Spec& s, const attention::Config& c,
                      const AttentionBatch& b, const DeviceAttentionBatch& in, CUdeviceptr out, CUdeviceptr partial,
                      CUdeviceptr counters, CUstream stream) {
  attention::Args a;
  a.out = out, a.q = in.q.ptr(), a.k_cache = in.cache.k.ptr(), a.v_cache = in.cache.v.ptr();
  a.k_scale = in.cache.k_scale.ptr(), a.v_scale = in.cache.v_scale.ptr(), a.block_table = in.table.ptr();
  a.max_pages = b.max_pages, a.seq_lens = in.seq_lens.ptr(), a.cu_q = in.cu_q.ptr(), a.sm_scale = b.sm_scale;
  a.partial = partial, a.counters = counters, a.batch = b.batch, a.max_q = b.max_q;
  a.tables_from_host = true;  // uploaded from the host before any launch (DeviceAttentionBatch)
  launch(kernel, attention::make_call(s, c, a), stream);
}

void launch_kv_write(const LoadedKernel& kernel, const attention::Spec& s, const attention::Config& c,
                     const KvWriteBatch& b, const DeviceKvWriteBatch& in, CUstream stream) {
  const attention::KvWriteArgs a{in.cache.k.ptr(), in.cache.v.ptr(), in.k.ptr(), in.v.ptr(), in.slots.ptr(),
                                  in.cache.k_scale.ptr(), in.cache.v_scale.ptr(), b.tokens};
  launch(kernel, attention::make_call(s, c, a), stream);
}

}  // namespace onecat
