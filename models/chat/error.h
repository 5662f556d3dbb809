// The one error a chat template produces: a sentence that names the template line.
#pragma once
#include <string>

#include "base/error.h"

namespace onecat::chat {

class TemplateError : public InputError {
 public:
  // line 0: not known yet; the interpreter adds the line of the expression being evaluated.
  TemplateError(int line, std::string message, bool raised_by_template = false)
      : InputError(line > 0 ? "chat template line " + std::to_string(line) + ": " + message : message),
        line_(line),
        message_(std::move(message)),
        raised_by_template_(raised_by_template) {}

  int line() const { return line_; }
  // The sentence without the line prefix.
  const std::string& message() const { return message_; }
  // True when the template itself called raise_exception(message) (it refused the input).
  bool raised_by_template() const { return raised_by_template_; }

 private:
  int line_;
  std::string message_;
  bool raised_by_template_;
};

// What a template may build: strings (and the rendering) of at most kMaxTextBytes, lists of
// at most kMaxItems (range()'s limit), pad widths of at most kMaxWidth (percent formats' limit).
// A real chat template stays far below them; past them Python would exhaust memory.
inline constexpr size_t kMaxTextBytes = size_t(1) << 26;  // 64 MiB
inline constexpr size_t kMaxItems = 1000000;
inline constexpr size_t kMaxWidth = size_t(1) << 20;

// Throws when a string of `bytes` would be past kMaxTextBytes.
inline void check_text_bytes(size_t bytes) {
  if (bytes > kMaxTextBytes)
    throw TemplateError(0, "a string would be longer than 64 MiB, more than a chat template builds");
}

}  // namespace onecat::chat
