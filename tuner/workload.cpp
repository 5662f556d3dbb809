#include "tuner/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "codegen/attention/emit.h"
#include "codegen/embedding/op.h"
#include "codegen/gemm/emit.h"
#include "codegen/rmsnorm/emit.h"
#include "codegen/rmsnorm/op.h"
#include "codegen/rope/op.h"
#include "codegen/sampling/op.h"
#include "runtime/cpu/rope.h"
#include "runtime/engine/gemm_launch.h"
#include "tuner/attention_batch.h"
#include "tuner/gemm_rig.h"
#include "tuner/harness.h"
#include "tuner/random_weight.h"
#include "tuner/sampling_batch.h"
#include "tuner/verify_attention.h"

namespace onecat {
namespace {

constexpr double kL2Multiple = 3.0;
constexpr size_t kMaxRotationBytes = size_t(8) << 30;

int l2_bytes() { return Driver::require_gpu().device_info(0).l2_bytes; }

class GemmWorkload final : public Workload {
 public:
  GemmWorkload(std::shared_ptr<GemmRig> rig, int64_t m) : rig_(std::move(rig)), m_(m) { rig_->prepare(m); }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    rig_->launch(kernel, gemm::Config::parse(rig_->spec(), config), i, stream);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return rig_->check(kernel, gemm::Config::parse(rig_->spec(), config));
  }

  std::string unavailable(const std::string& config) const override {
    return gemm::unavailable_reason("gemm", rig_->spec().to_string(), config, Driver::require_gpu().device_info(0).sm);
  }

  // The packed weights, x and y (and the bias or residual the epilogue reads).
  Traffic traffic() const override {
    const gemm::Spec& s = rig_->spec();
    const double m = double(m_), out = double(s.out_cols());
    double bytes = double(rig_->weight().bytes()) + m * double(s.k) * 2 + m * out * (s.out_f32 ? 4 : 2);
    if (s.epilogue == gemm::Epilogue::kBias) bytes += out * 2;
    if (s.epilogue == gemm::Epilogue::kResidual) bytes += m * out * 2;
    return {bytes, 2.0 * m * double(s.n) * double(s.k)};
  }

  // cuBLAS fp16 on the dequantised weights computes the plain product only.
  std::string peer_name() const override {
    const gemm::Spec& s = rig_->spec();
    return s.epilogue == gemm::Epilogue::kNone && !s.out_f32 && !s.act_order ? "cuBLAS" : "";
  }
  void launch_peer(int i, CUstream stream) override { rig_->launch_cublas(i, stream); }
  double error_vs_peer(const LoadedKernel& kernel, const std::string& config) override {
    return rig_->error_vs_cublas(kernel, gemm::Config::parse(rig_->spec(), config));
  }

 private:
  std::shared_ptr<GemmRig> rig_;
  int64_t m_;
};

// The last gemm spec's rig, for the next bucket of the same spec.
std::shared_ptr<GemmRig>& kept_rig() {
  static std::shared_ptr<GemmRig> rig;
  return rig;
}

class RmsnormWorkload final : public Workload {
 public:
  RmsnormWorkload(const std::string& spec_text, int64_t rows, uint64_t seed)
      : spec_(rmsnorm::Spec::parse(spec_text)), rows_(rows), seed_(seed) {
    std::mt19937_64 rng(seed);
    const size_t n = size_t(rows * spec_.hidden);
    // Copy c of x (and of the residual) starts at c · stride_ of one buffer; the copies hold
    // the same random values at different addresses (upload_tiled repeats them on the GPU).
    stride_ = (n * 2 + 255) / 256 * 256;
    copies_ = rotation_copies(n * 2 * (spec_.residual ? 2 : 1), l2_bytes());
    auto tiled = [&] {
      std::vector<uint16_t> v = random_half(rng, stride_ / 2, -3.f, 3.f);
      return upload_tiled(v.data(), stride_, stride_ * size_t(copies_));
    };
    x_ = tiled();
    if (spec_.residual) residual_ = tiled();
    auto w = random_half(rng, size_t(spec_.hidden), -1.5f, 1.5f);
    weight_ = DeviceBuffer::from_host(w.data(), w.size() * 2);
    out_ = DeviceBuffer(n * 2);
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    const rmsnorm::Config c = rmsnorm::Config::parse(spec_, config);
    const CUdeviceptr at = CUdeviceptr(size_t(i % copies_) * stride_);
    const rmsnorm::Args a{out_.ptr(), x_.ptr() + at, spec_.residual ? residual_.ptr() + at : 0, weight_.ptr(), 1e-6f, rows_};
    onecat::launch(kernel, rmsnorm::make_call(spec_, c, a), stream);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return check_rmsnorm(spec_.to_string(), config, kernel, rows_, seed_ + 1);
  }

