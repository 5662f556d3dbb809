#include "models/chat/text.h"

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat::text {
namespace {

bool caseless(char32_t c) {
  return (c >= 0x2b0 && c <= 0x36f) || (c >= 0x590 && c <= 0x10ff) || (c >= 0x2000 && c <= 0x2bff) ||
         (c >= 0x3000 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7af) || (c >= 0xf900 && c <= 0xfaff) ||
         (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0x1f000 && c <= 0x1faff) || (c >= 0xff01 && c <= 0xff20) ||
         (c >= 0xff3b && c <= 0xff40) || (c >= 0xff5b && c <= 0xffef) || (c >= 0x20000 && c <= 0x3ffff) || c == 0xd7 ||
         c == 0xf7 || (c >= 0x80 && c <= 0xbf && c != 0xb5 && c != 0xaa && c != 0xba);
}

// Simple one-to-one case pairs: Latin-1, Latin Extended-A and basic Cyrillic. Letters whose
// Python mapping is not one code point (ß, ŉ, İ), or depends on context (Greek final sigma),
// and other scripts are reported as unsupported.
bool case_pair(char32_t c, char32_t& upper, char32_t& lower) {
  if (c >= 0xc0 && c <= 0xfe && c != 0xd7 && c != 0xf7 && c != 0xdf) {
    upper = c >= 0xe0 ? c - 0x20 : c;
    lower = c < 0xe0 ? c + 0x20 : c;
    return true;
  }
  if (c == 0xff || c == 0x178) {
    upper = 0x178;
    lower = 0xff;
    return true;
  }
  if ((c >= 0x100 && c <= 0x12f) || (c >= 0x132 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) {
    upper = c & ~char32_t(1);
    lower = c | 1;
    return true;
  }
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) {
    upper = (c & 1) ? c : c - 1;
    lower = (c & 1) ? c + 1 : c;
    return true;
  }
  if (c >= 0x400 && c <= 0x44f) {
    upper = c >= 0x430 ? c - 0x20 : c;
    lower = c < 0x410 ? c + 0x50 : c < 0x430 ? c + 0x20 : c;
    return true;
  }
  if (c >= 0x450 && c <= 0x45f) {
    upper = c - 0x50;
    lower = c;
    return true;
  }
  return false;
}

char32_t map_case(char32_t c, bool to_upper) {
  if (c < 0x80) {
    if (to_upper && c >= 'a' && c <= 'z') return c - 32;
    if (!to_upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (caseless(c)) return c;
  char32_t upper, lower;
  if (case_pair(c, upper, lower)) return to_upper ? upper : lower;
  throw TemplateError(0, "changing the case of this non-ASCII letter is not supported");
}

bool is_cased_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (caseless(c)) return false;
  char32_t upper, lower;
  if (case_pair(c, upper, lower)) return true;
  throw TemplateError(0, "changing the case of this non-ASCII letter is not supported");
}

std::string map_all(const std::string& s, bool to_upper) {
  std::string out;
  for (size_t i = 0; i < s.size();) utf8::append(out, map_case(utf8::next(s, i), to_upper));
  return out;
}

}  // namespace

std::string upper(const std::string& s) { return map_all(s, true); }
std::string lower(const std::string& s) { return map_all(s, false); }

std::string capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    utf8::append(out, map_case(utf8::next(s, i), first));
    first = false;
  }
  return out;
}

std::string python_title(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8::next(s, i);
    bool cased = is_cased_letter(c);
    utf8::append(out, cased ? map_case(c, !previous_cased) : c);
    previous_cased = cased;
  }
  return out;
}

std::string jinja_title(const std::string& s) {
  // "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    char32_t c = utf8::next(s, i);
    bool separator = utf8::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      utf8::append(out, c);
      word_start = true;
    } else {
      utf8::append(out, map_case(c, word_start));
      word_start = false;
    }
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  if (old.empty()) throw TemplateError(0, "replacing the empty string is not supported");
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += repl;
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace onecat::chat::text
