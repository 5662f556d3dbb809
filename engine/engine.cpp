#include "engine/engine.h"

#include <algorithm>
#include <span>

#include "base/error.h"
#include "engine/draft_model.h"
#include "engine/drafter.h"
#include "engine/speculative.h"
#include "models/model/forward_batch.h"
#include "runtime/cpu/parallel.h"

namespace onecat::engine {

struct Engine::Seq {
  int64_t id = 0;
  Request request;
  std::vector<int32_t> tokens;                 // prompt, then the generated tokens
  std::vector<int32_t> output;                 // the generated tokens
  int64_t computed = 0;                        // leading tokens whose K/V are in `pages`
  std::vector<int32_t> pages;                  // held, in order
  std::vector<PageKey> keys;                   // keys of the leading full computed pages
  int64_t drafted = 0;                         // speculative tokens at the end of `tokens` this step
  std::vector<TokenLogprobs> prompt_logprobs;  // Request::prompt_logprobs: prompt tokens 1 … so far
  bool prompt_logprobs_sent = false;           // with the first output
  std::vector<std::vector<float>> q;           // the drafts' distributions (empty: certain drafts)
  // Drafter::wants_hidden_states: the target's final hidden states of the rows whose logits gave
  // its tokens in its last step, [rows][hidden] (DraftRequest::hidden).
  std::vector<float> hidden;