  // fp16 x read, out written, the residual read and written back, the weight read.
  Traffic traffic() const override {
    const double n = double(rows_) * double(spec_.hidden);
    return {2.0 * (2 * n + (spec_.residual ? 2 * n : 0) + double(spec_.hidden)), 0};
  }

 private:
  rmsnorm::Spec spec_;
  int64_t rows_;
  uint64_t seed_;
  size_t stride_ = 0;
  int copies_ = 1;
  DeviceBuffer x_, residual_, weight_, out_;
};

// Embedding at bucket m: m ids drawn over the whole slice (a realistic spread of rows), a
// table of the spec's full size (random rows repeated), fresh ids per rotated copy.
class EmbeddingWorkload final : public Workload {
 public:
  EmbeddingWorkload(const std::string& spec_text, int64_t m, uint64_t seed)
      : spec_(embedding::Spec::parse(spec_text)), m_(m), seed_(seed) {
    std::mt19937_64 rng(seed);
    const size_t row_bytes = size_t(spec_.hidden) * 2;
    const size_t content_rows =
        std::min<size_t>(size_t(spec_.vocab), std::max<size_t>(1, kRandomTableBytes / row_bytes));
    const std::vector<uint16_t> content = random_half(rng, content_rows * size_t(spec_.hidden), -2.f, 2.f);
    table_ = upload_tiled(content.data(), content.size() * 2, size_t(spec_.vocab) * row_bytes);
    std::uniform_int_distribution<int> id(0, spec_.vocab - 1);
    copies_ = rotation_copies(size_t(m) * row_bytes * 2, l2_bytes());
    std::vector<int> ids(size_t(m) * size_t(copies_));
    for (int& i : ids) i = id(rng);
    ids_ = upload_bytes(ids.data(), ids.size() * 4);
    out_ = DeviceBuffer(size_t(m) * row_bytes);
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    const embedding::Config c = embedding::Config::parse(spec_, config);
    const CUdeviceptr ids = ids_.ptr() + CUdeviceptr(size_t(i % copies_) * size_t(m_) * 4);
    onecat::launch(kernel, embedding::make_call(spec_, c, {out_.ptr(), table_.ptr(), ids, 0, m_}), stream);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return check_embedding(spec_.to_string(), config, kernel, m_, seed_ + 1);
  }

  // m fp16 rows gathered and written, the ids read.
  Traffic traffic() const override { return {double(m_) * (2.0 * double(spec_.hidden) * 2 + 4), 0}; }

