// A loaded model ready to run: its weights on a backend, the KV cache's pages, and the forward
// pass (docs/models.md, "Model"). Model::forward runs one step of a batch the caller planned;
// Sequence and extend() are the convenience above it that generate, the CLI and the tests use
// (one or a few sequences, chunked prefill, then decode steps).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/checkpoint/loaded_model.h"
#include "models/model/backend.h"
#include "models/model/forward.h"
#include "models/model/kv_pages.h"

namespace onecat::model {

class GpuBackend;

enum class Device { kCpu, kCuda };

// "cpu", "cuda", or "auto" (cuda where a CUDA GPU is found, else cpu: see auto_device_note);
// InputError naming the choices otherwise.
Device parse_device(const std::string& name);

// For "auto" that found no GPU, the sentence a front end prints so the CPU is never a surprise
// ("running on the CPU backend (--device auto, and <why there is no GPU>)"); empty otherwise.
std::string auto_device_note(const std::string& name);

// The longest sequence a checkpoint's config allows: max_position_embeddings, 4096 when
// config.json does not say (serve's and ModelOptions' default max_model_len).
int64_t default_max_model_len(const models::ModelConfig& config);

struct ModelOptions {
  Device device = Device::kCpu;
  int64_t max_batch_tokens = 256;  // tokens per step: longer prompts are prefilled in chunks of this
  int max_sequences = 8;           // sequences per step
  int64_t kv_cache_tokens = 4096;  // KV cache capacity, all sequences together (rounded up to whole pages);
                                   // cuda: 0 = as much as gpu_memory_utilization leaves room for
  double gpu_memory_utilization = 0.9;  // cuda, kv_cache_tokens 0: the share of the GPU's memory to fill
  int page_size = 16;              // tokens per KV page
  // The longest sequence (prompt + output), vLLM's max_model_len: 0 = the checkpoint's
  // max_position_embeddings (default_max_model_len). It bounds a sequence's block-table row, which
  // the GPU copies every step (one row per sequence), so a pool of many pages costs no more per
  // step than a short one.
  int64_t max_model_len = 0;
  // The KV cache's elements (BackendLimits::kv_dtype): fp8 holds twice the tokens in the same bytes.
  models::KvCacheDtype kv_cache_dtype = models::KvCacheDtype::kF16;
  bool progress = true;            // a progress bar while loading
  bool cuda_graphs = true;         // cuda: replay decode steps as CUDA graphs
  bool fused_norms = true;         // decode steps fuse each norm into the gemm after it (Backend::fuses_norms;
                                   // cuda: where models::kGpuFusesNorms, off)
  bool profile = false;            // cuda: time every kernel (steps then run op by op); see gpu()
  // cuda, kv_cache_tokens 0: a draft model to load after this one with a pool of as many tokens
  // (engine::leave_room_for_draft): its KV bytes per page and its weights and buffers, left free.
  size_t draft_page_bytes = 0, draft_bytes = 0;
};

// A sequence's tokens in the KV cache: its pages and how many tokens they hold.
struct Sequence {
  std::vector<int32_t> pages;
  int64_t length = 0;
};

class Model {
 public:
  // Loads a checkpoint directory (models/checkpoint) onto options.device. InputError for a bad
  // checkpoint or options, and for device cuda where no GPU is usable.
  static std::unique_ptr<Model> load(const std::string& directory, const ModelOptions& options = {});
  // From weights already in memory (tests perturb them); the config travels with them.
  Model(const models::LoadedModel& loaded, const ModelOptions& options);
  ~Model();

  const models::ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  // ModelOptions::max_model_len resolved: what a sequence may reach (Engine::add refuses more).
  int64_t max_model_len() const { return max_model_len_; }
  // Model::load's figures: the checkpoint's tensor bytes and the seconds reading, checking and
  // packing them took, and the seconds the backend then took (upload, kernels prepared).
  struct LoadStats {
    size_t checkpoint_bytes = 0;
    double read_seconds = 0, backend_seconds = 0;
    // cuda: of backend_seconds, the kernels' share (every op's kernels prepared: how many, how
    // many tuned, how many compiled rather than read from the cache); the rest is the weights'
    // upload and the buffers.
    double kernel_seconds = 0;
    int kernels = 0, tuned_kernels = 0, compiled_kernels = 0;
  };
  const LoadStats& load_stats() const { return load_stats_; }
  KvPages& pages() { return pages_; }
  // The GPU backend (device cuda), else null: its weight/cache sizes and the profile.
  GpuBackend* gpu() { return gpu_; }