  int64_t pending() const { return int64_t(tokens.size()) - computed; }
};

Engine::Engine(model::Model& model, const EngineOptions& options)
    : model_(model),
      options_(options),
      blocks_(model.pages().pages(), model.pages().page_size(), options.prefix_caching) {
  const model::ModelOptions& m = model.options();
  if (options_.max_num_batched_tokens == 0) options_.max_num_batched_tokens = m.max_batch_tokens;
  if (options_.max_num_seqs == 0) options_.max_num_seqs = m.max_sequences;
  if (options_.max_num_batched_tokens < 1 || options.max_num_batched_tokens > m.max_batch_tokens) {
    throw InputError("max_num_batched_tokens must be 1 to the model's max_batch_tokens (" +
                     std::to_string(m.max_batch_tokens) + "), got " + std::to_string(options_.max_num_batched_tokens) +
                     ".");
  }
  if (options_.max_num_seqs < 1 || options_.max_num_seqs > m.max_sequences) {
    throw InputError("max_num_seqs must be 1 to the model's max_sequences (" + std::to_string(m.max_sequences) +
                     "), got " + std::to_string(options_.max_num_seqs) + ".");
  }
  if (model.pages().free_pages() != model.pages().pages()) {
    throw Error("engine: the model's KV pages are in use by its own sequences");
  }
  if (options_.num_speculative_tokens < 0 || options_.num_speculative_tokens > 16) {
    throw InputError("num_speculative_tokens must be 0 (off) to 16, got " +
                     std::to_string(options_.num_speculative_tokens) + ".");
  }
  if (!(options_.draft_p_min >= 0.0f && options_.draft_p_min <= 1.0f)) {
    throw InputError("draft_p_min (--draft-p-min) must be in [0, 1], got " + std::to_string(options_.draft_p_min) +
                     ".");
  }
  if (options_.ngram_min < 1 || options_.ngram_max < options_.ngram_min) {
    throw InputError(
        "the n-gram drafter needs 1 ≤ its shortest match (ngram_min, --prompt-lookup-min) ≤ its longest "
        "(ngram_max, --prompt-lookup-max), got " +
        std::to_string(options_.ngram_min) + " and " + std::to_string(options_.ngram_max) + ".");
  }
  stats_.accepted_at.assign(size_t(options_.num_speculative_tokens), 0);
  stats_.drafted_at.assign(size_t(options_.num_speculative_tokens), 0);
  if (options_.num_speculative_tokens > 0) drafter_ = options_.drafter ? options_.drafter : make_drafter();
  if (options_.device_sampling) model_.prepare_sampling();  // its kernels now, not in a step
  if (options_.num_speculative_tokens > 0) model_.prepare_verify(options_.num_speculative_tokens + 1);
  graphs_ = model_.capture_graphs(options_.max_num_seqs);    // at start-up, not in a step
  warm_ = model_.warm_up(options_.max_num_batched_tokens);    // cuBLAS's lazy loads too
}

std::shared_ptr<Drafter> Engine::make_drafter() const {
  const std::string& name = options_.speculative;
  if (name == "ngram") return std::make_shared<NgramDrafter>(options_.ngram_min, options_.ngram_max);
  if (const std::optional<std::string> dir = draft_directory(name)) {
    // The target's limits and a pool as large as the target's: every request it runs fits.
    model::ModelOptions o = model_.options();
    o.kv_cache_tokens = model_.pages().pages() * model_.pages().page_size();
    o.progress = false;
    return std::make_shared<ModelDrafter>(model::Model::load(*dir, o), model_.config().vocab, options_.draft_p_min);
  }
  throw InputError("speculative must be ngram or draft:DIR (a draft checkpoint), got \"" + name + "\".");
}

namespace {

// No token of the vocabulary continues the grammar (it asks for a character no token holds).
bool dead_end(GrammarConstraint& c) {
  const TokenMask& next = c.allowed();
  return std::all_of(next.begin(), next.end(), [](uint32_t w) { return w == 0; });
}

}  // namespace

bool Engine::append(Seq& s, StepOutput o, std::vector<StepOutput>& out) {
  const Request& r = s.request;
  s.tokens.push_back(o.token);
  s.output.push_back(o.token);
  ++stats_.generated_tokens;
  if (r.constraint) r.constraint->accept(o.token);
  if (std::find(r.stop_ids.begin(), r.stop_ids.end(), o.token) != r.stop_ids.end() ||
      (r.constraint && r.constraint->finished())) {
    o.finished = true, o.finish_reason = "stop";
  } else if (int64_t(s.output.size()) >= r.max_tokens) {
    o.finished = true, o.finish_reason = "length";
  } else if (r.constraint) {
    // No token of the vocabulary continues the grammar (it asks for a character no token
    // holds): the reply is cut short here, as by a length limit, rather than the next step's
    // sampler failing on an empty mask, which fails every request in the step.
    if (dead_end(*r.constraint)) o.finished = true, o.finish_reason = "length";
  }
  out.push_back(std::move(o));
  return out.back().finished;
}

void Engine::verify(Seq& s, std::vector<cpu::SampledToken> tokens, int64_t accepted, std::vector<StepOutput>& out) {
  // tokens = [..., t, d_1 … d_m]: the first `accepted` drafts stand, and the verdict's last token
  // follows them.
  const int64_t m = s.drafted;
  const int64_t base = int64_t(s.tokens.size()) - m;  // t is tokens[base − 1]
  stats_.draft_tokens += m, stats_.accepted_tokens += accepted, ++stats_.draft_rounds;
  for (int64_t i = 0; i < m; ++i) {
    ++stats_.drafted_at[size_t(i)];
    if (i < accepted) ++stats_.accepted_at[size_t(i)];
  }
  // Back to the accepted tokens: their K/V (and t's) stand; the rejected drafts' rows are past
  // the new length and get overwritten; pages past what it needs go back.
  s.tokens.resize(size_t(base));
  s.drafted = 0;
  s.q.clear();
  const int64_t page = blocks_.page_size();
  const bool logprobs = s.request.sampling.logprobs > 0;
  for (cpu::SampledToken& t : tokens) {
    StepOutput o{s.id, t.token, false, ""};
    if (logprobs) o.logprob = t.logprob, o.top_logprobs = std::move(t.top);
    if (append(s, std::move(o), out)) break;
  }
  // t and the accepted drafts have K/V now; the last new token is pending.
  s.computed = std::min<int64_t>(int64_t(s.tokens.size()) - 1, base + accepted);
  const size_t need = size_t((s.computed + page - 1) / page);
  while (s.pages.size() > need) blocks_.release(s.pages.back()), s.pages.pop_back();
  cache_pages(s);
}

void Engine::draft(std::vector<Chunk>& chunks, int64_t& budget) {
  if (!drafter_) return;
  // k per request: its own or the engine's, never past max_tokens (a step adds the accepted
  // drafts and one more token) nor the step's token budget (the first requests first).
  std::vector<DraftRequest> asks;
  std::vector<Seq*> seqs;
  int64_t left = budget;
  for (const Chunk& c : chunks) {
    Seq& s = *c.seq;
    const Request& r = s.request;
    const int64_t room = r.max_tokens - int64_t(s.output.size()) - 1;
    const int64_t wanted = r.num_draft_tokens < 0 ? options_.num_speculative_tokens : r.num_draft_tokens;
    // A grammar's verify rows are masked copies, so their logprobs would not be the raw ones:
    // such a request asking for logprobs gets no drafts.
    const int64_t k = r.constraint && r.sampling.logprobs > 0 ? 0 : std::min<int64_t>({wanted, room, left});
    if (k <= 0) continue;
    left -= k;
    asks.push_back({s.id, s.tokens, int64_t(r.prompt.size()), int(k), &r.sampling, s.hidden});
    seqs.push_back(&s);
  }
  if (asks.empty()) return;
  std::vector<Draft> drafts = drafter_->propose(asks);
  const int64_t vocab = model_.config().vocab;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = *seqs[i];
    Draft& d = drafts[i];
    if (d.tokens.empty()) continue;
    if (int64_t(d.tokens.size()) > asks[i].k || (!d.q.empty() && d.q.size() != d.tokens.size())) {
      throw Error("engine: the drafter proposed more tokens than asked, or q for only some");
    }
    for (int32_t t : d.tokens) {
      if (t < 0 || t >= vocab) throw Error("engine: the drafter proposed a token outside the vocabulary");
    }
    int64_t m = std::min<int64_t>(int64_t(d.tokens.size()), budget);
    if (s.request.constraint) {
      // Only drafts the grammar allows, and none that would end it (an end id, a finishing token,
      // one after which no token continues it): the verdict's own token ends it, and no verify
      // row is left with nothing to choose.
      GrammarConstraint c = *s.request.constraint;
      int64_t allowed = 0;
      while (allowed < m && c.allows(d.tokens[size_t(allowed)]) &&
             std::find(s.request.stop_ids.begin(), s.request.stop_ids.end(), d.tokens[size_t(allowed)]) ==
                 s.request.stop_ids.end()) {
        c.accept(d.tokens[size_t(allowed)]);
        if (c.finished() || dead_end(c)) break;
        ++allowed;
      }
      m = allowed;
    }
    // Drafts take pages only where every running request can still grow by one.
    if (m <= 0 || blocks_.available() < int64_t(running_.size())) continue;
    if (!grow(s, s.computed + 1 + m)) continue;  // no pages for them: one token
    s.tokens.insert(s.tokens.end(), d.tokens.begin(), d.tokens.begin() + m);
    if (!d.q.empty()) s.q.assign(std::make_move_iterator(d.q.begin()), std::make_move_iterator(d.q.begin() + m));
    s.drafted = m;
    budget -= m;
    for (Chunk& c : chunks) c.tokens += c.seq == &s ? m : 0;
  }
}

