#include "models/model/model.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "models/checkpoint/load_progress.h"
#include "models/model/cpu_backend.h"
#include "models/model/gpu_backend.h"
#include "runtime/engine/session.h"

namespace onecat::model {
namespace {

void check_options(const ModelOptions& o) {
  if (o.max_batch_tokens < 1) throw InputError("max_batch_tokens must be at least 1.");
  if (o.max_sequences < 1) throw InputError("max_sequences must be at least 1.");
  if (o.page_size < 1 || o.page_size > 1024) throw InputError("page_size must be 1 to 1024 tokens.");
  if (o.kv_cache_tokens < 0 || (o.kv_cache_tokens == 0 && o.device != Device::kCuda)) {
    throw InputError("kv_cache_tokens must be at least 1 (it is rounded up to whole pages), or 0 on device cuda to "
                     "fill the GPU's memory up to gpu_memory_utilization.");
  }
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1)) {
    throw InputError("gpu_memory_utilization must be in (0, 1], got " + std::to_string(o.gpu_memory_utilization) + ".");
  }
  if (o.max_model_len < 0) throw InputError("max_model_len must be positive (0: the model's positions).");
}

// ModelOptions::max_model_len resolved against the checkpoint's positions.
int64_t resolve_max_model_len(const ModelOptions& o, const models::ModelConfig& config) {
  const int64_t positions = default_max_model_len(config);
  if (o.max_model_len > positions) {
    throw InputError("max_model_len " + std::to_string(o.max_model_len) + " is more than the model's " +
                     std::to_string(positions) + " positions (config.json's max_position_embeddings).");
  }
  return o.max_model_len > 0 ? o.max_model_len : positions;
}

bool gpu_found() { return Driver::find() && Driver::find()->device_count() > 0; }

// The GPU before gigabytes are read: a machine without one is told so now, in one sentence.
void check_device(Device device) {
  if (device != Device::kCuda) return;
  if (!gpu_found()) {
    throw InputError("device cuda: " + Driver::unavailable_reason() + "; use device cpu.");
  }
  Session::get().use_gpu(-1);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The KV pool's pages, once the options are known to be good (0: the GPU backend sizes it).
int64_t kv_pages(const ModelOptions& o) {
  check_options(o);
  check_device(o.device);
  return ceil_div(o.kv_cache_tokens, o.page_size);
}

}  // namespace

int64_t default_max_model_len(const models::ModelConfig& config) {
  return config.max_position_embeddings > 0 ? config.max_position_embeddings : 4096;
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name == "auto") return gpu_found() ? Device::kCuda : Device::kCpu;
  throw InputError("device " + quoted_input(name) + " is not one of auto, cpu, cuda.");
}

std::string auto_device_note(const std::string& name) {
  if (name != "auto" || gpu_found()) return "";
  return "running on the CPU backend (--device auto, and " + Driver::unavailable_reason() + ")";
}

std::unique_ptr<Model> Model::load(const std::string& directory, const ModelOptions& options) {
  check_options(options);
  check_device(options.device);  // before reading gigabytes
  models::LoadOptions load;
  load.progress = options.progress;
  const models::LoadedModel loaded = models::load_checkpoint(directory, load);
  const auto start = std::chrono::steady_clock::now();
  auto model = std::make_unique<Model>(loaded, options);
  model->load_stats_.checkpoint_bytes = loaded.checkpoint_bytes;
  model->load_stats_.read_seconds = loaded.load_seconds;
  model->load_stats_.backend_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (model->gpu_) {
    model->load_stats_.kernel_seconds = model->gpu_->kernel_seconds();
    model->load_stats_.kernels = model->gpu_->kernels().kernels;
    model->load_stats_.tuned_kernels = model->gpu_->kernels().tuned;
    model->load_stats_.compiled_kernels = model->gpu_->kernels().compiled;
  }
  return model;
}

