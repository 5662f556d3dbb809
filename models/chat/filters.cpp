#include "models/chat/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>

#include "models/chat/error.h"
#include "models/chat/jinja_tests.h"
#include "models/chat/json_dump.h"
#include "models/chat/methods.h"
#include "models/chat/percent_format.h"
#include "models/chat/text.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

using K = Value::Kind;
using Filter = std::function<Value(const Value&, CallArgs&)>;

// jinja2's attribute getter for selectattr/map/sort/...: "a.b.0" walks items by name or index.
Value lookup_path(const Value& item, const Value& attribute) {
  if (attribute.kind() == K::integer) return get_item(item, attribute);
  if (!attribute.is_string()) throw TemplateError(0, "an attribute name must be a string or an integer");
  Value v = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value string_result(const Value& input, std::string s) { return Value::string(std::move(s), input.markup()); }

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case K::undefined:
      return 0;
    case K::string:
      return int64_t(utf8::length(v.str()));
    case K::dict:
      return int64_t(v.dict_data().items.size());
    case K::list:
      if (v.list_data().flavor == Flavor::generator) throw TemplateError(0, "object of type 'generator' has no len()");
      return int64_t(v.items().size());
    default:
      throw TemplateError(0, "object of type '" + v.type_name() + "' has no len()");
  }
}

bool parse_int(const std::string& text, int64_t& out) {
  std::string s;
  for (char c : text)
    if (c != '_') s += c;
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  s = s.substr(b, e - b + 1);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_float(const std::string& text, double& out) {
  size_t b = text.find_first_not_of(" \t\n\r\f\v"), e = text.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return false;
  std::string s = text.substr(b, e - b + 1);
  if (s.find_first_of("xXpP_") != std::string::npos) return false;  // strtod's hex floats are not Python's
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Sort key for sort/dictsort/min/max/unique: strings lower-cased unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(text::lower(v.str()));
  return v;
}

Value do_tojson(const Value& v, CallArgs& a) {
  bool ensure_ascii = a.get(0, "ensure_ascii", Value::boolean(false)).truthy();
  Value indent = a.get(1, "indent", Value::none());
  Value separators = a.get(2, "separators", Value::none());
  bool sort_keys = a.get(3, "sort_keys", Value::boolean(false)).truthy();
  a.expect_no_more("the filter 'tojson'");
  JsonDumpOptions o;
  o.ensure_ascii = ensure_ascii;
  o.sort_keys = sort_keys;
  if (indent.kind() == K::integer) {
    o.indent = std::string(size_t(std::max<int64_t>(0, indent.as_int())), ' ');
  } else if (indent.is_string()) {
    o.indent = indent.str();
  } else if (!indent.is_none()) {
    throw TemplateError(0, "tojson's indent must be an integer or a string");
  }
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.items().size() != 2 || !separators.items()[0].is_string() ||
        !separators.items()[1].is_string())
      throw TemplateError(0, "tojson's separators must be a pair of strings");
    o.item_separator = separators.items()[0].str();
    o.key_separator = separators.items()[1].str();
  }
  return Value::string(json_dumps(v, o));
}

Value do_indent(const Value& v, CallArgs& a) {
  Value width = a.get(0, "width", Value::integer(4));
  bool first = a.get(1, "first", Value::boolean(false)).truthy();
  bool blank = a.get(2, "blank", Value::boolean(false)).truthy();
  a.expect_no_more("the filter 'indent'");
  if (!width.is_string() && width.as_int() > int64_t(kMaxWidth)) {
    throw TemplateError(0, "indent's width is larger than " + std::to_string(kMaxWidth));
  }
  std::string pad = width.is_string() ? width.str() : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
  std::vector<std::string> lines = splitlines(to_str(v) + "\n");
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : pad + lines[i]);
  }
  if (first) out = pad + out;
  return string_result(v, out);
}