Engine::~Engine() = default;

int64_t Engine::add(Request request) {
  if (request.prompt.empty()) throw InputError("the prompt has no tokens.");
  const int64_t most = std::min<int64_t>(cpu::kMaxLogprobs, model_.config().vocab);
  if (request.prompt_logprobs < -1 || request.prompt_logprobs > most) {
    throw InputError("prompt_logprobs must be −1 (off) or 0 to " + std::to_string(most) + ", got " +
                     std::to_string(request.prompt_logprobs) + ".");
  }
  if (request.max_tokens < (request.prompt_logprobs >= 0 ? 0 : 1)) {
    throw InputError("max_tokens must be at least 1 (0 only with prompt_logprobs).");
  }
  if (request.num_draft_tokens < -1 || request.num_draft_tokens > options_.num_speculative_tokens) {
    throw InputError("num_draft_tokens must be −1 (the engine's) or 0 to the engine's num_speculative_tokens (" +
                     std::to_string(options_.num_speculative_tokens) + "), got " +
                     std::to_string(request.num_draft_tokens) + ".");
  }
  cpu::validate(request.sampling);
  const int64_t vocab = model_.config().vocab;
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= vocab) {
      throw InputError("prompt token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                       std::to_string(vocab - 1) + ").");
    }
  }
  for (const auto& [id, bias] : request.sampling.logit_bias) {
    if (id >= vocab) {
      throw InputError("logit_bias names token id " + std::to_string(id) + ", outside the vocabulary (0 to " +
                       std::to_string(vocab - 1) + ").");
    }
  }
  if (request.constraint) {
    if (request.constraint->automaton().vocabulary().size() != vocab) {
      throw InputError("the request's grammar is over a vocabulary of " +
                       std::to_string(request.constraint->automaton().vocabulary().size()) +
                       " tokens, the model's has " + std::to_string(vocab) + ".");
    }
    const TokenMask& start = request.constraint->allowed();
    if (std::all_of(start.begin(), start.end(), [](uint32_t w) { return w == 0; })) {
      throw InputError("no token of this model's vocabulary can start the text the request's grammar asks for.");
    }
  }
  // The last new token is never fed back, so the cache must hold prompt + max_tokens − 1.
  const int64_t longest = int64_t(request.prompt.size()) + std::max<int64_t>(request.max_tokens, 1) - 1;
  if (longest > model_.max_model_len()) {
    throw InputError("the prompt (" + std::to_string(request.prompt.size()) + " tokens) and max_tokens (" +
                     std::to_string(request.max_tokens) + ") need more than max_model_len " +
                     std::to_string(model_.max_model_len()) + ".");
  }
  const int64_t capacity = blocks_.pages() * blocks_.page_size();
  if (int64_t(request.prompt.size()) + std::max<int64_t>(request.max_tokens, 1) - 1 > capacity) {
    throw InputError("the prompt (" + std::to_string(request.prompt.size()) + " tokens) and max_tokens (" +
                     std::to_string(request.max_tokens) + ") need more than the KV cache's " +
                     std::to_string(capacity) + " tokens.");
  }
  auto s = std::make_unique<Seq>();
  s->id = next_id_++;
  s->tokens = request.prompt;
  s->request = std::move(request);
  stats_.prompt_tokens += int64_t(s->tokens.size());
  const int64_t id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

