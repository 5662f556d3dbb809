// UTF-8 helpers: Python strings index, slice and classify code points, not bytes.
#pragma once
#include <string>
#include <vector>

namespace onecat::chat::utf8 {

// The code point starting at s[i]; advances i. Malformed bytes decode as U+FFFD, one byte each.
char32_t next(const std::string& s, size_t& i);
void append(std::string& out, char32_t c);
std::vector<char32_t> decode(const std::string& s);
std::string encode(const std::vector<char32_t>& cps);
size_t length(const std::string& s);

// str.isspace() and str.isprintable() for one code point, as Python defines them.
bool is_space(char32_t c);
bool is_printable(char32_t c);

}  // namespace onecat::chat::utf8