  // One step of a planned batch (check_batch'ed): logits of batch.logit_rows into `logits`,
  // [rows][vocab].
  void forward(const ForwardBatch& batch, std::span<float> logits);
  // The same step, returning each logit row's argmax (greedy decoding) instead of its logits:
  // on the GPU only the ids leave the device.
  // host_rows: logit rows the caller samples itself (a grammar's, a logit_bias's), copied into
  // host_logits [host rows][vocab] as well (Backend::read_logit_rows).
  void forward_argmax(const ForwardBatch& batch, std::span<int32_t> ids, std::span<const int32_t> host_rows = {},
                      std::span<float> host_logits = {});
  // Captures the decode steps' CUDA graphs (cuda, cuda_graphs on, not profiling; else nothing):
  // every size of decode_graph_sizes(max_sequences) up to the one that holds `sequences`, each
  // run once on padding alone (the scratch page), resolving its kernels. A decode step of a size
  // not captured here is captured on first use. What it did, for start-up reports.
  struct GraphStats {
    int sizes = 0;
    double seconds = 0;
  };
  GraphStats capture_graphs(int sequences);
  // Readies verify blocks of up to max_block tokens (a pending token and max_block − 1 drafts):
  // cuda, the verify kernels (GpuBackend::prepare_verify), and capture_graphs then also captures
  // steps that verify max_block-token blocks alone (ForwardBatch::verify_sequences, every
  // sequence one block of that length), each size up to the step's token limit; uniform verify
  // steps of another length are captured on first use. Once, before the first such step.
  void prepare_verify(int max_block);
  // Runs one eager prefill step of 16, 32, 64, … tokens and of the largest step, up to
  // max_tokens (and the step limit, max_model_len and the pool's tokens), on padding alone (one sequence on the scratch page;
  // cuda only, else nothing), so that a first request's prefill does not pay for first
  // launches: cuBLAS loads its kernels on first use of a shape (an 8B's first 1024-token
  // prefill took 0.30 s instead of 0.05 s on the H200) and the driver a module's functions.
  // Profiled steps of it are discarded. What it did, for start-up reports.
  struct WarmStats {
    int steps = 0;
    double seconds = 0;
  };
  WarmStats warm_up(int64_t max_tokens);
  // The last step's GPU time (cuda: GpuBackend::last_step_seconds; cpu: 0).
  double last_step_gpu_seconds() const;
  // After forward, forward_argmax or forward_sample: the step's final hidden states, the
  // lm_head's input rows of its logit rows, [rows][hidden] (Backend::read_hidden).
  void read_hidden(std::span<float> out);
  // Readies forward_sample (Backend::prepare_sampling): once, before the first such step.
  void prepare_sampling();
  // The same step, each logit row sampled where the logits are (Backend::read_sampled):
  // rows[i] for logit row i (a host row's result is the backend's, which the caller replaces;
  // its params must be ones the backend takes, no logit_bias); host rows as forward_argmax's.
  void forward_sample(const ForwardBatch& batch, std::span<const SampleRequest> rows, std::span<cpu::SampledToken> out,
                      std::span<const int32_t> host_rows = {}, std::span<float> host_logits = {});

  // Appends `tokens` to `sequence` (pages allocated as needed; prefilled in chunks of
  // max_batch_tokens) and returns the logits, [vocab] per row, of its last new token, or of
  // every new token with all_logits. InputError for an id outside the vocabulary or a full
  // KV cache.
  std::vector<float> extend(Sequence& sequence, std::span<const int32_t> tokens, bool all_logits = false);
  // One step for several sequences at once (each chunk ≤ max_batch_tokens in all, decodes of
  // one token and prefill chunks mixed); logits of each chunk's last token, in order. A chunk
  // marked verify (2 to kMaxVerifyBlock tokens: a pending token and drafts) runs as a verify
  // block (ForwardBatch::verify_sequences) and returns every token's logits.
  struct Chunk {
    Sequence* sequence;
    std::span<const int32_t> tokens;
    bool verify = false;
  };
  std::vector<std::vector<float>> step(std::span<const Chunk> chunks);
  // Greedy: each chunk's next token (the argmax of its last token's logits), and extend()
  // returning the next token instead of the logits.
  std::vector<int32_t> step_greedy(std::span<const Chunk> chunks);
  int32_t extend_greedy(Sequence& sequence, std::span<const int32_t> tokens);
  // Gives the sequence's pages back.
  void release(Sequence& sequence);

 private:
  void reserve(Sequence& sequence, int64_t length);
  // extend's chunks of max_batch_tokens but the last, run (their logits, every row, appended to
  // all_logits when given); returns the last chunk, still to run.
  std::span<const int32_t> extend_leading(Sequence& sequence, std::span<const int32_t> tokens,
                                          std::vector<float>* all_logits);
  // step() with each chunk's logits of all its tokens (all_logits) or its last.
  // With argmax, the ids of the logit rows go there and no logits are returned.
  std::vector<std::vector<float>> run(std::span<const Chunk> chunks, bool all_logits,
                                      std::vector<int32_t>* argmax = nullptr);
  void run_step(const ForwardBatch& batch);

  models::ModelConfig config_;
  ModelOptions options_;
  int64_t max_model_len_ = 0;
  ForwardShape shape_;
  std::unique_ptr<Backend> backend_;
  GpuBackend* gpu_ = nullptr;  // backend_ when it is the GPU's
  int verify_block_ = 0;       // prepare_verify's
  // Whether a uniform step of `size` sequences (a graph's size) of q-token blocks runs as a CUDA graph.
  bool graphed(int size, int q) const;
  static int graph_key(int size, int q);
  LoadStats load_stats_;
  KvPages pages_;
};

}  // namespace onecat::model
