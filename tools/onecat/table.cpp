#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

// Terminal columns a UTF-8 cell takes (continuation bytes take none).
size_t display_width(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

Table::Table(std::vector<std::string> header, std::vector<size_t> right) : right_(std::move(right)) {
  rows_.push_back(std::move(header));
}

void Table::row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

void Table::print() const {
  std::vector<size_t> width;
  for (const auto& r : rows_) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], display_width(r[c]));
  }
  for (const auto& r : rows_) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - display_width(r[c]), ' ');
      const bool right = std::find(right_.begin(), right_.end(), c) != right_.end();
      const bool last = c + 1 == r.size();
      line += (c ? " " : "") + (right ? pad + r[c] : last ? r[c] : r[c] + pad);
    }
    std::printf("%s\n", line.c_str());
  }
}

std::optional<long long> leading_integer(const std::string& item, size_t& used) {
  used = 0;
  try {
    return std::stoll(item, &used);
  } catch (const std::exception&) {
    used = 0;
    return std::nullopt;
  }
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buf[256];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return n < 0 ? std::string() : std::string(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
}

}  // namespace onecat::cli
