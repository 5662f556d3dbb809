#include "models/chat/utf8.h"

namespace onecat::chat::utf8 {

char32_t next(const std::string& s, size_t& i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  if (b < 0x80) {
    ++i;
    return b;
  }
  int extra = (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xe ? 2 : (b >> 3) == 0x1e ? 3 : -1;
  if (extra < 0 || i + size_t(extra) >= s.size()) {
    ++i;
    return 0xfffd;
  }
  char32_t c = b & (0x3f >> extra);
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + size_t(k)) & 0xc0) != 0x80) {
      ++i;
      return 0xfffd;
    }
    c = (c << 6) | (byte(i + size_t(k)) & 0x3f);
  }
  i += size_t(extra) + 1;
  return c;
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xc0 | (c >> 6));
    out += char(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += char(0xe0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  } else {
    out += char(0xf0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3f));
    out += char(0x80 | ((c >> 6) & 0x3f));
    out += char(0x80 | (c & 0x3f));
  }
}

std::vector<char32_t> decode(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(next(s, i));
  return out;
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) append(out, c);
  return out;
}

size_t length(const std::string& s) {
  size_t n = 0;
  for (unsigned char b : s)
    if ((b & 0xc0) != 0x80) ++n;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x9 && c <= 0xd) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_printable(char32_t c) {
  // Python: not printable are the categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than the
  // space. The common ones; rarer unassigned code points print as themselves here.
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f))
    return false;
  if (c == 0x3000 || c == 0xfeff || (c >= 0xd800 && c <= 0xf8ff) || c == 0xfff9 || c == 0xfffa || c == 0xfffb)
    return false;
  if (c >= 0xf0000) return false;
  return true;
}

}  // namespace onecat::chat::utf8