 private:
  static constexpr size_t kRandomTableBytes = size_t(32) << 20;
  embedding::Spec spec_;
  int64_t m_;
  uint64_t seed_;
  int copies_ = 1;
  DeviceBuffer table_, ids_, out_;
};

// RoPE at bucket m: m tokens at random positions up to 128K with the default frequencies (the
// scaling changes the table's values, not the work); kv_out=pages writes into a cache of
// m + 2 pages of slots in shuffled order. qkv rotates through copies past the L2.
class RopeWorkload final : public Workload {
 public:
  RopeWorkload(const std::string& spec_text, int64_t m, uint64_t seed)
      : spec_(rope::Spec::parse(spec_text)), m_(m), seed_(seed) {
    std::mt19937_64 rng(seed);
    const size_t n = size_t(m) * size_t(spec_.slots()) * size_t(spec_.dim);
    stride_ = (n * 2 + 255) / 256 * 256;
    copies_ = rotation_copies(n * 2 * 2, l2_bytes());
    const std::vector<uint16_t> qkv = random_half(rng, stride_ / 2, -4.f, 4.f);
    qkv_ = upload_tiled(qkv.data(), stride_, stride_ * size_t(copies_));
    std::vector<int> positions(static_cast<size_t>(m));
    std::uniform_int_distribution<int> pos(0, 131071);
    for (int& p : positions) p = pos(rng);
    positions_ = upload_bytes(positions.data(), positions.size() * 4);
    const cpu::RopeTable table = cpu::rope_table(cpu::RopeParams{}, spec_.dim);
    inv_freq_ = upload_bytes(table.inv_freq.data(), table.inv_freq.size() * 4);
    const std::vector<uint16_t> norm = random_half(rng, size_t(spec_.dim) * 2, 0.5f, 1.5f);
    norms_ = upload_bytes(norm.data(), norm.size() * 2);
    q_ = DeviceBuffer(size_t(m) * size_t(spec_.heads) * size_t(spec_.dim) * 2);
    if (spec_.paged) {
      cache_spec_.op = attention::Op::kKvWrite, cache_spec_.kv_heads = spec_.kv_heads, cache_spec_.dim = spec_.dim;
      cache_spec_.page = spec_.page, cache_spec_.kv = spec_.kv, cache_spec_.kv_scale = spec_.kv_scale;
      const int64_t pages = (m + spec_.page - 1) / spec_.page + 2;
      cache_.emplace(cache_spec_, random_kv_cache(cache_spec_, pages, rng, 1));
      std::vector<int> slots(static_cast<size_t>(pages * spec_.page));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots_ = upload_bytes(slots.data(), size_t(m) * 4);
    } else {
      k_ = DeviceBuffer(size_t(m) * size_t(spec_.kv_heads) * size_t(spec_.dim) * 2);
      v_ = DeviceBuffer(k_.bytes());
    }
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    const rope::Config c = rope::Config::parse(spec_, config);
    rope::Args a;
    a.qkv = qkv_.ptr() + CUdeviceptr(size_t(i % copies_) * stride_), a.positions = positions_.ptr();
    a.inv_freq = inv_freq_.ptr(), a.q_norm = norms_.ptr(), a.k_norm = norms_.ptr() + CUdeviceptr(spec_.dim * 2);
    a.q = q_.ptr(), a.k = cache_ ? cache_->k.ptr() : k_.ptr(), a.v = cache_ ? cache_->v.ptr() : v_.ptr();
    if (cache_) a.slot_mapping = slots_.ptr(), a.k_scale = cache_->k_scale.ptr(), a.v_scale = cache_->v_scale.ptr();
    a.tokens = m_;
    a.positions_from_host = true;  // uploaded once, before any launch
    onecat::launch(kernel, rope::make_call(spec_, c, a), stream);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return check_rope(spec_.to_string(), config, kernel, m_, seed_ + 1);
  }

  // Per token: the fp16 qkv row read, q written, K and V written (cache elements when paged)
  // with their slot, the position read.
  Traffic traffic() const override {
    const double dim = spec_.dim, kv_bytes = spec_.paged && spec_.kv != attention::KvType::kF16 ? 1 : 2;
    const double per_token = double(spec_.slots()) * dim * 2 + double(spec_.heads) * dim * 2 +
                             2 * double(spec_.kv_heads) * dim * kv_bytes + 4 + (spec_.paged ? 4 : 0);
    return {double(m_) * per_token, 0};
  }

