// The values a chat template computes with, modelled on the Python objects jinja2 sees:
// None, bool, int, float, str, list/tuple, dict (insertion-ordered), callables, namespaces
// and jinja2's Undefined. Lists, dicts and namespaces are shared by reference, as in Python.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace onecat::chat {

class Value;
struct CallArgs;

// What a Python sequence object was: printing, len() and re-iteration differ between them.
enum class Flavor {
  list,
  tuple,
  generator,  // filters such as map/select return one: no len(), iterated once, always true
  view,       // dict.items()/keys()/values(): prints as dict_items([...]) and the like
  range,      // range(...): a sequence that prints as range(start, stop[, step])
};

struct ListData {
  std::vector<Value> items;
  Flavor flavor = Flavor::list;
  bool consumed = false;  // a generator yields nothing after its first iteration
  int64_t range_start = 0, range_stop = 0, range_step = 1;
  std::string view_name;  // a view's Python type: dict_items, dict_keys or dict_values
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python's dict
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
};

struct Callable {
  std::string name;  // for error messages: "raise_exception", "str.strip", "macro foo"
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, list, dict, callable, ns };

  Value() = default;  // undefined
  static Value undefined(std::string why = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items, Flavor flavor = Flavor::list);
  static Value dict(std::vector<std::pair<Value, Value>> items = {});
  static Value callable(std::string name, std::function<Value(CallArgs&)> call);
  static Value ns(std::vector<std::pair<Value, Value>> attrs = {});
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::boolean ? int64_t(b_) : i_; }  // bool is an int in Python
  double as_double() const { return kind_ == Kind::floating ? f_ : double(as_int()); }
  const std::string& str() const { return s_; }
  bool markup() const { return markup_; }  // a markupsafe.Markup string (from |safe)
  ListData& list_data() const { return *list_; }
  const std::vector<Value>& items() const { return list_->items; }
  DictData& dict_data() const { return *dict_; }
  const Callable& fn() const { return *fn_; }
  const std::string& undefined_reason() const { return s_; }

  // Python's type name, for error messages: "str", "dict", "NoneType", "generator".
  std::string type_name() const;
  // Python's truth value (a generator is always true).
  bool truthy() const;

 private:
  Kind kind_ = Kind::undefined;
  bool b_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;  // also a namespace's attributes
  std::shared_ptr<Callable> fn_;
};

// Positional and keyword arguments of a call, plus where it is (for errors).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;

  // An index no positional argument has: get(kKeywordOnly, name) finds keyword arguments only.
  static constexpr size_t kKeywordOnly = static_cast<size_t>(-1);

  // The argument at `index` or named `name`, else `fallback`; each is consumed once.
  Value get(size_t index, const std::string& name, Value fallback = Value());
  // Every argument must have been consumed; otherwise a clear error naming `what`.
  void expect_no_more(const std::string& what);

 private:
  std::vector<bool> used_positional_;
  std::vector<bool> used_keyword_;
};

// Python semantics over values.
bool equal(const Value& a, const Value& b);
// a < b as Python orders numbers, strings and lists; throws for other types.
bool less(const Value& a, const Value& b);
// str(value): what {{ value }} prints. Undefined prints as the empty string.
std::string to_str(const Value& v);
// repr(value): how Python writes a value inside a printed list or dict.
std::string repr(const Value& v);
// What `for x in v` visits: items, characters, dict keys; nothing for undefined. A
// generator is consumed. Throws for values Python cannot iterate.
std::vector<Value> iterate(const Value& v);
// repr(float): the shortest text that reads back as the same double.
std::string float_repr(double d);

}  // namespace onecat::chat
