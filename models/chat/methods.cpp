#include "models/chat/methods.h"

#include <algorithm>
#include <set>

#include "models/chat/error.h"
#include "models/chat/percent_format.h"
#include "models/chat/text.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

using K = Value::Kind;

[[noreturn]] void fail_undefined(const Value& v) {
  throw TemplateError(0, v.undefined_reason().empty() ? "a value is undefined" : v.undefined_reason());
}

std::string owner_name(const Value& v) {
  if (v.is_none()) return "None";
  return "'" + v.type_name() + " object'";
}

Value missing(const Value& obj, const std::string& attribute) {
  return Value::undefined(owner_name(obj) + " has no attribute '" + attribute + "'");
}

std::string string_arg(CallArgs& a, size_t i, const std::string& name, const std::string& method) {
  Value v = a.get(i, name);
  if (!v.is_string()) throw TemplateError(0, method + " needs a string argument '" + name + "'");
  return v.str();
}

// Python's str.split / rsplit.
Value split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<char32_t> cps = utf8::decode(s);
    std::vector<std::string> words;
    if (!from_right) {
      size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && utf8::is_space(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && int64_t(words.size()) == maxsplit) {
          size_t end = cps.size();
          while (end > i && utf8::is_space(cps[end - 1])) --end;
          words.push_back(utf8::encode({cps.begin() + long(i), cps.begin() + long(end)}));
          break;
        }
        size_t start = i;
        while (i < cps.size() && !utf8::is_space(cps[i])) ++i;
        words.push_back(utf8::encode({cps.begin() + long(start), cps.begin() + long(i)}));
      }
    } else {
      size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && utf8::is_space(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && int64_t(words.size()) == maxsplit) {
          size_t start = 0;
          while (start < i && utf8::is_space(cps[start])) ++start;
          words.push_back(utf8::encode({cps.begin() + long(start), cps.begin() + long(i)}));
          break;
        }
        size_t end = i;
        while (i > 0 && !utf8::is_space(cps[i - 1])) --i;
        words.push_back(utf8::encode({cps.begin() + long(i), cps.begin() + long(end)}));
      }
      std::reverse(words.begin(), words.end());
    }
    parts = std::move(words);
  } else {
    if (!sep.is_string()) throw TemplateError(0, "str.split needs a string separator");
    const std::string& d = sep.str();
    if (d.empty()) throw TemplateError(0, "str.split got an empty separator");
    if (!from_right) {
      size_t start = 0;
      while (true) {
        size_t at = s.find(d, start);
        if (at == std::string::npos || (maxsplit >= 0 && int64_t(parts.size()) == maxsplit)) {
          parts.push_back(s.substr(start));
          break;
        }
        parts.push_back(s.substr(start, at - start));
        start = at + d.size();
      }
    } else {
      size_t end = s.size();
      while (true) {
        size_t at = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
        if (at == std::string::npos || (maxsplit >= 0 && int64_t(parts.size()) == maxsplit)) {
          parts.push_back(s.substr(0, end));
          break;
        }
        parts.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
      }
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

bool matches_affix(const std::string& s, const Value& affix, bool prefix, const std::string& method) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw TemplateError(0, method + " needs a string or a tuple of strings");
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list() && affix.list_data().flavor == Flavor::tuple) {
    for (const Value& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// str.format with automatic ({}), numbered ({0}) and named ({name}) fields, no format specs.
std::string format(const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  bool used_automatic = false, used_manual = false;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw TemplateError(0, "str.format found a single '}'");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw TemplateError(0, "str.format found a '{' without its '}'");
    std::string field = fmt.substr(i + 1, close - i - 1);
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's'))
        throw TemplateError(0, "str.format supports only the !r and !s conversions");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(".[{") != std::string::npos || spec.find('{') != std::string::npos)
      throw TemplateError(0, "str.format fields with lookups or nested fields are not supported");
    Value v;
    bool numbered = !field.empty() && std::isdigit((unsigned char)field[0]);
    if (field.empty()) used_automatic = true;
    if (numbered) used_manual = true;
    if (used_automatic && used_manual)
      throw TemplateError(0, "str.format cannot mix automatic ({}) and numbered ({0}) fields");
    if (field.empty()) {
      if (auto_index >= a.positional.size()) throw TemplateError(0, "str.format has more {} fields than arguments");
      v = a.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = size_t(std::stoul(field));
      if (index >= a.positional.size()) throw TemplateError(0, "str.format has no argument " + field);
      v = a.positional[index];
    } else {
      auto it = std::find_if(a.keyword.begin(), a.keyword.end(), [&](const auto& kv) { return kv.first == field; });
      if (it == a.keyword.end()) throw TemplateError(0, "str.format has no argument named '" + field + "'");
      v = it->second;
    }
    if (conversion) v = Value::string(conversion == 'r' ? repr(v) : to_str(v));
    out += format_with_spec(v, spec);
    i = close;
  }
  return out;
}