 private:
  rope::Spec spec_;
  int64_t m_;
  uint64_t seed_;
  size_t stride_ = 0;
  int copies_ = 1;
  attention::Spec cache_spec_;
  DeviceBuffer qkv_, positions_, inv_freq_, norms_, q_, k_, v_, slots_;
  std::optional<DeviceKvCache> cache_;
};

// Attention at bucket m (docs/attention.md): decode and verify — m sequences of
// kAttentionContext keys each (or of `context` keys, when given); prefill — m new tokens as one sequence with no
// prefix; kv_write — m tokens into a cache of m + 7 slots. Inputs are made as the check makes them
// (tuner/attention_batch); the copies rotated through differ in address, not in content.
class AttentionWorkload final : public Workload {
 public:
  AttentionWorkload(const std::string& spec_text, int64_t m, uint64_t seed, int64_t context = 0)
      : spec_(attention::Spec::parse(spec_text)), m_(std::max<int64_t>(m, 1)), seed_(seed) {
    if (context > 0 && (spec_.op == attention::Op::kPrefill || spec_.op == attention::Op::kKvWrite)) {
      throw InputError("a context (ctx=) applies to attention decode and verify, not to " + spec_.to_string());
    }
    if (context > 0 && context < spec_.q) {
      throw InputError("ctx=" + std::to_string(context) + " is shorter than the " + std::to_string(spec_.q) +
                       " query tokens of " + spec_.to_string());
    }
    std::mt19937_64 rng(seed);
    const int l2 = l2_bytes();
    if (spec_.op == attention::Op::kKvWrite) {
      kv_write_ = make_kv_write_batch(spec_, {{int(m_) + 7}, {int(m_)}}, rng);
      const size_t bytes = kv_write_.cache.k.size() * 2 + kv_write_.k.size() * 4 + kv_write_.slots.size() * 4;
      for (int c = rotation_copies(bytes, l2); c > 0; --c) kv_write_inputs_.emplace_back(spec_, kv_write_);
      return;
    }
    const int64_t page_bytes = int64_t(2) * spec_.kv_heads * spec_.page * spec_.dim * spec_.kv_bytes();  // K and V
    AttentionCase ac;
    if (spec_.op == attention::Op::kPrefill) {
      ac = {{int(m_)}, {int(m_)}};
    } else if (context > 0) {
      ac = {std::vector<int>(size_t(m_), int(context)), std::vector<int>(size_t(m_), spec_.q)};
    } else {
      // A long context where it fits: at large batches the keys per sequence shrink so the
      // cache stays within kMaxCacheBytes (whole pages, at least the spec's query tokens).
      const int64_t pages = std::clamp<int64_t>(kMaxCacheBytes / (m_ * page_bytes), 1, kAttentionContext / spec_.page);
      const int keys = int(std::max<int64_t>(pages * spec_.page, spec_.q));
      ac = {std::vector<int>(size_t(m_), keys), std::vector<int>(size_t(m_), spec_.q)};
    }
    // Random content for at most kRandomCacheBytes of pages, repeated over the pool on the GPU.
    batch_ = make_attention_batch(spec_, ac, rng, std::max<int64_t>(1, kRandomCacheBytes / page_bytes));
    const size_t bytes = size_t(batch_.cache.pages * page_bytes) + batch_.q.size() * 2 + batch_.table.size() * 4;
    for (int c = rotation_copies(bytes, l2); c > 0; --c) inputs_.emplace_back(spec_, batch_);
    out_ = DeviceBuffer(std::max<size_t>(batch_.q.size() * 2, 16));
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    const attention::Config c = attention::Config::parse(spec_, config);
    if (spec_.op == attention::Op::kKvWrite) {
      launch_kv_write(kernel, spec_, c, kv_write_, kv_write_inputs_[size_t(i) % kv_write_inputs_.size()], stream);
      return;
    }
    const int64_t wf = attention::workspace_floats(spec_, c, batch_.batch);
    const int64_t wc = attention::workspace_counters(spec_, c, batch_.batch);
    workspace_.reserve(wf, wc);
    launch_attention(kernel, spec_, c, batch_, inputs_[size_t(i) % inputs_.size()], out_.ptr(), workspace_.partial(wf),
                     workspace_.counters(wc), stream);
  }

  // Every sequence's K and V read once, q read, out written; two products of dim per key
  // each query sees (causal, within the window). kv_write: fp16 K and V rows read, the
  // cache's rows written.
  Traffic traffic() const override {
    const double kv_row = double(spec_.kv_heads) * spec_.dim * spec_.kv_bytes();  // one token's K (or V)
    if (spec_.op == attention::Op::kKvWrite) {
      const double tokens = kv_write_.tokens;
      return {tokens * (2 * (double(spec_.kv_heads) * spec_.dim * 2) + 2 * kv_row + 4), 0};
    }
    double bytes = double(batch_.q.size()) * 2 * 2 + double(batch_.table.size()) * 4;
    double seen = 0;  // (query, key) pairs
    for (int b = 0; b < batch_.batch; ++b) {
      const int64_t keys = batch_.seq_lens[size_t(b)];
      const int64_t queries = batch_.cu_q[size_t(b) + 1] - batch_.cu_q[size_t(b)];
      bytes += 2 * double(keys) * kv_row;
      for (int64_t j = 0; j < queries; ++j) {
        const int64_t position = keys - queries + j;  // the queries are the sequence's last positions
        int64_t visible = spec_.op == attention::Op::kPrefill && !spec_.causal ? keys : position + 1;
        if (spec_.window > 0) visible = std::min<int64_t>(visible, spec_.window);
        seen += double(visible);
      }
    }
    return {bytes, 4.0 * double(spec_.heads) * double(spec_.dim) * seen};
  }