Model::Model(const models::LoadedModel& loaded, const ModelOptions& options)
    : config_(loaded.config),
      options_(options),
      max_model_len_(resolve_max_model_len(options, loaded.config)),
      pages_(std::max<int64_t>(1, kv_pages(options)), options.page_size) {
  shape_.layers = int(config_.layers);
  shape_.qkv_bias = !loaded.layers.empty() && !loaded.layers[0].qkv_bias.empty();
  shape_.o_bias = !loaded.layers.empty() && !loaded.layers[0].o_bias.empty();
  shape_.moe = config_.is_moe();
  BackendLimits limits;
  limits.max_tokens = options.max_batch_tokens;
  limits.max_sequences = options.max_sequences;
  limits.kv_pages = options.kv_cache_tokens == 0 ? 0 : pages_.pages();
  limits.page_size = options.page_size;
  limits.max_sequence_pages = ceil_div(max_model_len_, options.page_size);
  limits.kv_dtype = options.kv_cache_dtype;
  limits.memory_utilization = options.gpu_memory_utilization;
  limits.progress = options.progress;
  limits.fused_norms = options.fused_norms;
  limits.companion_page_bytes = options.draft_page_bytes;
  limits.companion_bytes = options.draft_bytes;
  if (options.device == Device::kCuda) {
    auto gpu = std::make_unique<GpuBackend>(Session::get(), loaded, limits);
    gpu_ = gpu.get();
    gpu_->set_profiling(options.profile);
    if (limits.kv_pages == 0) pages_ = KvPages(gpu_->kv_pages(), options.page_size);
    backend_ = std::move(gpu);
  } else {
    backend_ = std::make_unique<CpuBackend>(loaded, limits);
  }
}

Model::~Model() = default;

void Model::run_step(const ForwardBatch& batch) {
  check_batch(batch, pages_.pages(), pages_.page_size());
  if (batch.max_pages > ceil_div(max_model_len_, pages_.page_size())) {
    throw InputError("a sequence of the batch holds " + std::to_string(batch.max_pages) + " pages of " +
                     std::to_string(pages_.page_size()) + " tokens, more than max_model_len " +
                     std::to_string(max_model_len_) + " needs.");
  }
  const int q = uniform_block(batch);
  const int size = q > 0 ? decode_graph_size(batch.sequences(), options_.max_sequences) : 0;
  if (graphed(size, q)) {
    // A decode step, or one that verifies blocks of q tokens alone: padded to the next of
    // decode_graph_sizes, whose graph replays every launch (the batch's arrays are device
    // data, uploaded by begin; its counts are the same for one size and q). The padding's
    // logit rows are computed and not read.
    const PaddedBatch padded = pad_uniform_batch(batch, size, gpu_->scratch_page(), pages_.page_size());
    backend_->begin(padded.batch);
    gpu_->read_first_rows(batch.tokens());
    gpu_->run_graph(graph_key(size, q), [&] { run_layers(*backend_, shape_, padded.batch); });
  } else {
    run_forward(*backend_, shape_, batch);
  }
}

bool Model::graphed(int size, int q) const {
  return gpu_ && options_.cuda_graphs && !options_.profile && q > 0 && q <= pages_.page_size() &&
         int64_t(size) * q <= options_.max_batch_tokens;
}

int Model::graph_key(int size, int q) { return (q - 1) << 20 | size; }

void Model::prepare_verify(int max_block) {
  if (max_block < 2 || max_block > kMaxVerifyBlock) {
    throw Error("Model::prepare_verify: a verify block has 2 to " + std::to_string(kMaxVerifyBlock) + " tokens");
  }
  verify_block_ = std::max(verify_block_, max_block);
  if (gpu_) gpu_->prepare_verify(max_block);
}

