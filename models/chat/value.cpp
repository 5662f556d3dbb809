#include "models/chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat {

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& [k, v] : items)
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string why) {
  Value v;
  v.s_ = std::move(why);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.i_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::floating;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::string;
  v.s_ = std::move(s);
  v.markup_ = markup;
  return v;
}
Value Value::list(std::vector<Value> items, Flavor flavor) {
  Value v;
  v.kind_ = Kind::list;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->flavor = flavor;
  return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.kind_ = Kind::dict;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->items = std::move(items);
  return v;
}
Value Value::callable(std::string name, std::function<Value(CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::callable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
  return v;
}
Value Value::ns(std::vector<std::pair<Value, Value>> attrs) {
  Value v = dict(std::move(attrs));
  v.kind_ = Kind::ns;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      if (j.get<uint64_t>() > uint64_t(INT64_MAX)) throw TemplateError(0, "an integer in the input is too large");
      return integer(int64_t(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      for (const auto& [k, e] : j.items()) items.emplace_back(string(k), from_json(e));
      return dict(std::move(items));
    }
    default:
      throw TemplateError(0, "the input holds a JSON value of a type templates cannot use");
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return markup_ ? "Markup" : "str";
    case Kind::list:
      return list_->flavor == Flavor::tuple       ? "tuple"
             : list_->flavor == Flavor::generator ? "generator"
             : list_->flavor == Flavor::view      ? "dict view"
             : list_->flavor == Flavor::range     ? "range"
                                                  : "list";
    case Kind::dict:
      return "dict";
    case Kind::callable:
      return "function";
    case Kind::ns:
      return "Namespace";
  }
  return "object";
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return b_;
    case Kind::integer:
      return i_ != 0;
    case Kind::floating:
      return f_ != 0;
    case Kind::string:
      return !s_.empty();
    case Kind::list:
      return list_->flavor == Flavor::generator || !list_->items.empty();
    case Kind::dict:
      return !dict_->items.empty();
    case Kind::callable:
    case Kind::ns:
      return true;
  }
  return false;
}

Value CallArgs::get(size_t index, const std::string& name, Value fallback) {
  used_positional_.resize(positional.size());
  used_keyword_.resize(keyword.size());
  if (index < positional.size()) {
    used_positional_[index] = true;
    return positional[index];
  }
  for (size_t i = 0; i < keyword.size(); ++i)
    if (keyword[i].first == name) {
      used_keyword_[i] = true;
      return keyword[i].second;
    }
  return fallback;
}

void CallArgs::expect_no_more(const std::string& what) {
  used_positional_.resize(positional.size());
  used_keyword_.resize(keyword.size());
  for (size_t i = 0; i < positional.size(); ++i)
    if (!used_positional_[i]) throw TemplateError(0, what + " got too many positional arguments");
  for (size_t i = 0; i < keyword.size(); ++i)
    if (!used_keyword_[i])
      throw TemplateError(0, what + " got an unexpected keyword argument '" + keyword[i].first + "'");
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::floating || b.kind() == K::floating) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::undefined:
    case K::none:
      return true;
    case K::string:
      return a.str() == b.str();
    case K::list: {
      for (Flavor f : {Flavor::tuple, Flavor::range})
        if ((a.list_data().flavor == f) != (b.list_data().flavor == f)) return false;
      if (a.list_data().flavor == Flavor::generator || b.list_data().flavor == Flavor::generator)
        return &a.list_data() == &b.list_data();
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::dict: {
      const auto& x = a.dict_data().items;
      if (x.size() != b.dict_data().items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict_data().find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    case K::callable:
      return &a.fn() == &b.fn();
    case K::ns:
      return &a.dict_data() == &b.dict_data();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::floating || b.kind() == Value::Kind::floating) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list() && a.list_data().flavor == b.list_data().flavor &&
      a.list_data().flavor != Flavor::generator) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined())
    throw TemplateError(0, "an undefined value cannot be compared with '<' or '>'");
  throw TemplateError(0, "'<' is not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return {};
    case Value::Kind::string: {
      std::vector<Value> out;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        utf8::next(s, i);
        out.push_back(Value::string(s.substr(start, i - start)));
      }
      return out;
    }
    case Value::Kind::list: {
      ListData& l = v.list_data();
      if (l.flavor != Flavor::generator) return l.items;
      if (l.consumed) return {};
      l.consumed = true;
      return l.items;
    }
    case Value::Kind::dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict_data().items) keys.push_back(kv.first);
      return keys;
    }
    default:
      throw TemplateError(0, "'" + v.type_name() + "' object is not iterable");
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16, else exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exponent = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int decpt = exponent + 1;  // value = 0.digits * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(size_t(-decpt), '0') + digits;
    } else if (size_t(decpt) >= digits.size()) {
      out = digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = utf8::next(s, i);
    if (c == U'\\' || c == char32_t(quote)) {
      out += '\\';
      out += char(c);
    } else if (c == U'\n') {
      out += "\\n";
    } else if (c == U'\r') {
      out += "\\r";
    } else if (c == U'\t') {
      out += "\\t";
    } else if (!utf8::is_printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      out.append(s, start, i - start);
    }
  }
  return out + quote;
}

}  // namespace

std::string repr(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::string:
      return v.markup() ? "Markup(" + repr_string(v.str()) + ")" : repr_string(v.str());
    case K::list: {
      const ListData& l = v.list_data();
      if (l.flavor == Flavor::generator) throw TemplateError(0, "printing a generator object is not supported");
      if (l.flavor == Flavor::view) {
        std::string items;
        for (size_t i = 0; i < l.items.size(); ++i) items += (i ? ", " : "") + repr(l.items[i]);
        return l.view_name + "([" + items + "])";
      }
      if (l.flavor == Flavor::range)
        return "range(" + std::to_string(l.range_start) + ", " + std::to_string(l.range_stop) +
               (l.range_step == 1 ? "" : ", " + std::to_string(l.range_step)) + ")";
      std::string out = l.flavor == Flavor::tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + repr(l.items[i]);
      if (l.flavor == Flavor::tuple && l.items.size() == 1) out += ",";
      return out + (l.flavor == Flavor::tuple ? ")" : "]");
    }
    case K::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.dict_data().items) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(e);
        first = false;
      }
      return out + "}";
    }
    case K::undefined:
      return "Undefined";  // jinja2's Undefined.__repr__
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::undefined:
      return "";
    case K::none:
      return "None";
    case K::boolean:
      return v.as_bool() ? "True" : "False";
    case K::integer:
      return std::to_string(v.as_int());
    case K::floating:
      return float_repr(v.as_double());
    case K::string:
      return v.str();
    case K::list:
    case K::dict:
      return repr(v);
    case K::callable:
      throw TemplateError(0, "printing the function '" + v.fn().name + "' is not supported");
    case K::ns: {  // jinja2's Namespace.__repr__
      Value attrs = Value::dict(v.dict_data().items);
      return "<Namespace " + repr(attrs) + ">";
    }
  }
  return "";
}

}  // namespace onecat::chat
