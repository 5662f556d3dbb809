// One step of the forward pass (docs/models.md, "The forward pass"): some sequences, each with
// its new tokens — one decode token, or a prefill chunk — and its pages of the KV cache. The
// layout is the attention family's (docs/attention.md): per-token rows sequence by sequence,
// seq_lens counting the new tokens, a block table row per sequence.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace onecat::model {

// The longest verify block: a pending token and up to 16 drafts (EngineOptions::num_speculative_tokens).
inline constexpr int kMaxVerifyBlock = 17;

struct ForwardBatch {
  // Per token, sequence after sequence: the decode sequences (one token each) first, then the
  // verify blocks, then the prefill chunks, so each attention kernel sees one contiguous run of
  // rows.
  std::span<const int32_t> token_ids;     // [tokens]
  std::span<const int32_t> positions;     // [tokens]: place in its sequence (what RoPE rotates by)
  std::span<const int32_t> slot_mapping;  // [tokens]: KV slot, page · page_size + row
  // Per sequence.
  int decode_sequences = 0;              // how many of the first sequences are decodes
  // How many sequences after the decodes verify drafts (speculative decoding): each its pending
  // token and its drafts, 2 to 17 tokens, shortest first, so that those of one length are one
  // run for the verify kernel of that length (Model::prepare_verify); the rest are prefill chunks.
  int verify_sequences = 0;
  std::span<const int32_t> cu_q;         // [sequences + 1]: sequence b's tokens are [cu_q[b], cu_q[b+1])
  std::span<const int32_t> seq_lens;     // [sequences]: its keys, the new tokens included
  std::span<const int32_t> block_table;  // [sequences][max_pages]: its pages, in order
  int max_pages = 0;
  // The token rows whose logits the step returns, in this order (e.g. each sequence's last).
  std::span<const int32_t> logit_rows;

  int64_t tokens() const { return int64_t(token_ids.size()); }
  int sequences() const { return int(seq_lens.size()); }
};

// Where a chunk of `tokens` new tokens goes in a step's batch (sort chunks by it, stably):
// decodes (one token) first, then verify blocks (`verify`: a pending token and drafts) shortest
// first, then prefill chunks — the order ForwardBatch's sequences must have.
inline int64_t batch_order(int64_t tokens, bool verify) {
  return tokens == 1 ? 0 : verify ? tokens : std::numeric_limits<int64_t>::max();
}

// Throws Error (naming the field) unless the batch is consistent: sizes agree, cu_q rises from
// 0 to tokens, decodes have one token, positions are each sequence's last q_len places, slots
// lie in the sequence's pages, logit rows are tokens. `pages` and `page_size` describe the KV
// pool. Host work proportional to the batch; no allocation.
void check_batch(const ForwardBatch& batch, int64_t pages, int page_size);

// The batch sizes a decode step is replayed at as a CUDA graph (vLLM's capture sizes): 1, 2, 4,
// 8, then every multiple of 8, up to and including max_sequences.
std::vector<int> decode_graph_sizes(int max_sequences);
// The smallest of decode_graph_sizes(max_sequences) that holds `sequences`.
int decode_graph_size(int sequences, int max_sequences);

// The length of every sequence's block when `batch` is uniform — all decodes (1), or all verify
// blocks of one length q — with a logit row per token; else 0. Such a batch can be padded to a
// graph's size (pad_uniform_batch).
int uniform_block(const ForwardBatch& batch);

// A uniform batch (uniform_block q > 0) padded to `sequences` sequences, a graph's batch size:
// each added sequence is q tokens (id 0, positions 0..q−1) whose K and V go to `scratch_page`, a
// page no sequence holds (q ≤ page_size), and its logit rows follow the batch's. Owns its
// arrays; `batch` views them.
struct PaddedBatch {
  std::vector<int32_t> ids, positions, slots, cu_q, seq_lens, block_table, logit_rows;
  ForwardBatch batch;
};
PaddedBatch pad_uniform_batch(const ForwardBatch& batch, int sequences, int32_t scratch_page, int page_size);
// A batch with no sequences padded to `sequences` blocks of q tokens (what a graph is captured on).
PaddedBatch padding_batch(int sequences, int q, int32_t scratch_page, int page_size);

}  // namespace onecat::model