// select/reject/selectattr/rejectattr: a generator of the items that pass (or fail) a test.
Value do_select(const Value& seq, CallArgs& a, bool by_attribute, bool keep) {
  Value attribute = by_attribute ? a.get(0, "attribute") : Value();
  size_t first_test_arg = by_attribute ? 1 : 0;
  std::string test;
  std::vector<Value> test_args;
  for (size_t i = first_test_arg; i < a.positional.size(); ++i) {
    Value p = a.get(i, "");
    if (i == first_test_arg) {
      if (!p.is_string()) throw TemplateError(0, "a test name must be a string");
      test = p.str();
    } else {
      test_args.push_back(p);
    }
  }
  a.expect_no_more("the filter");
  if (!test.empty() && !test_exists(test)) throw TemplateError(0, "unknown test '" + test + "'");
  std::vector<Value> out;
  if (!seq.truthy()) return Value::list({}, Flavor::generator);  // jinja2 skips a falsy input (none too)
  for (const Value& item : iterate(seq)) {
    Value subject = by_attribute ? lookup_path(item, attribute) : item;
    bool pass;
    if (test.empty()) {
      pass = subject.truthy();
    } else {
      CallArgs targs;
      targs.positional = test_args;
      pass = apply_test(test, subject, targs);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out), Flavor::generator);
}

Value do_map(const Value& seq, CallArgs& a) {
  std::vector<Value> out;
  if (!seq.truthy()) return Value::list({}, Flavor::generator);  // jinja2 skips a falsy input (none too)
  if (a.positional.empty()) {
    Value attribute = a.get(CallArgs::kKeywordOnly, "attribute");
    Value fallback = a.get(CallArgs::kKeywordOnly, "default");
    a.expect_no_more("the filter 'map'");
    if (attribute.is_undefined()) throw TemplateError(0, "the filter 'map' needs a filter name or attribute=");
    for (const Value& item : iterate(seq)) {
      Value v = lookup_path(item, attribute);
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
  } else {
    Value name = a.positional[0];
    if (!name.is_string() || !filter_exists(name.str()))
      throw TemplateError(0, "the filter 'map' got an unknown filter name");
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const Value& item : iterate(seq)) {
      CallArgs copy = rest;
      out.push_back(apply_filter(name.str(), item, copy));
    }
  }
  return Value::list(std::move(out), Flavor::generator);
}

