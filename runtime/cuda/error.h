// One exception type for everything a person must act on: the message is a whole
// sentence that says what failed and what to do (ARCHITECTURE.md, rule 8).
#pragma once
#include <stdexcept>
#include <string>

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

}  // namespace onecat
