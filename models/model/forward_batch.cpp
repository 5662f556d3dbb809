#include "models/model/forward_batch.h"

#include <cstdio>
#include <string>

#include "base/error.h"
#include "models/model/backend.h"

namespace onecat::model {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("forward batch: " + what); }

}  // namespace

void check_batch(const ForwardBatch& b, int64_t pages, int page_size) {
  const int64_t tokens = b.tokens();
  const int sequences = b.sequences();
  if (tokens == 0 || sequences == 0) fail("no tokens");
  if (int64_t(b.positions.size()) != tokens || int64_t(b.slot_mapping.size()) != tokens) {
    fail("positions and slot_mapping must have one entry per token");
  }
  if (int64_t(b.cu_q.size()) != sequences + 1) fail("cu_q must have sequences + 1 entries");
  if (b.max_pages <= 0 || int64_t(b.block_table.size()) != int64_t(sequences) * b.max_pages) {
    fail("block_table must be sequences × max_pages");
  }
  if (b.decode_sequences < 0 || b.decode_sequences > sequences) fail("decode_sequences out of range");
  if (b.verify_sequences < 0 || b.verify_sequences > sequences - b.decode_sequences) {
    fail("verify_sequences out of range");
  }
  if (b.cu_q[0] != 0 || b.cu_q[size_t(sequences)] != tokens) fail("cu_q must run from 0 to the token count");
  for (int s = 0; s < sequences; ++s) {
    const int32_t begin = b.cu_q[size_t(s)], end = b.cu_q[size_t(s) + 1], q_len = end - begin;
    const int32_t len = b.seq_lens[size_t(s)];
    if (q_len < 1) fail("sequence " + std::to_string(s) + " has no new tokens");
    if (s < b.decode_sequences && q_len != 1) {
      fail("decode sequence " + std::to_string(s) + " has " + std::to_string(q_len) + " tokens");
    }
    if (s >= b.decode_sequences && s < b.decode_sequences + b.verify_sequences) {
      if (q_len < 2 || q_len > kMaxVerifyBlock) {
        fail("verify sequence " + std::to_string(s) + " has " + std::to_string(q_len) + " tokens (2 to " +
             std::to_string(kMaxVerifyBlock) + ")");
      }
      if (s > b.decode_sequences && q_len < b.cu_q[size_t(s)] - b.cu_q[size_t(s) - 1]) {
        fail("verify sequence " + std::to_string(s) + " is shorter than the one before it");
      }
    }
    if (len < q_len || int64_t(len) > int64_t(b.max_pages) * page_size) {
      fail("sequence " + std::to_string(s) + " has seq_len " + std::to_string(len));
    }
    for (int32_t t = begin; t < end; ++t) {
      const int32_t position = len - q_len + (t - begin);
      if (b.positions[size_t(t)] != position) {
        fail("token " + std::to_string(t) + " has position " + std::to_string(b.positions[size_t(t)]) +
             ", its sequence's place is " + std::to_string(position));
      }
      const int32_t page = b.block_table[size_t(s) * size_t(b.max_pages) + size_t(position / page_size)];
      if (page < 0 || page >= pages || b.slot_mapping[size_t(t)] != page * page_size + position % page_size) {
        fail("token " + std::to_string(t) + "'s slot is not its position's place in its pages");
      }
    }
    for (int32_t p = 0; p < (len + page_size - 1) / page_size; ++p) {
      const int32_t page = b.block_table[size_t(s) * size_t(b.max_pages) + size_t(p)];
      if (page < 0 || page >= pages) fail("sequence " + std::to_string(s) + " names page " + std::to_string(page));
    }
  }
  for (int32_t row : b.logit_rows) {
    if (row < 0 || row >= tokens) fail("logit row " + std::to_string(row) + " is not a token of the batch");
  }
}

std::vector<int> decode_graph_sizes(int max_sequences) {
  std::vector<int> sizes;
  for (int n : {1, 2, 4}) {
    if (n < max_sequences) sizes.push_back(n);
  }
  for (int n = 8; n < max_sequences; n += 8) sizes.push_back(n);
  if (max_sequences >= 1) sizes.push_back(max_sequences);
  return sizes;
}

int decode_graph_size(int sequences, int max_sequences) {
  for (int n : decode_graph_sizes(max_sequences)) {
    if (n >= sequences) return n;
  }
  fail("a decode step of " + std::to_string(sequences) + " sequences is more than max_sequences " +
       std::to_string(max_sequences));
}

int uniform_block(const ForwardBatch& b) {
  const int sequences = b.sequences();
  if (sequences == 0 || int64_t(b.logit_rows.size()) != b.tokens()) return 0;
  if (b.decode_sequences == sequences) return 1;
  if (b.verify_sequences != sequences) return 0;
  const int32_t q = b.cu_q[1];
  return b.tokens() == int64_t(q) * sequences ? q : 0;  // shortest first: equal ends mean all equal
}

