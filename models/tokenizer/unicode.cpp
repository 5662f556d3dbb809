#include "models/tokenizer/unicode.h"

namespace onecat::tokenizer {

char32_t next_code_point(std::string_view s, size_t& pos) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[pos + i]); };
  unsigned char lead = b(0);
  size_t n = utf8_sequence_length(lead);
  if (pos + n > s.size()) n = 1;
  char32_t cp;
  switch (n) {
    case 1:
      cp = lead;
      break;
    case 2:
      cp = (char32_t(lead & 0x1F) << 6) | (b(1) & 0x3F);
      break;
    case 3:
      cp = (char32_t(lead & 0x0F) << 12) | (char32_t(b(1) & 0x3F) << 6) | (b(2) & 0x3F);
      break;
    default:
      cp = (char32_t(lead & 0x07) << 18) | (char32_t(b(1) & 0x3F) << 12) | (char32_t(b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
  pos += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

namespace {

// Length of the well-formed sequence at s[pos], or the length of its maximal ill-formed
// prefix as a negative number (Unicode 15, table 3-7).
int well_formed_length(std::string_view s, size_t pos) {
  auto at = [&](size_t i) -> int { return pos + i < s.size() ? static_cast<unsigned char>(s[pos + i]) : -1; };
  int lead = at(0);
  if (lead < 0x80) return 1;
  int need;
  int lo = 0x80, hi = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i <= need; ++i) {
    int c = at(i);
    int l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (c < l || c > h) return -i;
  }
  return need + 1;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    int n = well_formed_length(s, pos);
    if (n < 0) return false;
    pos += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    int n = well_formed_length(bytes, pos);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      out += "\xEF\xBF\xBD";
      pos += -n;
    }
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    unsigned char c = s[s.size() - back];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = utf8_sequence_length(c);
    if (need <= back) return 0;
    return well_formed_length(s, s.size() - back) == -int(back) ? back : 0;
  }
  return 0;
}

const std::array<char32_t, 256>& byte_to_code_point() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

int code_point_to_byte(char32_t cp) {
  static const std::array<int16_t, 324> inverse = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    const auto& fwd = byte_to_code_point();
    for (int b = 0; b < 256; ++b) t[fwd[b]] = int16_t(b);
    return t;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& table = byte_to_code_point();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, table[b]);
  return out;
}

}  // namespace onecat::tokenizer
