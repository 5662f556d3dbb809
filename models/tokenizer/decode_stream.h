// Streaming detokenization: ids arrive one at a time (as a model samples them) and each
// step returns the text that became final. Never returns part of a UTF-8 character, and
// everything returned, followed by finish(), equals decode() of all ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace onecat::tokenizer {

class DecodeStream {
 public:
  explicit DecodeStream(Tokenizer tokenizer, bool skip_special_tokens = false);

  // The new text after `id` (empty while a character is still incomplete).
  std::string step(int32_t id);
  // Whatever is still held back (an incomplete character decodes to U+FFFD here, as
  // decode() of the whole sequence would).
  std::string finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  // Decoders are not token-local (a leading space is stripped, byte tokens join), so new
  // text is the decoding of the previous chunk plus the pending ids, minus that chunk's
  // own decoding.
  std::vector<int32_t> context_, pending_;
  std::string context_text_;
};

}  // namespace onecat::tokenizer