namespace {

// Appends padding sequences until p holds `sequences`: each q tokens (id 0, positions 0..q−1) on
// the scratch page, its every row a logit row, a block-table row of max_pages scratch entries;
// then points p.batch at p's arrays, every sequence a decode (q 1) or a verify block.
void pad_to(PaddedBatch& p, int sequences, int q, int max_pages, int32_t scratch_page, int page_size) {
  for (int s = int(p.seq_lens.size()); s < sequences; ++s) {
    for (int i = 0; i < q; ++i) {
      p.logit_rows.push_back(int32_t(p.ids.size()));
      p.ids.push_back(0);
      p.positions.push_back(i);
      p.slots.push_back(scratch_page * page_size + i);
    }
    p.cu_q.push_back(int32_t(p.ids.size()));
    p.seq_lens.push_back(q);
    p.block_table.insert(p.block_table.end(), size_t(max_pages), scratch_page);
  }
  p.batch.token_ids = p.ids, p.batch.positions = p.positions, p.batch.slot_mapping = p.slots;
  p.batch.cu_q = p.cu_q, p.batch.seq_lens = p.seq_lens, p.batch.block_table = p.block_table;
  p.batch.logit_rows = p.logit_rows, p.batch.max_pages = max_pages;
  p.batch.decode_sequences = q == 1 ? sequences : 0;
  p.batch.verify_sequences = q == 1 ? 0 : sequences;
}

}  // namespace

PaddedBatch pad_uniform_batch(const ForwardBatch& b, int sequences, int32_t scratch_page, int page_size) {
  const int have = b.sequences(), q = uniform_block(b);
  if (q == 0 || sequences < have || q > page_size) {
    fail(
        "only a uniform batch (all decodes or all verify blocks of one length, every row's logits) is padded, to "
        "at least its size, with blocks that fit one page");
  }
  PaddedBatch p;
  auto own = [](std::span<const int32_t> from, std::vector<int32_t>& to) { to.assign(from.begin(), from.end()); };
  own(b.token_ids, p.ids), own(b.positions, p.positions), own(b.slot_mapping, p.slots), own(b.cu_q, p.cu_q);
  own(b.seq_lens, p.seq_lens), own(b.block_table, p.block_table), own(b.logit_rows, p.logit_rows);
  p.batch = b;
  pad_to(p, sequences, q, b.max_pages, scratch_page, page_size);
  return p;
}

PaddedBatch padding_batch(int sequences, int q, int32_t scratch_page, int page_size) {
  if (q < 1 || q > page_size) fail("padding blocks must fit one page");
  PaddedBatch p;
  p.cu_q = {0};
  pad_to(p, sequences, q, 1, scratch_page, page_size);
  return p;
}

void BackendLimits::check(const char* backend) const {
  if (max_tokens <= 0 || max_sequences <= 0 || kv_pages < 0 || page_size <= 0 || max_sequence_pages < 0) {
    throw Error(std::string(backend) + ": every limit (tokens, sequences, KV pages, page size) must be positive");
  }
}

int64_t kv_pages_for_memory(size_t total, size_t free_at_start, size_t free_now, double utilization, size_t page_bytes,
                            size_t reserve) {
  if (!(utilization > 0 && utilization <= 1)) {
    throw InputError("gpu_memory_utilization must be in (0, 1], got " + std::to_string(utilization) + ".");
  }
  auto gib = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(size_t(1) << 30));
    return std::string(text);
  };
  const double allowed = utilization * double(total);
  const double others = double(total) - double(free_at_start);
  const double ours = double(free_at_start) - double(free_now);
  const double room = allowed - others - ours - double(reserve);
  if (page_bytes == 0 || room < double(page_bytes)) {
    throw InputError("no room for the KV cache: of the GPU's " + gib(double(total)) + ", " +
                     std::to_string(utilization) + " allows " + gib(allowed) + "; other processes hold " + gib(others) +
                     ", the weights and activations " + gib(ours) + " and " + gib(double(reserve)) +
                     " is kept back. Raise gpu_memory_utilization, lower the batch limits, or set the cache size.");
  }
  return int64_t(room / double(page_bytes));
}

void BackendLimits::check_fits(const ForwardBatch& batch, const char* backend) const {
  if (batch.tokens() > max_tokens || batch.sequences() > max_sequences ||
      int64_t(batch.logit_rows.size()) > max_tokens || batch.max_pages > row_pages()) {
    throw Error(std::string(backend) + ": the batch is larger than the backend was sized for");
  }
}

}  // namespace onecat::model