Value string_method(const Value& obj, const std::string& name, CallArgs& a) {
  const std::string& s = obj.str();
  std::string m = "str." + name;
  // markupsafe.Markup overrides most str methods to escape their arguments and return Markup;
  // only the ones that return no string behave as str's.
  bool returns_no_string = name == "startswith" || name == "endswith" || name == "find" || name == "rfind" ||
                           name == "index" || name == "rindex" || name == "count" || name.rfind("is", 0) == 0;
  bool keeps_markup = (name == "strip" || name == "lstrip" || name == "rstrip" || name == "upper" || name == "lower" ||
                       name == "title" || name == "capitalize") &&
                      a.positional.empty() && a.keyword.empty();
  if (obj.markup() && keeps_markup) return Value::string(string_method(Value::string(s), name, a).str(), true);
  if (obj.markup() && !returns_no_string)
    throw TemplateError(0, "calling " + m + " with arguments on a safe (Markup) string is not supported");
  auto done = [&](Value v) {
    a.expect_no_more(m);
    return v;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return done(Value::string(strip(s, a.get(0, "chars", Value::none()), name != "rstrip", name != "lstrip")));
  if (name == "split" || name == "rsplit") {
    Value sep = a.get(0, "sep", Value::none());
    Value maxsplit = a.get(1, "maxsplit", Value::integer(-1));
    return done(split(s, sep, maxsplit.as_int(), name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith") {
    Value affix = a.get(0, "prefix");
    if (a.positional.size() > 1) throw TemplateError(0, m + " with start/end positions is not supported");
    return done(Value::boolean(matches_affix(s, affix, name == "startswith", m)));
  }
  if (name == "upper") return done(Value::string(text::upper(s)));
  if (name == "lower") return done(Value::string(text::lower(s)));
  if (name == "title") return done(Value::string(text::python_title(s)));
  if (name == "capitalize") return done(Value::string(text::capitalize(s)));
  if (name == "replace") {
    std::string old = string_arg(a, 0, "old", m), repl = string_arg(a, 1, "new", m);
    Value count = a.get(2, "count", Value::integer(-1));
    return done(Value::string(text::replace(s, old, repl, count.as_int())));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    std::string sub = string_arg(a, 0, "sub", m);
    if (a.positional.size() > 1) throw TemplateError(0, m + " with start/end positions is not supported");
    size_t at = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw TemplateError(0, m + ": substring not found");
      return done(Value::integer(-1));
    }
    return done(Value::integer(int64_t(utf8::length(s.substr(0, at)))));
  }
  if (name == "count") {
    std::string sub = string_arg(a, 0, "sub", m);
    if (sub.empty()) return done(Value::integer(int64_t(utf8::length(s) + 1)));
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return done(Value::integer(n));
  }
  if (name == "format") return Value::string(format(s, a));
  if (name == "join") {
    Value items = a.get(0, "iterable");
    a.expect_no_more(m);
    std::string out;
    bool first = true;
    if (!items.is_list()) throw TemplateError(0, m + " needs a list of strings");
    for (const Value& e : items.items()) {
      if (!e.is_string())
        throw TemplateError(0, m + " needs a list of strings, not one holding '" + e.type_name() + "'");
      if (!first) out += s;
      out += e.str();
      first = false;
    }
    return Value::string(out);
  }
  if (name == "splitlines") {
    if (a.get(0, "keepends", Value::boolean(false)).truthy())
      throw TemplateError(0, "str.splitlines(keepends=True) is not supported");
    a.expect_no_more(m);
    std::vector<Value> lines;
    for (auto& line : splitlines(s)) lines.push_back(Value::string(line));
    return Value::list(std::move(lines));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string affix = string_arg(a, 0, name == "removeprefix" ? "prefix" : "suffix", m);
    a.expect_no_more(m);
    bool prefix = name == "removeprefix";
    if (affix.size() <= s.size() && (prefix ? s.compare(0, affix.size(), affix) == 0
                                            : s.compare(s.size() - affix.size(), affix.size(), affix) == 0))
      return Value::string(prefix ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    std::string sep = string_arg(a, 0, "sep", m);
    a.expect_no_more(m);
    if (sep.empty()) throw TemplateError(0, m + " got an empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    Value empty = Value::string("");
    if (at == std::string::npos)
      return Value::list(name == "partition" ? std::vector<Value>{Value::string(s), empty, empty}
                                             : std::vector<Value>{empty, empty, Value::string(s)},
                         Flavor::tuple);
    return Value::list({Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))},
                       Flavor::tuple);
  }
  if (name == "ljust" || name == "rjust" || name == "center" || name == "zfill") {
    Value width = a.get(0, "width");
    std::string fill = name == "zfill" ? "0" : to_str(a.get(1, "fillchar", Value::string(" ")));
    a.expect_no_more(m);
    if (width.kind() != Value::Kind::integer || utf8::length(fill) != 1)
      throw TemplateError(0, m + " needs an integer width and a one-character fill");
    if (width.as_int() > int64_t(kMaxWidth))
      throw TemplateError(0, m + "'s width is larger than " + std::to_string(kMaxWidth));
    size_t len = utf8::length(s), w = size_t(std::max<int64_t>(0, width.as_int()));
    if (len >= w) return Value::string(s);
    size_t total = w - len;
    auto repeat = [&](size_t n) {
      std::string r;
      for (size_t i = 0; i < n; ++i) r += fill;
      return r;
    };
    if (name == "ljust") return Value::string(s + repeat(total));
    if (name == "rjust") return Value::string(repeat(total) + s);
    if (name == "zfill") {
      size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
      return Value::string(s.substr(0, sign) + repeat(total) + s.substr(sign));
    }
    // Python's center puts the extra fill character on the left when the text's length is odd.
    size_t left = total / 2 + (total & w & 1);
    return Value::string(repeat(left) + s + repeat(total - left));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    a.expect_no_more(m);
    if (s.empty()) return Value::boolean(false);
    for (char32_t c : utf8::decode(s)) {
      bool ok = name == "isspace"   ? utf8::is_space(c)
                : c >= 0x80         ? throw TemplateError(0, m + " on non-ASCII text is not supported")
                : name == "isdigit" ? std::isdigit(int(c)) != 0
                : name == "isalpha" ? std::isalpha(int(c)) != 0
                                    : std::isalnum(int(c)) != 0;
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  throw TemplateError(0, "the string method '" + name + "' is not supported");
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> names = {
      "strip",       "lstrip",  "rstrip",       "split",        "rsplit",    "startswith", "endswith",  "upper",
      "lower",       "title",   "capitalize",   "replace",      "find",      "rfind",      "index",     "rindex",
      "count",       "format",  "join",         "isdigit",      "isspace",   "isalpha",    "isalnum",   "splitlines",
      "center",      "ljust",   "rjust",        "zfill",        "partition", "rpartition", "casefold",  "swapcase",
      "expandtabs",  "encode",  "islower",      "isupper",      "istitle",   "isnumeric",  "isdecimal", "isidentifier",
      "isprintable", "isascii", "removeprefix", "removesuffix", "translate", "maketrans",  "format_map"};
  return names;
}

Value dict_method(const Value& obj, const std::string& name, CallArgs& a) {
  std::string m = "dict." + name;
  DictData& d = obj.dict_data();
  if (name == "get") {
    Value key = a.get(0, "key");
    Value fallback = a.get(1, "default", Value::none());
    a.expect_no_more(m);
    const Value* found = d.find(key);
    return found ? *found : fallback;
  }
  if (name == "items" || name == "keys" || name == "values") {
    a.expect_no_more(m);
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) {
      if (name == "items")
        out.push_back(Value::list({k, v}, Flavor::tuple));
      else
        out.push_back(name == "keys" ? k : v);
    }
    Value view = Value::list(std::move(out), Flavor::view);
    view.list_data().view_name = "dict_" + name;
    return view;
  }
  if (name == "copy") {
    a.expect_no_more(m);
    return Value::dict(d.items);
  }
  throw TemplateError(0, "calling " + m + " is not allowed: the sandbox forbids changing a dict");
}

Value list_method(const Value& obj, const std::string& name, CallArgs& a) {
  std::string m = "list." + name;
  if (name == "index" || name == "count") {
    Value x = a.get(0, "value");
    a.expect_no_more(m);
    int64_t n = 0;
    for (size_t i = 0; i < obj.items().size(); ++i)
      if (equal(obj.items()[i], x)) {
        if (name == "index") return Value::integer(int64_t(i));
        ++n;
      }
    if (name == "index") throw TemplateError(0, m + ": the value is not in the list");
    return Value::integer(n);
  }
  if (name == "copy") {
    a.expect_no_more(m);
    return Value::list(obj.items());
  }
  throw TemplateError(0, "calling " + m + " is not allowed: the sandbox forbids changing a list");
}

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string() && string_methods().count(name))
    return Value::callable("str." + name, [obj, name](CallArgs& a) { return string_method(obj, name, a); });
  static const std::set<std::string> dict_names = {"get",     "items",  "keys",  "values",     "copy",    "pop",
                                                   "popitem", "update", "clear", "setdefault", "fromkeys"};
  if (obj.is_dict() && dict_names.count(name))
    return Value::callable("dict." + name, [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
  static const std::set<std::string> list_names = {"index", "count",  "copy",  "append", "extend", "insert",
                                                   "pop",   "remove", "clear", "sort",   "reverse"};
  if (obj.is_list() && obj.list_data().flavor != Flavor::generator && list_names.count(name))
    return Value::callable("list." + name, [obj, name](CallArgs& a) { return list_method(obj, name, a); });
  return std::nullopt;
}

// slice.indices(length) for one bound.
int64_t clamp_bound(const Value& v, int64_t length, int64_t step, bool is_start) {
  if (v.is_undefined() || v.is_none()) return step > 0 ? (is_start ? 0 : length) : (is_start ? length - 1 : -1);
  if (v.kind() != K::integer && v.kind() != K::boolean) throw TemplateError(0, "slice bounds must be integers");
  int64_t i = v.as_int();
  if (i < 0) i += length;
  if (step > 0) return std::clamp<int64_t>(i, 0, length);
  return std::clamp<int64_t>(i, -1, length - 1);
}

template <typename T>
std::vector<T> slice_of(const std::vector<T>& items, const Value& start, const Value& stop, const Value& step) {
  int64_t st = 1;
  if (!step.is_undefined() && !step.is_none()) {
    if (step.kind() != K::integer) throw TemplateError(0, "a slice step must be an integer");
    st = step.as_int();
    if (st == 0) throw TemplateError(0, "a slice step cannot be zero");
  }
  int64_t n = int64_t(items.size());
  int64_t b = clamp_bound(start, n, st, true), e = clamp_bound(stop, n, st, false);
  std::vector<T> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(items[size_t(i)]);
  return out;
}

}  // namespace

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<char32_t> cps = utf8::decode(s);
  std::vector<char32_t> set;
  bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) {
    if (!chars.is_string()) throw TemplateError(0, "strip needs a string of characters");
    set = utf8::decode(chars.str());
  }
  auto drop = [&](char32_t c) {
    return whitespace ? utf8::is_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && drop(cps[b])) ++b;
  if (right)
    while (e > b && drop(cps[e - 1])) --e;
  return utf8::encode({cps.begin() + long(b), cps.begin() + long(e)});
}

