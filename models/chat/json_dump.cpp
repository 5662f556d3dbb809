#include "models/chat/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

void quote(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (ensure_ascii && c >= 0x80) {
      char32_t cp = utf8::next(s, i);
      --i;
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xd800 + (cp >> 10)),
                      unsigned(0xdc00 + (cp & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(cp));
      }
      out += buf;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

std::string number(const Value& v) {
  if (v.kind() == Value::Kind::floating) {
    double d = v.as_double();
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return float_repr(d);
  }
  return std::to_string(v.as_int());
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
    key_sep_ = o.key_separator ? *o.key_separator : ": ";
  }

  void dump(std::string& out, const Value& v, int depth) {
    using K = Value::Kind;
    switch (v.kind()) {
      case K::none:
        out += "null";
        return;
      case K::boolean:
        out += v.as_bool() ? "true" : "false";
        return;
      case K::integer:
      case K::floating:
        out += number(v);
        return;
      case K::string:
        quote(out, v.str(), o_.ensure_ascii);
        return;
      case K::list: {
        if (v.list_data().flavor == Flavor::generator || v.list_data().flavor == Flavor::view ||
            v.list_data().flavor == Flavor::range)
          throw TemplateError(0, "tojson cannot serialise a " + v.type_name());
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep_;
          newline(out, depth + 1);
          dump(out, items[i], depth + 1);
        }
        newline(out, depth);
        out += ']';
        return;
      }
      case K::dict: {
        auto items = v.dict_data().items;
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (o_.sort_keys)
          std::stable_sort(items.begin(), items.end(),
                           [](const auto& a, const auto& b) { return less(a.first, b.first); });
        out += '{';
        bool first = true;
        for (const auto& [k, e] : items) {
          if (!first) out += item_sep_;
          first = false;
          newline(out, depth + 1);
          quote(out, key_text(k), o_.ensure_ascii);
          out += key_sep_;
          dump(out, e, depth + 1);
        }
        newline(out, depth);
        out += '}';
        return;
      }
      case K::undefined:
        throw TemplateError(0, "tojson cannot serialise an undefined value");
      default:
        throw TemplateError(0, "tojson cannot serialise a " + v.type_name());
    }
  }

 private:
  static std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::string:
        return k.str();
      case Value::Kind::none:
        return "null";
      case Value::Kind::boolean:
        return k.as_bool() ? "true" : "false";
      case Value::Kind::integer:
      case Value::Kind::floating:
        return number(k);
      default:
        throw TemplateError(0, "tojson cannot serialise a dict key of type " + k.type_name());
    }
  }

  void newline(std::string& out, int depth) {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *o_.indent;
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).dump(out, v, 0);
  return out;
}

}  // namespace onecat::chat
