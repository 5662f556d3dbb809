#include "models/chat/percent_format.h"

#include <cmath>
#include <cstdio>

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

std::string pad(std::string body, size_t width, bool left_align, char fill = ' ') {
  size_t len = utf8::length(body);
  if (len >= width) return body;
  std::string padding(width - len, fill);
  return left_align ? body + padding : padding + body;
}

// Zero padding goes between the sign and the digits.
std::string pad_number(std::string body, size_t width, bool left_align, bool zero) {
  if (!zero || left_align || body.size() >= width) return pad(body, width, left_align);
  size_t sign = body.size() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
  return body.substr(0, sign) + std::string(width - body.size(), '0') + body.substr(sign);
}

// A '%' format's or format spec's width or precision past this is refused: Python would build
// the string (10^11 spaces exhaust the memory), and its digits would overflow what holds them.
constexpr size_t kMaxFieldWidth = size_t(1) << 20;

// The decimal number at s[i…] (advancing i), at most kMaxFieldWidth.
size_t field_number(const std::string& s, size_t& i) {
  size_t n = 0;
  for (; i < s.size() && std::isdigit((unsigned char)s[i]); ++i) {
    n = n * 10 + size_t(s[i] - '0');
    if (n > kMaxFieldWidth) {
      throw TemplateError(0, "a format's width or precision is larger than " + std::to_string(kMaxFieldWidth));
    }
  }
  return n;
}

int64_t as_integer(const Value& v, char conversion) {
  if (v.kind() == Value::Kind::integer || v.kind() == Value::Kind::boolean) return v.as_int();
  if (v.kind() == Value::Kind::floating && (conversion == 'd' || conversion == 'i')) {
    if (!std::isfinite(v.as_double())) throw TemplateError(0, "%d cannot format an infinite or NaN float");
    if (std::fabs(v.as_double()) >= 9.2e18) throw TemplateError(0, "%d got a float too large for an integer");
    return int64_t(std::trunc(v.as_double()));
  }
  throw TemplateError(0, std::string("%") + conversion + " format needs a number, not '" + v.type_name() + "'");
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args) {
  bool mapping = args.is_dict();
  std::vector<Value> values;
  if (args.is_list() && args.list_data().flavor == Flavor::tuple)
    values = args.items();
  else if (!mapping)
    values = {args};
  size_t next = 0;
  int nameless_from_mapping = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw TemplateError(0, "a '%' format ends with an incomplete specifier");
    Value v;
    bool have_value = false;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos || !mapping) throw TemplateError(0, "a '%(name)' format needs a dict of values");
      const Value* found = args.dict_data().find(Value::string(format.substr(i + 1, close - i - 1)));
      if (!found) throw TemplateError(0, "a '%' format names a key the dict does not have");
      v = *found;
      have_value = true;
      i = close + 1;
    }
    bool left = false, zero = false, plus = false, space = false;
    for (; i < format.size() && std::string("-0+ #").find(format[i]) != std::string::npos; ++i) {
      if (format[i] == '#') throw TemplateError(0, "the '#' flag in '%' formats is not supported");
      left |= format[i] == '-';
      zero |= format[i] == '0';
      plus |= format[i] == '+';
      space |= format[i] == ' ';
    }
    const size_t width = field_number(format, i);
    int precision = -1;
    if (i < format.size() && format[i] == '.') precision = int(field_number(format, ++i));
    if (i >= format.size()) throw TemplateError(0, "a '%' format ends with an incomplete specifier");
    char conversion = format[i];
    if (conversion == '*') throw TemplateError(0, "'*' widths in '%' formats are not supported");
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (!have_value) {
      if (mapping) {
        if (++nameless_from_mapping > 1) throw TemplateError(0, "not enough arguments for the '%' format");
        v = args;  // Python formats the whole dict for a nameless specifier
      } else {
        if (next >= values.size()) throw TemplateError(0, "not enough arguments for the '%' format");
        v = values[next++];
      }
    }
    std::string body;
    char sign = plus ? '+' : space ? ' ' : 0;
    switch (conversion) {
      case 's':
      case 'r': {
        body = conversion == 's' ? to_str(v) : repr(v);
        if (precision >= 0) {
          std::vector<char32_t> cps = utf8::decode(body);
          if (size_t(precision) < cps.size()) body = utf8::encode({cps.begin(), cps.begin() + precision});
        }
        out += pad(body, width, left);
        continue;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        int64_t n = as_integer(v, conversion);
        char buf[64];
        const char* spec = conversion == 'x'   ? "%llx"
                           : conversion == 'X' ? "%llX"
                           : conversion == 'o' ? "%llo"
                                               : "%llu";
        unsigned long long magnitude = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
        std::snprintf(buf, sizeof buf, spec, magnitude);
        body = buf;
        if (precision > int(body.size())) body = std::string(size_t(precision) - body.size(), '0') + body;
        if (n < 0)
          body = "-" + body;
        else if (sign)
          body = sign + body;
        out += pad_number(body, width, left, zero);
        continue;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) throw TemplateError(0, std::string("%") + conversion + " format needs a number");
        double d = v.as_double();
        if (!std::isfinite(d)) throw TemplateError(0, "formatting inf or nan with '%' is not supported");
        char spec[8] = {'%', 0};
        size_t k = 1;
        if (sign) spec[k++] = sign;
        spec[k++] = '.';
        spec[k++] = '*';
        spec[k++] = conversion;
        char buf[512];
        std::snprintf(buf, sizeof buf, spec, precision < 0 ? 6 : precision, d);
        out += pad_number(buf, width, left, zero);
        continue;
      }
      case 'c': {
        if (v.is_string() && utf8::length(v.str()) == 1) {
          body = v.str();
        } else if (v.kind() == Value::Kind::integer && v.as_int() >= 0 && v.as_int() < 0x110000) {
          utf8::append(body, char32_t(v.as_int()));
        } else {
          throw TemplateError(0, "%c format needs a number or a single character");
        }
        out += pad(body, width, left);
        continue;
      }
      default:
        throw TemplateError(0, std::string("the '%") + conversion + "' format is not supported");
    }
  }
  if (!mapping && next < values.size()) throw TemplateError(0, "not all arguments converted during string formatting");
  return out;
}