Model::GraphStats Model::capture_graphs(int sequences) {
  GraphStats stats;
  if (!gpu_ || !options_.cuda_graphs || options_.profile) return stats;
  const auto start = std::chrono::steady_clock::now();
  const int largest = decode_graph_size(std::clamp(sequences, 1, options_.max_sequences), options_.max_sequences);
  std::vector<int> sizes = decode_graph_sizes(options_.max_sequences);
  sizes.erase(std::upper_bound(sizes.begin(), sizes.end(), largest), sizes.end());
  // Decode steps of each size, then (prepare_verify) steps verifying blocks of its length.
  std::vector<std::pair<int, int>> graphs;  // (size, q)
  for (int size : sizes) graphs.push_back({size, 1});
  for (int size : sizes) {
    if (verify_block_ > 1 && graphed(size, verify_block_)) graphs.push_back({size, verify_block_});
  }
  models::LoadProgress bar("capturing CUDA graphs", graphs.size(), options_.progress, "batch sizes");
  for (const auto& [size, q] : graphs) {
    const PaddedBatch padded = padding_batch(size, q, gpu_->scratch_page(), pages_.page_size());
    backend_->begin(padded.batch);
    gpu_->run_graph(graph_key(size, q), [&] { run_layers(*backend_, shape_, padded.batch); });
    std::vector<int32_t> ids(size_t(size) * size_t(q), 0);
    backend_->read_argmax(ids);
    ++stats.sizes;
    bar.advance(1);
  }
  bar.done();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

Model::WarmStats Model::warm_up(int64_t max_tokens) {
  WarmStats stats;
  if (!gpu_) return stats;
  const auto start = std::chrono::steady_clock::now();
  const int page = pages_.page_size();
  // A sequence's block table holds at most the pool's pages (BackendLimits::row_pages).
  const int64_t most = std::min({max_tokens, int64_t(options_.max_batch_tokens), max_model_len_, pages_.pages() * page});
  std::vector<int64_t> sizes;
  for (int64_t t = 16; t < most; t *= 2) sizes.push_back(t);
  if (most >= 1) sizes.push_back(most);
  const int32_t scratch = gpu_->scratch_page();
  models::LoadProgress bar("warming up prefill", sizes.size(), options_.progress, "steps");
  for (int64_t t : sizes) {
    const size_t n = size_t(t);
    std::vector<int32_t> ids(n, 0), positions(n), slots(n);
    for (size_t i = 0; i < n; ++i) positions[i] = int32_t(i), slots[i] = scratch * page + int32_t(i % size_t(page));
    const int pages = int(ceil_div(t, page));
    const std::vector<int32_t> cu_q{0, int32_t(t)}, seq_lens{int32_t(t)}, logit_rows{int32_t(t - 1)};
    const std::vector<int32_t> block_table(size_t(pages), scratch);
    ForwardBatch b;
    b.token_ids = ids, b.positions = positions, b.slot_mapping = slots, b.cu_q = cu_q, b.seq_lens = seq_lens;
    b.block_table = block_table, b.max_pages = pages, b.logit_rows = logit_rows, b.decode_sequences = 0;
    run_forward(*backend_, shape_, b);
    std::vector<int32_t> id(1);
    backend_->read_argmax(id);
    ++stats.steps;
    bar.advance(1);
  }
  bar.done();
  if (options_.profile) gpu_->take_profile();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

double Model::last_step_gpu_seconds() const { return gpu_ ? gpu_->last_step_seconds() : 0.0; }

void Model::forward(const ForwardBatch& batch, std::span<float> logits) {
  run_step(batch);
  backend_->read_logits(logits);
}

void Model::forward_argmax(const ForwardBatch& batch, std::span<int32_t> ids, std::span<const int32_t> host_rows,
                           std::span<float> host_logits) {
  run_step(batch);
  backend_->read_logit_rows(host_rows, host_logits);
  backend_->read_argmax(ids);
}

void Model::prepare_sampling() { backend_->prepare_sampling(); }

void Model::read_hidden(std::span<float> out) { backend_->read_hidden(out); }

void Model::forward_sample(const ForwardBatch& batch, std::span<const SampleRequest> rows,
                           std::span<cpu::SampledToken> out, std::span<const int32_t> host_rows,
                           std::span<float> host_logits) {
  run_step(batch);
  backend_->read_logit_rows(host_rows, host_logits);
  backend_->read_sampled(rows, out);
}

void Model::reserve(Sequence& s, int64_t length) {
  while (int64_t(s.pages.size()) * pages_.page_size() < length) {
    const std::optional<int32_t> page = pages_.allocate();
    if (!page) {
      throw InputError("the KV cache is full: it holds " + std::to_string(pages_.pages() * pages_.page_size()) +
                       " tokens and a sequence needs " + std::to_string(length) +
                       "; give it more room (kv_cache_tokens).");
    }
    s.pages.push_back(*page);
  }
}

void Model::release(Sequence& s) {
  for (int32_t page : s.pages) pages_.release(page);
  s.pages.clear();
  s.length = 0;
}

namespace {

// A planned step: the batch's arrays, owned.
struct Plan {
  std::vector<int32_t> ids, positions, slots, cu_q{0}, seq_lens, block_table, logit_rows;
  int decode_sequences = 0, verify_sequences = 0, max_pages = 0;

  ForwardBatch batch() const {
    ForwardBatch b;
    b.token_ids = ids;
    b.positions = positions;
    b.slot_mapping = slots;
    b.decode_sequences = decode_sequences;
    b.verify_sequences = verify_sequences;
    b.cu_q = cu_q;
    b.seq_lens = seq_lens;
    b.block_table = block_table;
    b.max_pages = max_pages;
    b.logit_rows = logit_rows;
    return b;
  }
};

}  // namespace

std::vector<std::vector<float>> Model::run(std::span<const Chunk> chunks, bool all_logits,
                                           std::vector<int32_t>* argmax) {
  const int64_t vocab = config_.vocab;
  if (chunks.empty()) return {};
  if (int64_t(chunks.size()) > options_.max_sequences) {
    throw InputError("a step takes at most " + std::to_string(options_.max_sequences) + " sequences, not " +
                     std::to_string(chunks.size()) + ".");
  }
  int64_t tokens = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].tokens.empty()) throw InputError("every sequence of a step needs at least one new token.");
    for (size_t j = 0; j < i; ++j) {
      if (chunks[j].sequence == chunks[i].sequence) throw InputError("a sequence can appear once per step.");
    }
    if (chunks[i].verify && (chunks[i].tokens.size() < 2 || chunks[i].tokens.size() > size_t(kMaxVerifyBlock))) {
      throw InputError("a verify block has 2 to " + std::to_string(kMaxVerifyBlock) + " tokens, not " +
                       std::to_string(chunks[i].tokens.size()) + ".");
    }
    for (int32_t id : chunks[i].tokens) {
      if (id < 0 || id >= vocab) {
        throw InputError("token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                         std::to_string(vocab - 1) + ").");
      }
    }
    tokens += int64_t(chunks[i].tokens.size());
  }
  if (tokens > options_.max_batch_tokens) {
    throw InputError("a step takes at most " + std::to_string(options_.max_batch_tokens) + " tokens, not " +
                     std::to_string(tokens) + ".");
  }
  // Decodes first, then verify blocks, shortest first, then prefill chunks (docs/attention.md:
  // each attention op runs over one contiguous run).
  std::vector<size_t> order(chunks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rank = [&](size_t i) { return batch_order(int64_t(chunks[i].tokens.size()), chunks[i].verify); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });

  const int page = pages_.page_size();
  Plan p;
  for (size_t i : order) {
    const Chunk& c = chunks[i];
    reserve(*c.sequence, c.sequence->length + int64_t(c.tokens.size()));
    p.max_pages = std::max(p.max_pages, int(c.sequence->pages.size()));
    if (c.tokens.size() == 1) ++p.decode_sequences;
    if (c.tokens.size() > 1 && c.verify) ++p.verify_sequences;
  }
  for (size_t i : order) {
    const Chunk& c = chunks[i];
    const Sequence& s = *c.sequence;
    for (size_t t = 0; t < c.tokens.size(); ++t) {
      const int32_t position = int32_t(s.length + int64_t(t));
      p.ids.push_back(c.tokens[t]);
      p.positions.push_back(position);
      p.slots.push_back(s.pages[size_t(position / page)] * page + position % page);
    }
    p.cu_q.push_back(int32_t(p.ids.size()));
    p.seq_lens.push_back(int32_t(s.length + int64_t(c.tokens.size())));
    std::vector<int32_t> row(size_t(p.max_pages), 0);
    std::copy(s.pages.begin(), s.pages.end(), row.begin());
    p.block_table.insert(p.block_table.end(), row.begin(), row.end());
  }
  // Each chunk's rows (its last, or all of them), in the caller's order of chunks.
  std::vector<int32_t> first_row(chunks.size()), end_row(chunks.size());
  for (size_t k = 0; k < order.size(); ++k) {
    end_row[order[k]] = p.cu_q[k + 1];
    first_row[order[k]] = all_logits || chunks[order[k]].verify ? p.cu_q[k] : p.cu_q[k + 1] - 1;
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    for (int32_t r = first_row[i]; r < end_row[i]; ++r) p.logit_rows.push_back(r);
  }

  if (argmax) {
    // One id per logit row, in the caller's order of chunks (rows are laid out in it).
    argmax->assign(p.logit_rows.size(), 0);
    forward_argmax(p.batch(), *argmax);
    for (size_t i = 0; i < chunks.size(); ++i) chunks[i].sequence->length += int64_t(chunks[i].tokens.size());
    return {};
  }
  std::vector<float> logits(p.logit_rows.size() * size_t(vocab));
  forward(p.batch(), logits);
  std::vector<std::vector<float>> out;
  auto at = logits.begin();
  for (size_t i = 0; i < chunks.size(); ++i) {
    chunks[i].sequence->length += int64_t(chunks[i].tokens.size());
    const auto rows = std::ptrdiff_t(end_row[i] - first_row[i]) * std::ptrdiff_t(vocab);
    out.emplace_back(at, at + rows);
    at += rows;
  }
  return out;
}

