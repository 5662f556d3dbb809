// A whole file read into memory, for the small text files a checkpoint or a request brings
// (config.json, tokenizer.json, chat templates): one reader, one message.
#pragma once
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "base/error.h"

namespace onecat {

// The file's bytes, or nullopt when it cannot be opened (the caller says what that means).
inline std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The file's bytes; InputError naming it when it cannot be opened.
inline std::string read_file(const std::filesystem::path& path) {
  std::optional<std::string> text = try_read_file(path);
  if (!text) throw InputError("cannot read " + path.string() + "; check that it exists and is readable.");
  return *std::move(text);
}

}  // namespace onecat