std::string format_with_spec(const Value& value, const std::string& spec) {
  if (spec.empty()) return to_str(value);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  {
    size_t first_end = 0;
    utf8::next(spec, first_end);  // the fill may be any one character
    if (first_end < spec.size() && std::string("<>=^").find(spec[first_end]) != std::string::npos) {
      fill = spec.substr(0, first_end);
      align = spec[first_end];
      i = first_end + 1;
    } else if (std::string("<>=^").find(spec[0]) != std::string::npos) {
      align = spec[0];
      i = 1;
    }
  }
  char sign = 0;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && (spec[i] == '#' || spec[i] == 'z'))
    throw TemplateError(0, "the '#' and 'z' options in format specs are not supported");
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  const size_t width = field_number(spec, i);
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_'))
    throw TemplateError(0, "digit grouping in format specs is not supported");
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') precision = int(field_number(spec, ++i));
  char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) throw TemplateError(0, "the format spec '" + spec + "' is not valid");

  std::string body;
  bool numeric = value.is_number();
  if (value.is_string()) {
    if ((type && type != 's') || sign || align == '=')
      throw TemplateError(0, "the format spec '" + spec + "' does not apply to a string");
    body = value.str();
    if (precision >= 0) {
      std::vector<char32_t> cps = utf8::decode(body);
      if (size_t(precision) < cps.size()) body = utf8::encode({cps.begin(), cps.begin() + precision});
    }
  } else if (numeric) {
    bool integral = value.kind() != Value::Kind::floating;
    if (!type && integral) type = 'd';
    if (!type) {
      if (precision >= 0) throw TemplateError(0, "a float format spec with a precision and no type is not supported");
      body = float_repr(value.as_double());
    } else if (std::string("dxXoc").find(type) != std::string::npos) {
      if (!integral) throw TemplateError(0, std::string("the format code '") + type + "' needs an integer");
      if (type == 'c') {
        utf8::append(body, char32_t(value.as_int()));
      } else {
        Value args = Value::list({value}, Flavor::tuple);
        body = percent_format(std::string("%") + type, args);
      }
    } else if (std::string("fFeEgG%").find(type) != std::string::npos) {
      double d = value.as_double() * (type == '%' ? 100 : 1);
      if (!std::isfinite(d)) throw TemplateError(0, "formatting inf or nan is not supported");
      char conversion = type == '%' ? 'f' : type;
      char buf[512];
      char fmt[8] = {'%', '.', '*', conversion, 0};
      std::snprintf(buf, sizeof buf, fmt, precision < 0 ? 6 : precision, d);
      body = std::string(buf) + (type == '%' ? "%" : "");
    } else {
      throw TemplateError(0, std::string("the format code '") + type + "' is not supported");
    }
    if (body[0] != '-' && (sign == '+' || sign == ' ')) body = std::string(1, sign) + body;
  } else {
    throw TemplateError(0, "a format spec for a '" + value.type_name() + "' is not supported");
  }

  size_t len = utf8::length(body);
  if (len >= width) return body;
  if (!align) align = numeric ? '>' : '<';
  size_t total = width - len;
  auto repeat = [&](size_t n) {
    std::string r;
    for (size_t k = 0; k < n; ++k) r += fill;
    return r;
  };
  switch (align) {
    case '<':
      return body + repeat(total);
    case '>':
      return repeat(total) + body;
    case '^':
      return repeat(total / 2) + body + repeat(total - total / 2);
    default: {  // '=': the padding goes after the sign
      size_t sign_len = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
      return body.substr(0, sign_len) + repeat(total) + body.substr(sign_len);
    }
  }
}

}  // namespace onecat::chat