std::vector<std::vector<float>> Model::step(std::span<const Chunk> chunks) { return run(chunks, false); }

std::vector<int32_t> Model::step_greedy(std::span<const Chunk> chunks) {
  std::vector<int32_t> ids;
  run(chunks, false, &ids);
  return ids;
}

std::span<const int32_t> Model::extend_leading(Sequence& s, std::span<const int32_t> tokens,
                                               std::vector<float>* all_logits) {
  if (tokens.empty()) throw InputError("extend needs at least one token.");
  const size_t chunk = size_t(options_.max_batch_tokens);
  size_t begin = 0;
  for (; tokens.size() - begin > chunk; begin += chunk) {
    const Chunk c{&s, tokens.subspan(begin, chunk)};
    std::vector<float> logits = std::move(run(std::span(&c, 1), all_logits != nullptr)[0]);
    if (all_logits) all_logits->insert(all_logits->end(), logits.begin(), logits.end());
  }
  return tokens.subspan(begin);
}

int32_t Model::extend_greedy(Sequence& s, std::span<const int32_t> tokens) {
  const Chunk last{&s, extend_leading(s, tokens, nullptr)};
  return step_greedy(std::span(&last, 1))[0];
}

std::vector<float> Model::extend(Sequence& s, std::span<const int32_t> tokens, bool all_logits) {
  std::vector<float> out;
  const Chunk last{&s, extend_leading(s, tokens, all_logits ? &out : nullptr)};
  std::vector<float> logits = std::move(run(std::span(&last, 1), all_logits)[0]);
  if (!all_logits) return logits;
  out.insert(out.end(), logits.begin(), logits.end());
  return out;
}

}  // namespace onecat::model
