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

}  // namespace onecat::chat