std::vector<Value> sorted(std::vector<Value> items, bool case_sensitive, const Value& attribute, bool reverse) {
  auto key = [&](const Value& v) {
    return sort_key(attribute.is_undefined() ? v : lookup_path(v, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return items;
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> table = [] {
    std::map<std::string, Filter> f;
    f["tojson"] = do_tojson;
    f["length"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'length'");
      return Value::integer(length_of(v));
    };
    f["count"] = f["length"];
    f["trim"] = [](const Value& v, CallArgs& a) {
      Value chars = a.get(0, "chars", Value::none());
      a.expect_no_more("the filter 'trim'");
      return string_result(v, strip(to_str(v), chars, true, true));
    };
    f["string"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'string'");
      return v.is_string() ? v : Value::string(to_str(v));
    };
    f["safe"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'safe'");
      return Value::string(to_str(v), true);
    };
    f["escape"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'escape'");
      if (v.is_string() && v.markup()) return v;
      return Value::string(text::html_escape(to_str(v)), true);
    };
    f["e"] = f["escape"];
    f["upper"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'upper'");
      return string_result(v, text::upper(to_str(v)));
    };
    f["lower"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'lower'");
      return string_result(v, text::lower(to_str(v)));
    };
    f["capitalize"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'capitalize'");
      return string_result(v, text::capitalize(to_str(v)));
    };
    f["title"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'title'");
      return string_result(v, text::jinja_title(to_str(v)));
    };
    f["replace"] = [](const Value& v, CallArgs& a) {
      Value old = a.get(0, "old"), repl = a.get(1, "new"), count = a.get(2, "count", Value::none());
      a.expect_no_more("the filter 'replace'");
      if (v.markup()) throw TemplateError(0, "replace on a safe (Markup) string is not supported");
      return Value::string(text::replace(to_str(v), to_str(old), to_str(repl), count.is_none() ? -1 : count.as_int()));
    };
    f["default"] = [](const Value& v, CallArgs& a) {
      Value fallback = a.get(0, "default_value", Value::string(""));
      bool boolean = a.get(1, "boolean", Value::boolean(false)).truthy();
      a.expect_no_more("the filter 'default'");
      return v.is_undefined() || (boolean && !v.truthy()) ? fallback : v;
    };
    f["d"] = f["default"];
    f["join"] = [](const Value& v, CallArgs& a) {
      Value sep = a.get(0, "d", Value::string(""));
      Value attribute = a.get(1, "attribute", Value());
      a.expect_no_more("the filter 'join'");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(v)) {
        if (!first) out += to_str(sep);
        first = false;
        out += to_str(attribute.is_undefined() ? item : lookup_path(item, attribute));
      }
      return Value::string(out);
    };
    f["first"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'first'");
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
    };
    f["last"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'last'");
      if (v.is_list() && v.list_data().flavor == Flavor::generator)
        throw TemplateError(0, "the filter 'last' cannot reverse a generator");
      std::vector<Value> items = iterate(v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    f["list"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'list'");
      return Value::list(iterate(v));
    };
    f["items"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'items'");
      if (v.is_undefined()) return Value::list({}, Flavor::generator);
      if (!v.is_dict()) throw TemplateError(0, "the filter 'items' needs a mapping");
      std::vector<Value> out;
      for (const auto& [k, e] : v.dict_data().items) out.push_back(Value::list({k, e}, Flavor::tuple));
      return Value::list(std::move(out), Flavor::generator);  // jinja2 3.1 yields the pairs
    };
    f["dictsort"] = [](const Value& v, CallArgs& a) {
      bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
      Value by = a.get(1, "by", Value::string("key"));
      bool reverse = a.get(2, "reverse", Value::boolean(false)).truthy();
      a.expect_no_more("the filter 'dictsort'");
      if (!v.is_dict()) throw TemplateError(0, "the filter 'dictsort' needs a mapping");
      size_t pos = by.is_string() && by.str() == "value" ? 1 : 0;
      if (!(by.is_string() && (by.str() == "key" || by.str() == "value")))
        throw TemplateError(0, "dictsort's 'by' must be 'key' or 'value'");
      std::vector<Value> pairs;
      for (const auto& [k, e] : v.dict_data().items) pairs.push_back(Value::list({k, e}, Flavor::tuple));
      std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        Value kx = sort_key(x.items()[pos], case_sensitive), ky = sort_key(y.items()[pos], case_sensitive);
        return reverse ? less(ky, kx) : less(kx, ky);
      });
      return Value::list(std::move(pairs));
    };
    f["sort"] = [](const Value& v, CallArgs& a) {
      bool reverse = a.get(0, "reverse", Value::boolean(false)).truthy();
      bool case_sensitive = a.get(1, "case_sensitive", Value::boolean(false)).truthy();
      Value attribute = a.get(2, "attribute", Value());
      a.expect_no_more("the filter 'sort'");
      return Value::list(sorted(iterate(v), case_sensitive, attribute, reverse));
    };
    f["unique"] = [](const Value& v, CallArgs& a) {
      bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
      Value attribute = a.get(1, "attribute", Value());
      a.expect_no_more("the filter 'unique'");
      std::vector<Value> out, seen;
      for (const Value& item : iterate(v)) {
        Value key = sort_key(attribute.is_undefined() ? item : lookup_path(item, attribute), case_sensitive);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) continue;
        seen.push_back(key);
        out.push_back(item);
      }
      return Value::list(std::move(out), Flavor::generator);
    };
    for (const char* name : {"min", "max"}) {
      bool is_max = name[1] == 'a';
      f[name] = [is_max](const Value& v, CallArgs& a) {
        bool case_sensitive = a.get(0, "case_sensitive", Value::boolean(false)).truthy();
        Value attribute = a.get(1, "attribute", Value());
        a.expect_no_more(is_max ? "the filter 'max'" : "the filter 'min'");
        std::vector<Value> items = iterate(v);
        if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
        auto key = [&](const Value& x) {
          return sort_key(attribute.is_undefined() ? x : lookup_path(x, attribute), case_sensitive);
        };
        Value best = items[0];
        for (size_t i = 1; i < items.size(); ++i)
          if (is_max ? less(key(best), key(items[i])) : less(key(items[i]), key(best))) best = items[i];
        return best;
      };
    }
    f["reverse"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'reverse'");
      if (v.is_string()) {
        std::vector<char32_t> cps = utf8::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return string_result(v, utf8::encode(cps));
      }
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items), Flavor::generator);
    };
    f["select"] = [](const Value& v, CallArgs& a) { return do_select(v, a, false, true); };
    f["reject"] = [](const Value& v, CallArgs& a) { return do_select(v, a, false, false); };
    f["selectattr"] = [](const Value& v, CallArgs& a) { return do_select(v, a, true, true); };
    f["rejectattr"] = [](const Value& v, CallArgs& a) { return do_select(v, a, true, false); };
    f["map"] = do_map;
    f["int"] = [](const Value& v, CallArgs& a) {
      Value fallback = a.get(0, "default", Value::integer(0));
      Value base = a.get(1, "base", Value::integer(10));
      a.expect_no_more("the filter 'int'");
      if (base.as_int() != 10) throw TemplateError(0, "the filter 'int' supports base 10 only");
      if (v.kind() == K::integer || v.kind() == K::boolean) return Value::integer(v.as_int());
      // jinja2 catches int(nan)'s ValueError, and OverflowError (inf) only for text input.
      auto truncate = [&](double d, bool from_text) {
        if (std::isnan(d) || (from_text && std::isinf(d))) return fallback;
        if (std::fabs(d) >= 9.2e18) throw TemplateError(0, "the filter 'int' got a number too large");
        return Value::integer(int64_t(std::trunc(d)));
      };
      if (v.kind() == K::floating) return truncate(v.as_double(), false);
      if (v.is_string()) {
        int64_t i;
        double d;
        if (parse_int(v.str(), i)) return Value::integer(i);
        if (parse_float(v.str(), d)) return truncate(d, true);
      }
      return fallback;
    };
    f["float"] = [](const Value& v, CallArgs& a) {
      Value fallback = a.get(0, "default", Value::floating(0.0));
      a.expect_no_more("the filter 'float'");
      if (v.is_number()) return Value::floating(v.as_double());
      double d;
      if (v.is_string() && parse_float(v.str(), d)) return Value::floating(d);
      return fallback;
    };
    f["abs"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'abs'");
      if (v.kind() == K::floating) return Value::floating(std::fabs(v.as_double()));
      if (v.is_number()) {
        if (v.as_int() == INT64_MIN) throw TemplateError(0, "an integer result is too large");
        return Value::integer(std::llabs(v.as_int()));
      }
      throw TemplateError(0, "the filter 'abs' needs a number");
    };
    f["round"] = [](const Value& v, CallArgs& a) {
      Value precision = a.get(0, "precision", Value::integer(0));
      Value method = a.get(1, "method", Value::string("common"));
      a.expect_no_more("the filter 'round'");
      if (!v.is_number()) throw TemplateError(0, "the filter 'round' needs a number");
      if (precision.as_int() != 0 || to_str(method) != "common")
        throw TemplateError(0, "the filter 'round' supports only precision 0 and the method 'common'");
      return Value::floating(std::nearbyint(v.as_double()));  // Python rounds halves to even
    };
    f["sum"] = [](const Value& v, CallArgs& a) {
      Value attribute = a.get(0, "attribute", Value());
      Value total = a.get(1, "start", Value::integer(0));
      a.expect_no_more("the filter 'sum'");
      for (const Value& item : iterate(v)) {
        Value x = attribute.is_undefined() ? item : lookup_path(item, attribute);
        if (!x.is_number() || !total.is_number()) throw TemplateError(0, "the filter 'sum' needs numbers");
        if (x.kind() == K::floating || total.kind() == K::floating)
          total = Value::floating(total.as_double() + x.as_double());
        else if (int64_t sum; !__builtin_add_overflow(total.as_int(), x.as_int(), &sum))
          total = Value::integer(sum);
        else
          throw TemplateError(0, "an integer result is too large");
      }
      return total;
    };
    f["indent"] = do_indent;
    f["center"] = [](const Value& v, CallArgs& a) {
      Value width = a.get(0, "width", Value::integer(80));
      a.expect_no_more("the filter 'center'");
      CallArgs method_args;
      method_args.positional = {width};
      return get_attribute(Value::string(to_str(v)), "center").fn().call(method_args);
    };
    f["truncate"] = [](const Value& v, CallArgs& a) {
      int64_t length = a.get(0, "length", Value::integer(255)).as_int();
      bool killwords = a.get(1, "killwords", Value::boolean(false)).truthy();
      std::string end = to_str(a.get(2, "end", Value::string("...")));
      int64_t leeway = a.get(3, "leeway", Value::integer(5)).as_int();
      a.expect_no_more("the filter 'truncate'");
      std::vector<char32_t> cps = utf8::decode(to_str(v));
      int64_t end_len = int64_t(utf8::length(end));
      if (length < end_len || leeway < 0)
        throw TemplateError(0, "the filter 'truncate' got a length shorter than its end");
      if (int64_t(cps.size()) <= length + leeway) return Value::string(utf8::encode(cps));
      std::string head = utf8::encode({cps.begin(), cps.begin() + (length - end_len)});
      if (!killwords) {
        size_t space = head.rfind(' ');
        if (space != std::string::npos) head.resize(space);
      }
      return Value::string(head + end);
    };
    f["batch"] = [](const Value& v, CallArgs& a) {
      Value count = a.get(0, "linecount");
      Value fill = a.get(1, "fill_with", Value::none());
      a.expect_no_more("the filter 'batch'");
      if (count.kind() != K::integer || count.as_int() <= 0)
        throw TemplateError(0, "the filter 'batch' needs a positive integer");
      std::vector<Value> rows, row;
      for (const Value& item : iterate(v)) {
        row.push_back(item);
        if (int64_t(row.size()) == count.as_int()) {
          rows.push_back(Value::list(std::move(row)));
          row.clear();
        }
      }
      if (!row.empty()) {
        if (!fill.is_none())
          while (int64_t(row.size()) < count.as_int()) row.push_back(fill);
        rows.push_back(Value::list(std::move(row)));
      }
      return Value::list(std::move(rows), Flavor::generator);
    };
    f["attr"] = [](const Value& v, CallArgs& a) {
      Value name = a.get(0, "name");
      a.expect_no_more("the filter 'attr'");
      // getattr only: a method, or a namespace's attribute; never a dict's item.
      if (v.is_dict() && !v.dict_data().find(Value::string(to_str(name)))) return get_attribute(v, to_str(name));
      if (v.is_dict()) return Value::undefined("'dict object' has no attribute '" + to_str(name) + "'");
      return get_attribute(v, to_str(name));
    };
    f["format"] = [](const Value& v, CallArgs& a) {
      if (!a.positional.empty() && !a.keyword.empty())
        throw TemplateError(0, "the filter 'format' takes positional or keyword arguments, not both");
      if (v.markup()) throw TemplateError(0, "the filter 'format' on a safe (Markup) string is not supported");
      std::vector<std::pair<Value, Value>> named;
      for (auto& [k, x] : a.keyword) named.emplace_back(Value::string(k), x);
      Value args = a.keyword.empty() ? Value::list(a.positional, Flavor::tuple) : Value::dict(std::move(named));
      return Value::string(percent_format(to_str(v), args));
    };
    f["wordcount"] = [](const Value& v, CallArgs& a) {
      a.expect_no_more("the filter 'wordcount'");
      int64_t words = 0;
      bool in_word = false;
      std::string s = to_str(v);
      for (size_t i = 0; i < s.size();) {
        char32_t c = utf8::next(s, i);
        bool word = c == '_' || (c < 0x80 ? std::isalnum(int(c)) != 0 : !utf8::is_space(c));
        if (word && !in_word) ++words;
        in_word = word;
      }
      return Value::integer(words);
    };
    return f;
  }();
  return table;
}

}  // namespace

bool filter_exists(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw TemplateError(0, "unknown filter '" + name + "'");
  return it->second(input, args);
}

}  // namespace onecat::chat