bool Engine::cancel(int64_t id) {
  auto cancel_in = [&](auto& list) {
    for (auto it = list.begin(); it != list.end(); ++it) {
      if ((*it)->id != id) continue;
      let_go(**it);
      list.erase(it);
      cancelled_.push_back({id, -1, true, "cancelled"});
      return true;
    }
    return false;
  };
  return cancel_in(running_) || cancel_in(waiting_);
}

bool Engine::idle() const { return waiting_.empty() && running_.empty() && cancelled_.empty(); }

void Engine::let_go(Seq& s) {
  if (drafter_) drafter_->release(s.id);
  for (int32_t page : s.pages) blocks_.release(page);
  s.pages.clear();
  s.keys.clear();
  s.computed = 0;
}

void Engine::preempt(Seq& s) {
  let_go(s);
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &s; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
  ++stats_.preemptions;
}

bool Engine::grow(Seq& s, int64_t length) {
  const int64_t page = blocks_.page_size();
  const size_t need = size_t((length + page - 1) / page);
  const size_t had = s.pages.size();
  while (s.pages.size() < need) {
    const std::optional<int32_t> p = blocks_.allocate();
    if (!p) {
      while (s.pages.size() > had) blocks_.release(s.pages.back()), s.pages.pop_back();
      return false;
    }
    s.pages.push_back(*p);
  }
  return true;
}

void Engine::admit_prefix(Seq& s) {
  if (!s.pages.empty() || s.computed != 0) return;
  // At least the last token is computed, so its logits exist to sample from; and every place
  // whose row a prompt logprob still needs (cached pages have K/V, not logits).
  const int64_t page = blocks_.page_size();
  int64_t max_pages = (int64_t(s.tokens.size()) - 1) / page;
  if (const auto [from, to] = prompt_rows(s, 0, int64_t(s.tokens.size())); from < to) {
    max_pages = std::min(max_pages, from / page);
  }
  BlockManager::Match m = blocks_.match_prefix(s.tokens, max_pages);
  s.pages = std::move(m.pages);
  s.keys = std::move(m.keys);
  s.computed = int64_t(s.pages.size()) * page;
  stats_.prefix_hit_tokens += s.computed;
}

std::pair<int64_t, int64_t> Engine::prompt_rows(const Seq& s, int64_t begin, int64_t end) const {
  // The row of place t gives prompt token t + 1's logprob.
  if (s.request.prompt_logprobs < 0 || s.prompt_logprobs_sent) return {begin, begin};
  const int64_t from = std::max(begin, int64_t(s.prompt_logprobs.size()));
  const int64_t to = std::min(end, int64_t(s.request.prompt.size()) - 1);
  return {from, std::max(from, to)};
}