  // Every candidate is checked against one reference, made at the first check.
  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    if (!checker_) {
      const std::string spec = spec_.to_string();
      checker_ = std::make_unique<AttentionCheck>(spec, attention_case_for(spec, m_, seed_ + 1), seed_ + 1);
    }
    return checker_->run(config, kernel);
  }

 private:
  static constexpr int64_t kAttentionContext = 4096;
  static constexpr int64_t kMaxCacheBytes = int64_t(2) << 30;
  static constexpr int64_t kRandomCacheBytes = int64_t(32) << 20;

  attention::Spec spec_;
  int64_t m_;
  uint64_t seed_;
  AttentionBatch batch_;
  std::vector<DeviceAttentionBatch> inputs_;
  KvWriteBatch kv_write_;
  std::vector<DeviceKvWriteBatch> kv_write_inputs_;
  DeviceBuffer out_;
  SplitWorkspace workspace_;  // split kernels share one
  std::unique_ptr<AttentionCheck> checker_;
};

// sampling at bucket m: m rows of the check's random mix of settings (greedy, every filter,
// penalties with histories), their logits in copies rotated past the L2; argmax: m rows of
// random logits. The settings and histories stay put (they are small).
class SamplingWorkload final : public Workload {
 public:
  SamplingWorkload(const std::string& spec_text, int64_t m, uint64_t seed)
      : spec_(sampling::Spec::parse(spec_text)), rows_(std::max<int64_t>(m, 1)), seed_(seed) {
    std::vector<float> logits;
    if (spec_.op == sampling::Op::kSample) {
      SamplingBatch b = make_sampling_batch(spec_.vocab, rows_, spec_.logprobs, seed);
      const std::vector<sampling::RowParams> rp = b.row_params();
      params_ = DeviceBuffer::from_host(rp.data(), rp.size() * sizeof(sampling::RowParams));
      offsets_ = DeviceBuffer::from_host(b.offsets.data(), b.offsets.size() * 4);
      ids_ = DeviceBuffer::from_host(b.ids.data(), b.ids.size() * 4);
      table_ = DeviceBuffer(size_t(std::max<int64_t>(sampling::history_table_bytes(int64_t(b.ids.size())), 16)));
      logits = std::move(b.logits);
      const size_t width = size_t(std::max(spec_.logprobs, 1));
      token_logprobs_ = DeviceBuffer(size_t(rows_) * 4);
      top_ids_ = DeviceBuffer(size_t(rows_) * width * 4);
      top_logprobs_ = DeviceBuffer(size_t(rows_) * width * 4);
    } else {
      logits = make_argmax_logits(spec_.vocab, rows_, seed);
    }
    tokens_ = DeviceBuffer(size_t(rows_) * 4);
    const size_t bytes = logits.size() * 4;
    stride_ = (bytes + 255) / 256 * 256;
    copies_ = rotation_copies(bytes, l2_bytes());
    std::vector<float> padded(stride_ / 4, 0.f);
    std::copy(logits.begin(), logits.end(), padded.begin());
    logits_ = upload_tiled(padded.data(), stride_, stride_ * size_t(copies_));
  }

