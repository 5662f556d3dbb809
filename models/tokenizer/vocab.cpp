#include "models/tokenizer/vocab.h"

#include "base/error.h"

namespace onecat::tokenizer {

void Vocab::add(std::string token, int32_t id) {
  if (id < 0)
    throw Error("The tokenizer vocabulary gives token '" + token + "' the negative id " + std::to_string(id) + ".");
  if (size_t(id) >= tokens_.size()) {
    tokens_.resize(size_t(id) + 1);
    present_.resize(size_t(id) + 1, false);
  }
  if (present_[id] && tokens_[id] != token)
    throw Error("The tokenizer vocabulary gives id " + std::to_string(id) + " to both '" + tokens_[id] + "' and '" +
                token + "'.");
  tokens_[id] = token;
  present_[id] = true;
  ids_.emplace(std::move(token), id);
}

}  // namespace onecat::tokenizer