void Engine::cache_pages(Seq& s) {
  const int64_t page = blocks_.page_size();
  while (int64_t(s.keys.size() + 1) * page <= s.computed) {
    const size_t index = s.keys.size();
    const std::span<const int32_t> own(s.tokens.data() + index * size_t(page), size_t(page));
    s.keys.push_back((index == 0 ? PageKey{} : s.keys.back()).then(own));
    blocks_.cache_full_page(s.keys.back(), own, s.pages[index]);
  }
}

std::vector<Engine::Chunk> Engine::plan() {
  std::vector<Chunk> chunks;
  int64_t budget = options_.max_num_batched_tokens;
  int seqs = options_.max_num_seqs;
  // Decodes first, oldest first; a decode without a page preempts the latest arrival.
  for (size_t i = 0; i < running_.size() && budget > 0 && seqs > 0; ++i) {
    Seq& s = *running_[i];
    if (s.pending() != 1) continue;
    bool gone = false;
    while (!gone && !grow(s, s.computed + 1)) {
      Seq& victim = *running_.back();
      gone = &victim == &s;
      preempt(victim);
    }
    if (gone) break;
    chunks.push_back({&s, 1});
    budget -= 1, --seqs;
  }
  draft(chunks, budget);
  // Then prefill chunks: of running requests, then of new ones while pages last.
  auto chunk_of = [&](Seq& s) -> int64_t {
    int64_t n = std::min(s.pending(), budget);
    while (n > 0 && !grow(s, s.computed + n)) {
      // As many tokens as the pages it can still get hold.
      const int64_t page = blocks_.page_size();
      const int64_t reachable = (int64_t(s.pages.size()) + blocks_.available()) * page - s.computed;
      n = std::min(n - 1, reachable);
    }
    return n;
  };
  for (size_t i = 0; i < running_.size() && budget > 0 && seqs > 0; ++i) {
    Seq& s = *running_[i];
    if (s.pending() <= 1 || s.drafted > 0) continue;
    const int64_t n = chunk_of(s);
    if (n <= 0) continue;
    chunks.push_back({&s, n});
    budget -= n, --seqs;
  }
  while (!waiting_.empty() && budget > 0 && seqs > 0) {
    Seq& s = *waiting_.front();
    admit_prefix(s);
    const int64_t n = chunk_of(s);
    if (n <= 0) {
      let_go(s);  // no page for it now: it waits, holding nothing
      break;
    }
    chunks.push_back({&s, n});
    budget -= n, --seqs;
    // Running requests stay in arrival order (a preempted one goes back among them).
    std::unique_ptr<Seq> moved = std::move(waiting_.front());
    waiting_.pop_front();
    auto at = std::upper_bound(running_.begin(), running_.end(), moved->id,
                               [](int64_t id, const auto& r) { return id < r->id; });
    running_.insert(at, std::move(moved));
  }
  return chunks;
}