  void launch(const LoadedKernel& kernel, const std::string& config, int i, CUstream stream) override {
    const sampling::Config c = sampling::Config::parse(spec_, config);
    const CUdeviceptr logits = logits_.ptr() + CUdeviceptr(size_t(i % copies_) * stride_);
    if (spec_.op == sampling::Op::kArgmax) {
      // Zeroed when grown; every launch leaves the counters at 0.
      const size_t ws = size_t(std::max<int64_t>(sampling::workspace_bytes(spec_, c, rows_), 16));
      if (workspace_.bytes() < ws) {
        workspace_ = DeviceBuffer(ws);
        workspace_.fill_bytes(0);
      }
      onecat::launch(
          kernel, sampling::make_call(spec_, c, sampling::ArgmaxArgs{tokens_.ptr(), logits, workspace_.ptr(), rows_}),
          stream);
      return;
    }
    sampling::Args a;
    a.tokens = tokens_.ptr();
    a.token_logprobs = token_logprobs_.ptr();
    a.top_ids = spec_.logprobs ? top_ids_.ptr() : 0;
    a.top_logprobs = spec_.logprobs ? top_logprobs_.ptr() : 0;
    a.logits = logits;
    a.params = params_.ptr();
    a.history_offsets = offsets_.ptr();
    a.history_ids = ids_.ptr();
    a.history_table = table_.ptr();
    a.rows = rows_;
    onecat::launch(kernel, sampling::make_call(spec_, c, a), stream);
  }

  CheckResult check(const LoadedKernel& kernel, const std::string& config) override {
    return check_sampling(spec_.to_string(), config, kernel, rows_, seed_ + 1);
  }

  // Every row's fp32 logits read once, its token written (and its logprobs when asked for).
  Traffic traffic() const override {
    const double per_row = double(spec_.vocab) * 4 + 4 + (spec_.logprobs ? 4 + 8.0 * spec_.logprobs : 0);
    return {double(rows_) * per_row, 0};
  }

 private:
  sampling::Spec spec_;
  int64_t rows_;
  uint64_t seed_;
  size_t stride_ = 0;
  int copies_ = 1;
  DeviceBuffer logits_, params_, offsets_, ids_, table_, tokens_, token_logprobs_, top_ids_, top_logprobs_, workspace_;
};

}  // namespace

void release_workloads() { kept_rig().reset(); }

int rotation_copies(size_t bytes, int l2) {
  const double want = std::ceil(kL2Multiple * l2 / double(std::max<size_t>(bytes, 1)));
  const double most = double(std::max<size_t>(1, kMaxRotationBytes / std::max<size_t>(bytes, 1)));
  return int(std::clamp(want, 1.0, most));
}

std::unique_ptr<Workload> gemm_workload(const std::string& spec, int64_t m, uint64_t seed) {
  const gemm::Spec s = gemm::Spec::parse(spec);
  std::shared_ptr<GemmRig>& rig = kept_rig();
  if (!rig || rig->spec().to_string() != s.to_string()) {
    rig.reset();  // the previous spec's weights go before the next ones are made
    rig = std::make_shared<GemmRig>(s, seed, GemmRig::kRotate);
  }
  return std::make_unique<GemmWorkload>(rig, m);
}

std::unique_ptr<Workload> rmsnorm_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<RmsnormWorkload>(spec, m, seed);
}

std::unique_ptr<Workload> attention_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<AttentionWorkload>(spec, m, seed);
}

std::unique_ptr<Workload> attention_workload_at_context(const std::string& spec, int64_t m, uint64_t seed,
                                                        int64_t context) {
  return std::make_unique<AttentionWorkload>(spec, m, seed, context);
}

std::unique_ptr<Workload> embedding_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<EmbeddingWorkload>(spec, m, seed);
}

std::unique_ptr<Workload> rope_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<RopeWorkload>(spec, m, seed);
}

std::unique_ptr<Workload> sampling_workload(const std::string& spec, int64_t m, uint64_t seed) {
  return std::make_unique<SamplingWorkload>(spec, m, seed);
}

std::unique_ptr<Workload> make_workload(const Family& family, const std::string& spec, int64_t m, uint64_t seed,
                                        int64_t context) {
  if (seed == 0) seed = std::random_device{}() | 1;
  const FamilyHarness& h = harness_of(family);
  if (context <= 0) return h.make_workload(spec, m, seed);
  if (!h.make_workload_at_context) {
    throw InputError("a context (ctx=) applies to attention decode and verify, not to " + spec);
  }
  return h.make_workload_at_context(spec, m, seed, context);
}

}  // namespace onecat
