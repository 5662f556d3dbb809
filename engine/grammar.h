// Constrained decoding (docs/serve.md, "Structured outputs"): the tokens a request may sample
// next are those whose bytes keep its text inside a context-free grammar over bytes.
//
// A Grammar is rules of alternatives of symbols (a byte from a set, a run of bytes from a set,
// another rule). GrammarAutomaton runs it as a pushdown automaton whose stacks are interned
// (one id per distinct stack) and whose states — the sets of stacks a text can be in — are
// interned too, so the transitions it has taken once are a table lookup afterwards: a DFA built
// lazily over the grammar. A state's allowed tokens are found by walking a trie of every token's
// bytes (TokenVocabulary) through those transitions, a subtree dropped at its first dead byte,
// and kept per state. GrammarConstraint is one request's position in it.
#pragma once
#include <array>
#include <bitset>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace onecat::tokenizer {
class Tokenizer;
}

namespace onecat::engine {

using ByteSet = std::bitset<256>;

struct GrammarSymbol {
  enum Kind : uint8_t { kByte, kStar, kRule };
  Kind kind = kByte;
  ByteSet bytes;  // kByte: one byte of these; kStar: any number of them (none included)
  int rule = -1;  // kRule
};

class Grammar {
 public:
  static GrammarSymbol byte(char c);
  static GrammarSymbol set(ByteSet bytes);
  static GrammarSymbol star(ByteSet bytes);
  static GrammarSymbol ref(int rule);
  // One kByte symbol per byte of `text`.
  static std::vector<GrammarSymbol> literal(std::string_view text);
  // Bytes lo … hi.
  static ByteSet range(unsigned char lo, unsigned char hi);

  // A new rule without alternatives (its name for messages); its id.
  int add_rule(std::string name);
  // An alternative of `rule`: these symbols in order (none: the empty text).
  void add(int rule, std::vector<GrammarSymbol> symbols);
  // The rule the text must match as a whole (the first rule added unless set).
  void set_root(int rule) { root_ = rule; }

  int root() const { return root_; }
  size_t rules() const { return rules_.size(); }
  const std::string& name(int rule) const { return rules_[size_t(rule)].name; }
  const std::vector<std::vector<GrammarSymbol>>& alternatives(int rule) const {
    return rules_[size_t(rule)].alternatives;
  }

 private:
  struct Rule {
    std::string name;
    std::vector<std::vector<GrammarSymbol>> alternatives;
  };
  std::vector<Rule> rules_;
  int root_ = 0;
};

// Every token's bytes (Tokenizer::token_bytes) in a trie, for walking a grammar state over the
// whole vocabulary at once. Ids past the tokenizer's (a model's padded vocabulary) and tokens
// without bytes (added and special tokens) are never allowed by a grammar.
class TokenVocabulary {
 public:
  // `size`: the model's vocabulary (the masks' width), ≥ token_bytes.size().
  TokenVocabulary(const std::vector<std::string>& token_bytes, int64_t size);
  // A model's: its tokenizer's tokens (Tokenizer::token_bytes) over its vocabulary of `size`
  // ids, tokenizer ids past it (which the model cannot sample) left out.
  static std::shared_ptr<const TokenVocabulary> of(const tokenizer::Tokenizer& tokenizer, int64_t size);

  int64_t size() const { return size_; }
  const std::string& bytes(int32_t id) const;

  // The trie in preorder, without its root: node i adds byte `byte` to its parent's text, its
  // subtree ends before node `end`, and the tokens whose bytes are its text are
  // ids[first … last).
  struct Node {
    uint8_t byte;
    uint32_t depth;  // 1 for the root's children
    int32_t end, first, last;
  };
  const std::vector<Node>& trie() const { return trie_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  size_t longest() const { return longest_; }

 private:
  int64_t size_;
  std::vector<std::string> bytes_;
  std::vector<Node> trie_;
  std::vector<int32_t> ids_;
  size_t longest_ = 0;
};

// A bit per token id: bit (id % 32) of word id / 32.
using TokenMask = std::vector<uint32_t>;
inline bool mask_has(const TokenMask& m, int64_t id) { return (m[size_t(id >> 5)] >> (id & 31)) & 1u; }
inline void mask_set(TokenMask& m, int64_t id) { m[size_t(id >> 5)] |= 1u << (id & 31); }

// One grammar over one vocabulary, shared by the requests that use it (each holds a state id).
// Its caches grow as texts explore it; every member is safe to call from several threads.
class GrammarAutomaton {
 public:
  // Error when a rule has no alternative or a symbol names no rule.
  GrammarAutomaton(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary);

  static constexpr int32_t kDead = -1;
  int32_t start() const { return start_; }
  // The state after `byte` (kDead: the text left the grammar).
  int32_t step(int32_t state, uint8_t byte);
  int32_t step(int32_t state, std::string_view bytes);
  // The text so far is a whole match of the grammar / and nothing may follow it.
  bool accepting(int32_t state);
  bool finished(int32_t state);
  // The tokens whose bytes keep the text inside the grammar from `state` (not the end tokens,
  // which the caller adds when accepting).
  std::shared_ptr<const TokenMask> mask(int32_t state);
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  // The tokens made only of spaces, tabs and newlines.
  const TokenMask& blank_tokens();

