// A request's generated ids → its text, piece by piece, with stop strings (docs/serve.md).
// Ids arrive one at a time; step() returns the text that became final: never part of a UTF-8
// character (tokenizer::DecodeStream), special tokens skipped by default, and never text that
// could still be the start of a stop string (it is held back until the next ids show it is
// not). When the text contains a stop string, everything before it is returned, the stop
// string and what follows are dropped, and stopped() turns true: the caller then ends the
// request (Engine::cancel) and reports finish_reason "stop", as vLLM does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/tokenizer/decode_stream.h"
#include "models/tokenizer/tokenizer.h"

namespace onecat::engine {

class TextStream {
 public:
  // InputError for an empty stop string (it would match before any text).
  TextStream(tokenizer::Tokenizer tokenizer, std::vector<std::string> stop_strings, bool skip_special_tokens = true);

  // The text that became final after `id` (empty once stopped()). An id the tokenizer lacks
  // (a model's vocabulary is often padded past the tokenizer's) decodes to nothing.
  std::string step(int32_t id);
  // At the end of generation: whatever was held back (still cut at a stop string).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string release();  // the final part of held_, per the stop strings

  tokenizer::Tokenizer tokenizer_;
  tokenizer::DecodeStream decoder_;
  std::vector<std::string> stops_;
  std::string held_;  // decoded, not yet returned
  bool stopped_ = false;
};

}  // namespace onecat::engine