std::vector<StepOutput> Engine::step() {
  std::vector<StepOutput> out = std::move(cancelled_);
  cancelled_.clear();
  std::vector<Chunk> chunks = plan();
  // Nothing could run: every page is held by requests that cannot grow. Let the latest go
  // (recomputed later) until one can.
  while (chunks.empty() && !running_.empty()) {
    preempt(*running_.back());
    chunks = plan();
  }
  if (chunks.empty()) {
    if (!waiting_.empty()) throw Error("engine: a request cannot get a KV page with nothing running");
    return out;
  }
  ++stats_.steps;

  // The batch: one-token chunks (decodes) first, then chunks with drafts (verify blocks),
  // shortest first, then prefill chunks; each chunk's last row for logits (a chunk with drafts:
  // every row, each verifying the next draft).
  auto order = [](const Chunk& c) { return model::batch_order(c.tokens, c.seq->drafted > 0); };
  std::stable_sort(chunks.begin(), chunks.end(), [&](const Chunk& a, const Chunk& b) { return order(a) < order(b); });
  const int page = blocks_.page_size();
  std::vector<int32_t> ids, positions, slots, cu_q{0}, seq_lens, table, logit_rows, row_of;
  int max_pages = 0, decodes = 0, verifies = 0;
  // Requests only the host sampler serves: a grammar's mask and logit_bias are not in the
  // backend's kernels.
  auto host_sampled = [](const Seq& s) { return s.request.constraint || !s.request.sampling.logit_bias.empty(); };
  // Greedy (the backend's argmax) or sampled where the logits are (EngineOptions::device_sampling)
  // when no chunk needs its logits here: no prompt logprobs, no drafts to verify (greedy takes
  // greedy drafts). A grammar or a logit_bias, which only the host sampler applies, keeps its
  // chunk's one row on the host while the backend picks the others' (`mixed`); with several
  // rows (drafts, prompt logprobs) every row comes to the host.
  bool greedy = true, device_sampling = options_.device_sampling, any_host = false, mixable = true, any_backend = false;
  for (const Chunk& c : chunks) {
    max_pages = std::max(max_pages, int(c.seq->pages.size()));
    decodes += c.tokens == 1;
    verifies += c.tokens > 1 && c.seq->drafted > 0;
    const auto [from, to] = prompt_rows(*c.seq, c.seq->computed, c.seq->computed + c.tokens);
    const bool one_row = from == to && c.seq->drafted == 0 && c.seq->q.empty();
    if (host_sampled(*c.seq)) {
      any_host = true;
      mixable = mixable && one_row;
      continue;
    }
    any_backend = true;
    greedy = greedy && cpu::plain_greedy(c.seq->request.sampling) && from == to && c.seq->q.empty();
    device_sampling = device_sampling && one_row;
  }
  if (any_host && !(mixable && any_backend)) greedy = false, device_sampling = false;
  for (const Chunk& c : chunks) {
    const Seq& s = *c.seq;
    for (int64_t t = s.computed; t < s.computed + c.tokens; ++t) {
      ids.push_back(s.tokens[size_t(t)]);
      positions.push_back(int32_t(t));
      slots.push_back(s.pages[size_t(t / page)] * page + int32_t(t % page));
    }
    cu_q.push_back(int32_t(ids.size()));
    row_of.push_back(int32_t(logit_rows.size()));
    for (int64_t t = s.drafted > 0 ? c.tokens : 1; t >= 1; --t) logit_rows.push_back(int32_t(ids.size() - t));
    seq_lens.push_back(int32_t(s.computed + c.tokens));
    std::vector<int32_t> row(size_t(max_pages), 0);
    std::copy(s.pages.begin(), s.pages.end(), row.begin());
    table.insert(table.end(), row.begin(), row.end());
  }
  // Prompt logprobs: the rows of the places they need, but each chunk's last (already there).
  std::vector<int32_t> prompt_row_of(chunks.size(), 0);
  for (size_t k = 0; k < chunks.size(); ++k) {
    const Seq& s = *chunks[k].seq;
    const int64_t last = s.computed + chunks[k].tokens - 1;
    const auto [from, to] = prompt_rows(s, s.computed, last + 1);
    prompt_row_of[k] = int32_t(logit_rows.size());
    for (int64_t t = from; t < std::min(to, last); ++t) logit_rows.push_back(cu_q[k] + int32_t(t - s.computed));
  }
  model::ForwardBatch batch;
  batch.token_ids = ids, batch.positions = positions, batch.slot_mapping = slots;
  batch.decode_sequences = decodes, batch.verify_sequences = verifies, batch.cu_q = cu_q, batch.seq_lens = seq_lens;
  batch.block_table = table, batch.max_pages = max_pages, batch.logit_rows = logit_rows;

  const int64_t vocab = model_.config().vocab;
  std::vector<int32_t> argmax;
  std::vector<float> logits;
  std::vector<cpu::SampledToken> device_sampled;  // device_sampling: one per chunk (its one logit row)
  device_sampling = device_sampling && !greedy && logit_rows.size() == chunks.size();
  const bool mixed = any_host && (greedy || device_sampling);
  // mixed: the host-sampled chunks' rows, also copied out (host_row_of[k]: chunk k's among them).
  std::vector<int32_t> host_rows, host_row_of(chunks.size(), -1);
  for (size_t k = 0; k < chunks.size() && mixed; ++k) {
    if (!host_sampled(*chunks[k].seq)) continue;
    host_row_of[k] = int32_t(host_rows.size());
    host_rows.push_back(row_of[k]);
  }
  std::vector<float> host_logits(host_rows.size() * size_t(vocab));
  stats_.sampled_steps += greedy && !any_host ? 0 : 1;
  if (greedy) {
    argmax.resize(logit_rows.size());
    model_.forward_argmax(batch, argmax, host_rows, host_logits);
  } else if (device_sampling) {
    // A host-sampled chunk's row is sampled greedily there too, and that token dropped.
    static const cpu::SamplingParams placeholder{.temperature = 0};
    std::vector<model::SampleRequest> requests;
    for (const Chunk& c : chunks) {
      const Seq& s = *c.seq;
      if (host_sampled(s)) {
        requests.push_back({&placeholder, {}, {}, 0, false});
        continue;
      }
      requests.push_back(
          {&s.request.sampling, s.request.prompt, s.output, uint64_t(s.output.size()), s.request.sampling.logprobs > 0});
    }
    device_sampled.resize(chunks.size());
    model_.forward_sample(batch, requests, device_sampled, host_rows, host_logits);
    ++stats_.device_sampled_steps;
  } else {
    logits.resize(logit_rows.size() * size_t(vocab));
    model_.forward(batch, logits);
  }
  // A logit row's greedy token (plain-greedy requests' drafts).
  auto greedy_token = [&](int32_t row) {
    return greedy ? argmax[size_t(row)] : int32_t(cpu::argmax(logits.data() + size_t(row) * size_t(vocab), vocab));
  };
  stats_.computed_tokens += int64_t(ids.size());
  collect_prompt_logprobs(chunks, row_of, prompt_row_of, logits);
  // The rows' hidden states for a drafter that reads them; each sequence keeps those of its new tokens below.
  const int64_t width = model_.config().hidden;
  std::vector<float> hidden;
  if (drafter_ && drafter_->wants_hidden_states()) {
    hidden.resize(logit_rows.size() * size_t(width));
    model_.read_hidden(hidden);
  }
  auto keep_hidden = [&](Seq& s, int32_t first_row, int64_t rows) {
    if (hidden.empty()) return;
    const auto from = hidden.begin() + std::ptrdiff_t(int64_t(first_row) * width);
    s.hidden.assign(from, from + std::ptrdiff_t(rows * width));
  };

  // The rows to sample: chunks that reach their prompt's end. Sampled where the logits are
  // (above), or on the host on every core (cpu::sample_rows: the rows in parallel, or one
  // row's passes split).
  std::vector<size_t> rows;
  std::vector<cpu::SampleRow> to_sample;
  std::vector<cpu::SampledToken> sampled(chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (chunks[k].seq->pending() != chunks[k].tokens || chunks[k].seq->drafted > 0) continue;
    if (chunks[k].seq->request.max_tokens == 0) continue;  // prompt logprobs alone
    const bool here = host_row_of[k] >= 0;
    if (greedy && !here) continue;
    if (device_sampling && !here) {
      sampled[k] = std::move(device_sampled[k]);
      continue;
    }
    const Seq& s = *chunks[k].seq;
    const float* row = here ? host_logits.data() + size_t(host_row_of[k]) * size_t(vocab)
                            : logits.data() + size_t(row_of[k]) * size_t(vocab);
    rows.push_back(k);
    to_sample.push_back({row, &s.request.sampling, s.request.prompt, s.output, uint64_t(s.output.size()),
                         s.request.sampling.logprobs > 0,
                         s.request.constraint && s.request.constraint->constrains()
                             ? s.request.constraint->allowed().data()
                             : nullptr});
  }
  if (!to_sample.empty()) {
    std::vector<cpu::SampledToken> got = cpu::sample_rows(to_sample, vocab);
    for (size_t i = 0; i < rows.size(); ++i) sampled[rows[i]] = std::move(got[i]);
  }

  for (size_t k = 0; k < chunks.size(); ++k) {
    Seq& s = *chunks[k].seq;
    if (s.drafted > 0) {
      const size_t m = size_t(s.drafted);
      const std::span<const int32_t> drafts(s.tokens.data() + s.tokens.size() - m, m);
      // A grammar's verify rows are its masked distributions: row i under the mask after drafts
      // 1 … i (which it allows: draft() cut the rest), so a verdict is the constrained target's.
      std::vector<std::vector<float>> masked;
      if (s.request.constraint) {
        GrammarConstraint c = *s.request.constraint;
        for (size_t i = 0; i <= m; ++i) {
          const float* row = logits.data() + size_t(row_of[k] + int32_t(i)) * size_t(vocab);
          masked.emplace_back(row, row + vocab);
          if (c.constrains()) cpu::mask_logits(masked.back(), c.allowed().data());
          if (i < m) c.accept(drafts[i]);
        }
      }
      auto row_at = [&](size_t i) {
        return masked.empty() ? logits.data() + size_t(row_of[k] + int32_t(i)) * size_t(vocab) : masked[i].data();
      };
      if (cpu::plain_greedy(s.request.sampling) && s.q.empty()) {
        // The longest prefix the target's argmax agrees with, then its next token.
        std::vector<cpu::SampledToken> tokens;
        for (size_t i = 0; i <= m; ++i) {
          tokens.push_back(
              {masked.empty() ? greedy_token(row_of[k] + int32_t(i)) : cpu::argmax(row_at(i), vocab), 0, {}});
          if (i == m || tokens.back().token != drafts[i]) break;
        }
        const int64_t accepted = int64_t(tokens.size()) - 1;
        keep_hidden(s, row_of[k], accepted + 1);
        verify(s, std::move(tokens), accepted, out);
      } else {
        std::vector<const float*> rows;
        for (size_t i = 0; i <= m; ++i) rows.push_back(row_at(i));
        Verified v = verify_drafts({rows, vocab, drafts, s.q, &s.request.sampling, s.request.prompt, s.output});
        keep_hidden(s, row_of[k], v.accepted + 1);
        verify(s, std::move(v.tokens), v.accepted, out);
      }
      continue;
    }
    s.computed += chunks[k].tokens;
    cache_pages(s);
    if (s.pending() > 0) continue;  // a prefill chunk short of the prompt's end
    keep_hidden(s, row_of[k], 1);
    const Request& r = s.request;
    StepOutput o{s.id, -1, false, ""};
    if (r.prompt_logprobs >= 0 && !s.prompt_logprobs_sent) {
      o.prompt_logprobs = std::move(s.prompt_logprobs);
      s.prompt_logprobs_sent = true;
    }
    if (r.max_tokens == 0) {
      o.finished = true, o.finish_reason = "length";
      out.push_back(std::move(o));
      continue;
    }
    if (greedy && host_row_of[k] < 0) {
      o.token = argmax[size_t(row_of[k])];
    } else {
      o.token = sampled[k].token;
      if (r.sampling.logprobs > 0) o.logprob = sampled[k].logprob, o.top_logprobs = std::move(sampled[k].top);
    }
    append(s, o, out);
  }
  // Finished requests let their pages go (their full pages stay in the prefix cache).
  for (const StepOutput& o : out) {
    if (!o.finished || o.finish_reason == "cancelled") continue;
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r->id == o.id; });
    let_go(**it);
    running_.erase(it);
  }
  return out;
}