std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> lines;
  std::string line;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t c = utf8::next(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0xb || c == 0xc || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
               c == 0x2029;
    if (!brk) {
      line.append(s, start, i - start);
      continue;
    }
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.push_back(line);
    line.clear();
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto method = bound_method(obj, name)) return *method;
  if (obj.is_dict() || obj.kind() == K::ns) {
    const Value* found = obj.dict_data().find(Value::string(name));
    if (found) return *found;
  }
  return missing(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* found = obj.dict_data().find(key)) return *found;
  } else if ((obj.is_list() && obj.list_data().flavor != Flavor::generator && obj.list_data().flavor != Flavor::view) ||
             obj.is_string()) {
    if (key.kind() == K::integer || key.kind() == K::boolean) {
      int64_t i = key.as_int();
      if (obj.is_string()) {
        std::vector<char32_t> cps = utf8::decode(obj.str());
        int64_t n = int64_t(cps.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::string(utf8::encode({cps[size_t(i)]}));
      } else {
        int64_t n = int64_t(obj.items().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[size_t(i)];
      }
      return Value::undefined(owner_name(obj) + " has no element " + std::to_string(key.as_int()));
    }
  }
  if (key.is_string()) {
    if (obj.kind() == K::ns) return get_attribute(obj, key.str());
    if (auto method = bound_method(obj, key.str())) return *method;
    return Value::undefined(owner_name(obj) + " has no attribute '" + key.str() + "'");
  }
  std::string shown;
  try {
    shown = repr(key);
  } catch (const TemplateError&) {  // an undefined key: the lookup is undefined, not an error
    shown = "of type " + key.type_name();
  }
  return Value::undefined(owner_name(obj) + " has no element " + shown);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.markup()) throw TemplateError(0, "slicing a safe (Markup) string is not supported");
  if (obj.is_string()) {
    return Value::string(utf8::encode(slice_of(utf8::decode(obj.str()), start, stop, step)));
  }
  if (obj.is_list() && (obj.list_data().flavor == Flavor::list || obj.list_data().flavor == Flavor::tuple))
    return Value::list(slice_of(obj.items(), start, stop, step), obj.list_data().flavor);
  if (obj.is_list() && obj.list_data().flavor == Flavor::range)
    throw TemplateError(0, "slicing a range is not supported");
  throw TemplateError(0, "a '" + obj.type_name() + "' cannot be sliced");
}

}  // namespace onecat::chat
