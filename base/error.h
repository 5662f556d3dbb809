// One exception type for everything a person must act on: the message is a whole
// sentence that says what failed and what to do (ARCHITECTURE.md, rule 8).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace onecat {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Malformed user input (spec, config, file): the CLI exits with status 2 for these.
class InputError : public Error {
 public:
  using Error::Error;
};

// Input text as a message quotes it: 'text', cut after kMaxQuoted bytes (at a UTF-8 character
// boundary) with its full size noted, so a hostile 100 KB spec is not echoed whole.
inline constexpr size_t kMaxQuoted = 160;
inline std::string quoted_input(std::string_view text) {
  if (text.size() <= kMaxQuoted) return "'" + std::string(text) + "'";
  size_t cut = kMaxQuoted;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return "'" + std::string(text.substr(0, cut)) + "…' (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace onecat
