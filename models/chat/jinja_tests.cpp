#include "models/chat/jinja_tests.h"

#include <cmath>
#include <functional>
#include <map>

#include "models/chat/error.h"
#include "models/chat/utf8.h"

namespace onecat::chat {
namespace {

using K = Value::Kind;
using Test = std::function<bool(const Value&, CallArgs&)>;

bool is_int(const Value& v) { return v.kind() == K::integer; }

int64_t integer_arg(CallArgs& args, size_t i, const std::string& name, const std::string& test) {
  Value v = args.get(i, name);
  if (v.kind() != K::integer && v.kind() != K::boolean)
    throw TemplateError(0, "the test '" + test + "' needs an integer argument");
  return v.as_int();
}

bool compare_test(const Value& v, CallArgs& args, const std::string& op) {
  Value other = args.get(0, "other");
  if (op == "eq") return equal(v, other);
  if (op == "ne") return !equal(v, other);
  if (op == "lt") return less(v, other);
  if (op == "le") return !less(other, v);
  if (op == "gt") return less(other, v);
  return !less(v, other);
}

bool has_case(const Value& v, bool upper) {
  // str.islower()/isupper(): some cased character and none of the other case.
  if (!v.is_string()) throw TemplateError(0, "the lower/upper tests need a string");
  bool cased = false;
  for (unsigned char c : v.str()) {
    if (c >= 0x80) throw TemplateError(0, "the lower/upper tests on non-ASCII text are not supported");
    if (std::islower(c)) {
      if (upper) return false;
      cased = true;
    } else if (std::isupper(c)) {
      if (!upper) return false;
      cased = true;
    }
  }
  return cased;
}

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> table = [] {
    std::map<std::string, Test> t;
    t["defined"] = [](const Value& v, CallArgs&) { return !v.is_undefined(); };
    t["undefined"] = [](const Value& v, CallArgs&) { return v.is_undefined(); };
    t["none"] = [](const Value& v, CallArgs&) { return v.is_none(); };
    t["boolean"] = [](const Value& v, CallArgs&) { return v.kind() == K::boolean; };
    t["true"] = [](const Value& v, CallArgs&) { return v.kind() == K::boolean && v.as_bool(); };
    t["false"] = [](const Value& v, CallArgs&) { return v.kind() == K::boolean && !v.as_bool(); };
    t["integer"] = [](const Value& v, CallArgs&) { return is_int(v); };
    t["float"] = [](const Value& v, CallArgs&) { return v.kind() == K::floating; };
    t["number"] = [](const Value& v, CallArgs&) { return v.is_number(); };
    t["string"] = [](const Value& v, CallArgs&) { return v.is_string(); };
    t["mapping"] = [](const Value& v, CallArgs&) { return v.is_dict(); };
    t["iterable"] = [](const Value& v, CallArgs&) {
      return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
    };
    t["sequence"] = [](const Value& v, CallArgs&) {
      // len() and __getitem__: not a generator; jinja2's Undefined has both.
      return v.is_undefined() || v.is_string() || v.is_dict() ||
             (v.is_list() && v.list_data().flavor != Flavor::generator);
    };
    t["callable"] = [](const Value& v, CallArgs&) { return v.kind() == K::callable; };
    t["odd"] = [](const Value& v, CallArgs&) {
      if (!v.is_number() || v.kind() == K::floating) throw TemplateError(0, "the test 'odd' needs an integer");
      return v.as_int() % 2 != 0;
    };
    t["even"] = [](const Value& v, CallArgs&) {
      if (!v.is_number() || v.kind() == K::floating) throw TemplateError(0, "the test 'even' needs an integer");
      return v.as_int() % 2 == 0;
    };
    t["divisibleby"] = [](const Value& v, CallArgs& a) {
      int64_t n = integer_arg(a, 0, "num", "divisibleby");
      if (!v.is_number() || v.kind() == K::floating || n == 0)
        throw TemplateError(0, "the test 'divisibleby' needs integers and a non-zero divisor");
      return v.as_int() % n == 0;
    };
    for (const char* name : {"eq", "equalto", "=="})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "eq"); };
    for (const char* name : {"ne", "!="})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "ne"); };
    for (const char* name : {"lt", "lessthan", "<"})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "lt"); };
    for (const char* name : {"le", "<="})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "le"); };
    for (const char* name : {"gt", "greaterthan", ">"})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "gt"); };
    for (const char* name : {"ge", ">="})
      t[name] = [](const Value& v, CallArgs& a) { return compare_test(v, a, "ge"); };
    t["sameas"] = [](const Value& v, CallArgs& a) {
      Value other = a.get(0, "other");
      // Python `is`: singletons compare by value, shared objects by identity.
      if (v.kind() != other.kind()) return false;
      switch (v.kind()) {
        case K::none:
          return true;
        case K::boolean:
          return v.as_bool() == other.as_bool();
        case K::list:
          return &v.list_data() == &other.list_data();
        case K::dict:
        case K::ns:
          return &v.dict_data() == &other.dict_data();
        default:
          throw TemplateError(0, "the test 'sameas' is only supported for none, booleans, lists and dicts");
      }
    };
    t["in"] = [](const Value& v, CallArgs& a) {
      Value seq = a.get(0, "seq");
      if (seq.is_string()) {
        if (!v.is_string()) throw TemplateError(0, "'in <string>' needs a string on the left");
        return seq.str().find(v.str()) != std::string::npos;
      }
      if (seq.is_dict()) return seq.dict_data().find(v) != nullptr;
      if (seq.is_list() && seq.list_data().flavor != Flavor::generator) {
        for (const Value& e : seq.items())
          if (equal(e, v)) return true;
        return false;
      }
      throw TemplateError(0, "the test 'in' needs a string, list or dict");
    };
    t["lower"] = [](const Value& v, CallArgs&) { return has_case(v, false); };
    t["upper"] = [](const Value& v, CallArgs&) { return has_case(v, true); };
    t["escaped"] = [](const Value& v, CallArgs&) { return v.is_string() && v.markup(); };
    return t;
  }();
  return table;
}

}  // namespace

bool test_exists(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(const std::string& name, const Value& value, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw TemplateError(0, "unknown test '" + name + "'");
  bool result = it->second(value, args);
  args.expect_no_more("the test '" + name + "'");
  return result;
}

}  // namespace onecat::chat