void Engine::collect_prompt_logprobs(const std::vector<Chunk>& chunks, const std::vector<int32_t>& row_of,
                                     const std::vector<int32_t>& prompt_row_of, const std::vector<float>& logits) {
  struct Place {
    Seq* seq;
    int64_t t;
    int32_t row;
  };
  std::vector<Place> places;  // per sequence in place order
  for (size_t k = 0; k < chunks.size(); ++k) {
    Seq& s = *chunks[k].seq;
    const int64_t last = s.computed + chunks[k].tokens - 1;
    const auto [from, to] = prompt_rows(s, s.computed, last + 1);
    for (int64_t t = from; t < to; ++t) {
      places.push_back({&s, t, t == last ? row_of[k] : prompt_row_of[k] + int32_t(t - from)});
    }
  }
  if (places.empty()) return;
  const int64_t vocab = model_.config().vocab;
  std::vector<TokenLogprobs> got(places.size());
  cpu::parallel_for(int64_t(places.size()), [&](int64_t i) {
    const Place& p = places[size_t(i)];
    cpu::SampledToken x = cpu::token_logprobs(logits.data() + size_t(p.row) * size_t(vocab), vocab,
                                              p.seq->tokens[size_t(p.t + 1)], p.seq->request.prompt_logprobs);
    got[size_t(i)] = {x.logprob, std::move(x.top)};
  });
  for (size_t i = 0; i < places.size(); ++i) places[i].seq->prompt_logprobs.push_back(std::move(got[i]));
}

}  // namespace onecat::engine