  // For tests and metrics: interned stacks and states so far.
  size_t stack_nodes() const;
  size_t states() const;

 private:
  struct Element {
    GrammarSymbol::Kind kind;
    bool end;  // the end of an alternative (no symbol)
    ByteSet bytes;
    int rule;
  };
  struct State {
    std::vector<int32_t> heads;  // stacks whose top is a byte or star element, sorted
    bool accepting = false;
    std::unique_ptr<std::array<int32_t, 256>> next;  // kUnknown until taken
    std::shared_ptr<const TokenMask> mask;
  };
  int32_t node(int32_t pos, int32_t rest);
  void expand(int32_t pos, int32_t rest, std::vector<int32_t>& heads, bool& accepting, int depth);
  int32_t intern(std::vector<int32_t> heads, bool accepting);
  int32_t step_locked(int32_t state, uint8_t byte);
  void trim_caches();

  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::vector<std::string> rule_names_;
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> alternatives_;  // per rule: its alternatives' first elements
  struct Node {
    int32_t pos, rest;
  };
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> state_ids_;  // heads and accepting, as bytes
  size_t tables_ = 0, masks_ = 0;
  TokenMask blank_;
  int32_t start_ = kDead;
  mutable std::mutex mutex_;
};

// Thinking models (docs/serve.md): the reply may first reason inside open … close (single
// tokens, e.g. Qwen3's <think> and </think>), unconstrained, and the grammar applies after it
// (blank tokens between close and the grammar's text are let through).
struct ReasoningGate {
  int32_t open = -1, close = -1;
  bool opened = false;  // the prompt ends inside the reasoning
};

// One request's place in a grammar: the tokens it may sample next and the tokens it took.
class GrammarConstraint {
 public:
  // end_ids: the tokens that end the request (its stop ids), allowed once the text is a whole
  // match (and inside a reasoning block).
  GrammarConstraint(std::shared_ptr<GrammarAutomaton> automaton, std::vector<int32_t> end_ids,
                    std::optional<ReasoningGate> gate = std::nullopt);

  // Whether the next token is constrained (not inside a reasoning block): allowed() applies.
  bool constrains() const { return phase_ != Phase::kReasoning && !ended_; }
  // The tokens allowed next, over the vocabulary's size (end ids included when accepting).
  const TokenMask& allowed();
  bool allows(int32_t token);
  // Takes `token`: Error when it is not allowed.
  void accept(int32_t token);
  // Nothing can follow the text: the request is complete.
  bool finished() const;
  // A constraint at the grammar's start sharing this one's automaton (another choice of a request).
  std::shared_ptr<GrammarConstraint> fresh() const;
  const GrammarAutomaton& automaton() const { return *automaton_; }

 private:
  // kStart: the grammar's text or the gate's open; kReasoning: anything until close; kAfter:
  // blanks or the grammar's text; kGrammar: inside the grammar.
  enum class Phase { kStart, kReasoning, kAfter, kGrammar };
  bool is_end(int32_t token) const;
  bool blank(int32_t token) const;
  // What taking `token` does (one automaton step): false when it is not allowed; else the phase
  // and state after it, and whether it ends the request (an end id).
  bool take(int32_t token, Phase& phase, int32_t& state, bool& ends) const;

  std::shared_ptr<GrammarAutomaton> automaton_;
  std::vector<int32_t> end_ids_;
  std::optional<ReasoningGate> gate_;
  Phase phase_ = Phase::kGrammar;
  int32_t state_;
  bool ended_ = false;  // an end id was taken
  TokenMask allowed_;
  bool allowed_valid_ = false;
};

// The automata of the grammars requests asked for, by a key naming the grammar (e.g. its
// schema's text), so that one sent again reuses the masks already computed; the latest kMax are
// kept (each holds at most about 21 MB of tables and masks). Safe to share between threads.
class GrammarCache {
 public:
  static constexpr size_t kMax = 16;
  static constexpr size_t kMaxStates = 200'000;
  explicit GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, size_t max_states = kMaxStates)
      : vocabulary_(std::move(vocabulary)), max_states_(max_states) {}
  // The automaton of `key`, made from make() the first time (its exceptions pass through).
  std::shared_ptr<GrammarAutomaton> get(const std::string& key, const std::function<Grammar()>& make);
  // The structured outputs' grammars (engine/json_schema.h, engine/regex_grammar.h), each keyed by
  // what makes it; their InputErrors pass through.
  std::shared_ptr<GrammarAutomaton> json_object();
  std::shared_ptr<GrammarAutomaton> json_schema(const nlohmann::ordered_json& schema, std::string_view suffix = {});
  std::shared_ptr<GrammarAutomaton> regex(const std::string& pattern);
  std::shared_ptr<GrammarAutomaton> choice(const std::vector<std::string>& choices);
  const std::shared_ptr<const TokenVocabulary>& vocabulary() const { return vocabulary_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  size_t max_states_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<GrammarAutomaton>>> recent_;  // latest first
};

}  // namespace onecat::engine
