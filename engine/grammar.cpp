#include "engine/grammar.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "engine/json_schema.h"
#include "engine/regex_grammar.h"
#include "models/tokenizer/tokenizer.h"

namespace onecat::engine {

namespace {

constexpr int32_t kUnknown = -2;
// Expansions deeper than this (a rule reaching itself before reading a byte, or text nested
// this deep) end the text there: the state is dead, nothing throws in the middle of a step.
constexpr int kMaxDepth = 2000;
struct TooDeep {};
// Transition tables (1 KB each) and masks (vocabulary / 8 bytes each: 19 KB for 152K tokens)
// are dropped when there are more than these (about 21 MB an automaton at most); they are
// recomputed when needed again.
constexpr size_t kMaxTables = 1 << 14;
constexpr size_t kMaxMasks = 256;

}  // namespace

GrammarSymbol Grammar::byte(char c) {
  GrammarSymbol s;
  s.bytes.set(size_t(static_cast<unsigned char>(c)));
  return s;
}

GrammarSymbol Grammar::set(ByteSet bytes) {
  GrammarSymbol s;
  s.bytes = bytes;
  return s;
}

GrammarSymbol Grammar::star(ByteSet bytes) {
  GrammarSymbol s;
  s.kind = GrammarSymbol::kStar;
  s.bytes = bytes;
  return s;
}

GrammarSymbol Grammar::ref(int rule) {
  GrammarSymbol s;
  s.kind = GrammarSymbol::kRule;
  s.rule = rule;
  return s;
}

std::vector<GrammarSymbol> Grammar::literal(std::string_view text) {
  std::vector<GrammarSymbol> out;
  for (char c : text) out.push_back(byte(c));
  return out;
}

ByteSet Grammar::range(unsigned char lo, unsigned char hi) {
  ByteSet s;
  for (unsigned c = lo; c <= hi; ++c) s.set(c);
  return s;
}

int Grammar::add_rule(std::string name) {
  rules_.push_back({std::move(name), {}});
  return int(rules_.size()) - 1;
}

void Grammar::add(int rule, std::vector<GrammarSymbol> symbols) {
  rules_.at(size_t(rule)).alternatives.push_back(std::move(symbols));
}

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& token_bytes, int64_t size)
    : size_(size), bytes_(token_bytes) {
  if (size < int64_t(token_bytes.size())) {
    throw Error("a token vocabulary of " + std::to_string(size) + " ids cannot hold the tokenizer's " +
                std::to_string(token_bytes.size()));
  }
  for (int32_t id = 0; id < int32_t(bytes_.size()); ++id) {
    if (!bytes_[size_t(id)].empty()) ids_.push_back(id);
  }
  std::stable_sort(ids_.begin(), ids_.end(),
                   [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  std::vector<int32_t> path;  // the nodes of the previous token's bytes
  const std::string* previous = nullptr;
  for (int32_t k = 0; k < int32_t(ids_.size()); ++k) {
    const std::string& b = bytes_[size_t(ids_[size_t(k)])];
    longest_ = std::max(longest_, b.size());
    size_t common = 0;
    while (previous && common < path.size() && common < b.size() && (*previous)[common] == b[common]) ++common;
    while (path.size() > common) {
      trie_[size_t(path.back())].end = int32_t(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      trie_.push_back({uint8_t(b[d]), uint32_t(d + 1), -1, 0, 0});
      path.push_back(int32_t(trie_.size()) - 1);
    }
    Node& n = trie_[size_t(path.back())];
    if (n.first == n.last) n.first = k;
    n.last = k + 1;
    previous = &b;
  }
  for (int32_t p : path) trie_[size_t(p)].end = int32_t(trie_.size());
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::of(const tokenizer::Tokenizer& tokenizer, int64_t size) {
  std::vector<std::string> bytes = tokenizer.token_bytes();
  if (int64_t(bytes.size()) > size) bytes.resize(size_t(size));
  return std::make_shared<const TokenVocabulary>(bytes, size);
}

const std::string& TokenVocabulary::bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && size_t(id) < bytes_.size() ? bytes_[size_t(id)] : kNone;
}

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : vocabulary_(std::move(vocabulary)) {
  const int rules = int(grammar.rules());
  if (rules == 0 || grammar.root() < 0 || grammar.root() >= rules) throw Error("grammar: no root rule");
  alternatives_.resize(size_t(rules));
  for (int r = 0; r < rules; ++r) {
    rule_names_.push_back(grammar.name(r));
    if (grammar.alternatives(r).empty()) throw Error("grammar: rule " + grammar.name(r) + " has no alternative");
    for (const auto& alternative : grammar.alternatives(r)) {
      alternatives_[size_t(r)].push_back(int32_t(elements_.size()));
      for (const GrammarSymbol& s : alternative) {
        if (s.kind == GrammarSymbol::kRule && (s.rule < 0 || s.rule >= rules)) {
          throw Error("grammar: rule " + grammar.name(r) + " names rule " + std::to_string(s.rule) +
                      ", which does not exist");
        }
        elements_.push_back({s.kind, false, s.bytes, s.rule});
      }
      elements_.push_back({GrammarSymbol::kByte, true, {}, -1});
    }
  }
  std::vector<int32_t> heads;
  bool accepting = false;
  try {
    for (int32_t a : alternatives_[size_t(grammar.root())]) expand(a, -1, heads, accepting, 0);
  } catch (const TooDeep&) {
    // Grammars come from requests (a schema's $ref to itself): what they say, not a bug here.
    throw InputError(
        "the grammar reaches a rule inside itself before any text (a $ref loop, or rules nested more than " +
        std::to_string(kMaxDepth) + " deep), so no output can follow it.");
  }
  start_ = intern(std::move(heads), accepting);
  if (start_ == kDead) throw InputError("the grammar matches no text.");
}

int32_t GrammarAutomaton::node(int32_t pos, int32_t rest) {
  const uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(rest);
  auto [it, inserted] = node_ids_.try_emplace(key, int32_t(nodes_.size()));
  if (inserted) nodes_.push_back({pos, rest});
  return it->second;
}

void GrammarAutomaton::expand(int32_t pos, int32_t rest, std::vector<int32_t>& heads, bool& accepting, int depth) {
  if (depth > kMaxDepth) throw TooDeep{};
  const Element& e = elements_[size_t(pos)];
  if (e.end) {
    if (rest < 0) {
      accepting = true;
    } else {
      const Node n = nodes_[size_t(rest)];
      expand(n.pos, n.rest, heads, accepting, depth + 1);
    }
    return;
  }
  switch (e.kind) {
    case GrammarSymbol::kByte:
      heads.push_back(node(pos, rest));
      return;
    case GrammarSymbol::kStar:
      heads.push_back(node(pos, rest));
      expand(pos + 1, rest, heads, accepting, depth + 1);
      return;
    case GrammarSymbol::kRule: {
      // A rule last in its alternative returns straight to the caller's continuation (so a
      // right-recursive repetition keeps its stack from growing).
      const int32_t continuation = elements_[size_t(pos) + 1].end ? rest : node(pos + 1, rest);
      for (int32_t a : alternatives_[size_t(e.rule)]) expand(a, continuation, heads, accepting, depth + 1);
      return;
    }
  }
}

int32_t GrammarAutomaton::intern(std::vector<int32_t> heads, bool accepting) {
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  if (heads.empty() && !accepting) return kDead;
  std::string key(reinterpret_cast<const char*>(heads.data()), heads.size() * sizeof(int32_t));
  key += accepting ? 'a' : 'n';
  auto [it, inserted] = state_ids_.try_emplace(std::move(key), int32_t(states_.size()));
  if (inserted) {
    State s;
    s.heads = std::move(heads);
    s.accepting = accepting;
    states_.push_back(std::move(s));
  }
  return it->second;
}

int32_t GrammarAutomaton::step_locked(int32_t state, uint8_t byte) {
  if (state < 0) return kDead;
  if (!states_[size_t(state)].next) {
    states_[size_t(state)].next = std::make_unique<std::array<int32_t, 256>>();
    states_[size_t(state)].next->fill(kUnknown);
    ++tables_;
  }
  const int32_t known = (*states_[size_t(state)].next)[byte];
  if (known != kUnknown) return known;
  std::vector<int32_t> heads;
  bool accepting = false;
  int32_t next = kDead;
  try {
    for (int32_t h : std::vector<int32_t>(states_[size_t(state)].heads)) {
      const Node n = nodes_[size_t(h)];
      const Element& e = elements_[size_t(n.pos)];
      if (!e.bytes.test(byte)) continue;
      // A star stays where it is after its byte; a byte moves on.
      expand(e.kind == GrammarSymbol::kStar ? n.pos : n.pos + 1, n.rest, heads, accepting, 0);
    }
    next = intern(std::move(heads), accepting);
  } catch (const TooDeep&) {
    next = kDead;
  }
  (*states_[size_t(state)].next)[byte] = next;
  return next;
}

void GrammarAutomaton::trim_caches() {
  if (tables_ > kMaxTables) {
    for (State& s : states_) s.next.reset();
    tables_ = 0;
  }
  if (masks_ > kMaxMasks) {
    for (State& s : states_) s.mask.reset();
    masks_ = 0;
  }
}

int32_t GrammarAutomaton::step(int32_t state, uint8_t byte) {
  std::lock_guard lock(mutex_);
  const int32_t next = step_locked(state, byte);
  trim_caches();
  return next;
}

int32_t GrammarAutomaton::step(int32_t state, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  for (char c : bytes) state = step_locked(state, uint8_t(c));
  trim_caches();
  return state;
}

bool GrammarAutomaton::accepting(int32_t state) {
  std::lock_guard lock(mutex_);
  return state >= 0 && states_[size_t(state)].accepting;
}

bool GrammarAutomaton::finished(int32_t state) {
  std::lock_guard lock(mutex_);
  return state >= 0 && states_[size_t(state)].accepting && states_[size_t(state)].heads.empty();
}

std::shared_ptr<const TokenMask> GrammarAutomaton::mask(int32_t state) {
  std::lock_guard lock(mutex_);
  const int64_t size = vocabulary_->size();
  if (state < 0) return std::make_shared<const TokenMask>(size_t((size + 31) / 32), 0u);
  if (states_[size_t(state)].mask) return states_[size_t(state)].mask;
  auto m = std::make_shared<TokenMask>(size_t((size + 31) / 32), 0u);
  const std::vector<TokenVocabulary::Node>& trie = vocabulary_->trie();
  const std::vector<int32_t>& ids = vocabulary_->ids();
  std::vector<int32_t> at(vocabulary_->longest() + 1, kDead);  // the state after each depth's byte
  at[0] = state;
  for (size_t i = 0; i < trie.size();) {
    const TokenVocabulary::Node& t = trie[i];
    const int32_t next = step_locked(at[t.depth - 1], t.byte);
    if (next == kDead) {
      i = size_t(t.end);
      continue;
    }
    at[t.depth] = next;
    for (int32_t k = t.first; k < t.last; ++k) mask_set(*m, ids[size_t(k)]);
    ++i;
  }
  states_[size_t(state)].mask = m;
  ++masks_;
  std::shared_ptr<const TokenMask> out = std::move(m);
  trim_caches();
  return out;
}

size_t GrammarAutomaton::stack_nodes() const {
  std::lock_guard lock(mutex_);
  return nodes_.size();
}

size_t GrammarAutomaton::states() const {
  std::lock_guard lock(mutex_);
  return states_.size();
}

const TokenMask& GrammarAutomaton::blank_tokens() {
  std::lock_guard lock(mutex_);
  if (blank_.empty()) {
    blank_.assign(size_t((vocabulary_->size() + 31) / 32), 0u);
    for (int32_t id = 0; id < vocabulary_->size(); ++id) {
      const std::string& b = vocabulary_->bytes(id);
      if (!b.empty() && b.find_first_not_of(" \t\r\n") == std::string::npos) mask_set(blank_, id);
    }
  }
  return blank_;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<GrammarAutomaton> automaton, std::vector<int32_t> end_ids,
                                     std::optional<ReasoningGate> gate)
    : automaton_(std::move(automaton)), end_ids_(std::move(end_ids)), gate_(gate), state_(automaton_->start()) {
  if (gate_) phase_ = gate_->opened ? Phase::kReasoning : Phase::kStart;
}

bool GrammarConstraint::is_end(int32_t token) const {
  return std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end();
}

bool GrammarConstraint::blank(int32_t token) const {
  const std::string& b = automaton_->vocabulary().bytes(token);
  return !b.empty() && b.find_first_not_of(" \t\r\n") == std::string::npos;
}

const TokenMask& GrammarConstraint::allowed() {
  if (allowed_valid_) return allowed_;
  const int64_t size = automaton_->vocabulary().size();
  const size_t words = size_t((size + 31) / 32);
  if (ended_) {
    allowed_.assign(words, 0u);
  } else if (phase_ == Phase::kReasoning) {
    allowed_.assign(words, ~0u);
  } else {
    allowed_ = *automaton_->mask(state_);
    if (automaton_->accepting(state_)) {
      for (int32_t id : end_ids_) {
        if (id >= 0 && id < size) mask_set(allowed_, id);
      }
    }
    if (phase_ == Phase::kStart && gate_->open >= 0 && gate_->open < size) mask_set(allowed_, gate_->open);
    if (phase_ == Phase::kAfter) {
      const TokenMask& b = automaton_->blank_tokens();
      for (size_t w = 0; w < words; ++w) allowed_[w] |= b[w];
    }
  }
  allowed_valid_ = true;
  return allowed_;
}

bool GrammarConstraint::take(int32_t token, Phase& phase, int32_t& state, bool& ends) const {
  ends = false;
  if (ended_ || token < 0 || token >= automaton_->vocabulary().size()) return false;
  if (phase_ == Phase::kReasoning || (phase_ == Phase::kStart && token == gate_->open)) {
    if (is_end(token)) {
      ends = true;
    } else if (phase_ == Phase::kStart) {
      phase = Phase::kReasoning;
    } else if (token == gate_->close) {
      phase = Phase::kAfter;
    }
    return true;
  }
  if (phase_ == Phase::kAfter && blank(token)) return true;
  if (is_end(token)) {
    ends = true;
    return automaton_->accepting(state_);
  }
  const std::string& bytes = automaton_->vocabulary().bytes(token);
  if (bytes.empty()) return false;
  const int32_t next = automaton_->step(state_, bytes);
  if (next == GrammarAutomaton::kDead) return false;
  phase = Phase::kGrammar, state = next;
  return true;
}

bool GrammarConstraint::allows(int32_t token) {
  Phase phase = phase_;
  int32_t state = state_;
  bool ends = false;
  return take(token, phase, state, ends);
}

void GrammarConstraint::accept(int32_t token) {
  Phase phase = phase_;
  int32_t state = state_;
  bool ends = false;
  if (!take(token, phase, state, ends)) {
    throw Error("grammar: token " + std::to_string(token) + " does not continue the text inside the grammar");
  }
  phase_ = phase, state_ = state, ended_ = ends;
  allowed_valid_ = false;
}

bool GrammarConstraint::finished() const {
  return ended_ || (phase_ == Phase::kGrammar && automaton_->finished(state_));
}

std::shared_ptr<GrammarConstraint> GrammarConstraint::fresh() const {
  return std::make_shared<GrammarConstraint>(automaton_, end_ids_, gate_);
}

std::shared_ptr<GrammarAutomaton> GrammarCache::get(const std::string& key, const std::function<Grammar()>& make) {
  {
    std::lock_guard lock(mutex_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it) {
      if (it->first != key) continue;
      // An automaton that has grown past max_states_ is retired: requests already on it keep it,
      // new ones start a fresh one (a server's shared json_object grammar must not grow forever).
      if (it->second->states() > max_states_) {
        recent_.erase(it);
        break;
      }
      recent_.splice(recent_.begin(), recent_, it);
      return recent_.front().second;
    }
  }
  auto automaton = std::make_shared<GrammarAutomaton>(make(), vocabulary_);
  std::lock_guard lock(mutex_);
  recent_.emplace_front(key, automaton);
  if (recent_.size() > kMax) recent_.pop_back();
  return automaton;
}

std::shared_ptr<GrammarAutomaton> GrammarCache::json_object() {
  return get("json_object", [] { return json_object_grammar(); });
}

std::shared_ptr<GrammarAutomaton> GrammarCache::json_schema(const nlohmann::ordered_json& schema,
                                                            std::string_view suffix) {
  return get("schema " + std::string(suffix) + " " + schema.dump(),
             [&] { return json_schema_grammar(schema, suffix); });
}

std::shared_ptr<GrammarAutomaton> GrammarCache::regex(const std::string& pattern) {
  return get("regex " + pattern, [&] { return regex_grammar(pattern); });
}

std::shared_ptr<GrammarAutomaton> GrammarCache::choice(const std::vector<std::string>& choices) {
  std::string key = "choice";
  for (const std::string& c : choices) key += " " + nlohmann::json(c).dump();
  return get(key, [&] { return choice_grammar(choices); });
}

}  // namespace onecat::engine
