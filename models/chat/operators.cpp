#include "models/chat/operators.h"

#include <cmath>

#include "models/chat/error.h"
#include "models/chat/percent_format.h"
#include "models/chat/text.h"

namespace onecat::chat {
namespace {

using K = Value::Kind;

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  for (const Value* v : {&a, &b})
    if (v->is_undefined())
      throw TemplateError(0, v->undefined_reason().empty() ? "a value is undefined" : v->undefined_reason());
  throw TemplateError(0,
                      "unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python integers do not overflow; ours are 64-bit, so a result that does not fit is an error.
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw TemplateError(0, "an integer result is too large");
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw TemplateError(0, "an integer result is too large");
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw TemplateError(0, "an integer result is too large");
  return r;
}


Value repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    if (times > 0 && !seq.str().empty())
      check_text_bytes(size_t(std::min<int64_t>(times, int64_t(kMaxTextBytes) + 1)) * seq.str().size());
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::string(out, seq.markup());
  }
  if (times > 0 && !seq.items().empty() &&
      size_t(std::min<int64_t>(times, int64_t(kMaxItems) + 1)) * seq.items().size() > kMaxItems) {
    throw TemplateError(0, "a repeated list would hold more than 1,000,000 items, more than a chat template builds");
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_data().flavor);
}

bool is_int_like(const Value& v) { return v.kind() == K::integer || v.kind() == K::boolean; }
bool is_sequence(const Value& v) {
  return v.is_string() ||
         (v.is_list() && (v.list_data().flavor == Flavor::list || v.list_data().flavor == Flavor::tuple));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      throw TemplateError(0, "'in <string>' needs a string on the left, not '" + item.type_name() + "'");
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_dict()) return container.dict_data().find(item) != nullptr;
  if (container.is_undefined()) return false;
  if (container.is_list()) {
    for (const Value& e : iterate(container))
      if (equal(e, item)) return true;
    return false;
  }
  throw TemplateError(0, "argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace

Value unary_arithmetic(const std::string& op, const Value& v) {
  if (!v.is_number()) unsupported("unary " + op, v, v);
  if (op == "+") return v.kind() == K::boolean ? Value::integer(v.as_int()) : v;
  if (v.kind() == K::floating) return Value::floating(-v.as_double());
  return Value::integer(sub(0, v.as_int()));
}

Value binary_arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string left = to_str(a), right = to_str(b);
    check_text_bytes(left.size() + right.size());
    return Value::string(left + right);
  }
  bool numbers = a.is_number() && b.is_number();
  bool floats = numbers && (a.kind() == K::floating || b.kind() == K::floating);
  if (op == "+") {
    if (numbers && floats) return Value::floating(a.as_double() + b.as_double());
    if (numbers) return Value::integer(add(a.as_int(), b.as_int()));
    if (a.is_string() && b.is_string()) {
      check_text_bytes(a.str().size() + b.str().size());
      if (a.markup() || b.markup())  // markupsafe.Markup escapes the plain operand
        return Value::string(
            (a.markup() ? a.str() : text::html_escape(a.str())) + (b.markup() ? b.str() : text::html_escape(b.str())), true);
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list_data().flavor == b.list_data().flavor &&
        (a.list_data().flavor == Flavor::list || a.list_data().flavor == Flavor::tuple)) {
      if (a.items().size() + b.items().size() > kMaxItems) {
        throw TemplateError(0, "a joined list would hold more than 1,000,000 items, more than a chat template builds");
      }
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.list_data().flavor);
    }
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (numbers && floats) return Value::floating(a.as_double() * b.as_double());
    if (numbers) return Value::integer(mul(a.as_int(), b.as_int()));
    if (is_sequence(a) && is_int_like(b)) return repeat(a, b.as_int());
    if (is_int_like(a) && is_sequence(b)) return repeat(b, a.as_int());
    unsupported(op, a, b);
  }
  if (!numbers) {
    if (op == "%" && a.is_string()) {
      if (a.markup()) throw TemplateError(0, "'%' formatting of a safe (Markup) string is not supported");
      return Value::string(percent_format(a.str(), b));
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (floats) return Value::floating(a.as_double() - b.as_double());
    return Value::integer(sub(a.as_int(), b.as_int()));
  }
  if (op == "/") {
    if (b.as_double() == 0) throw TemplateError(0, "division by zero");
    return Value::floating(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) throw TemplateError(0, op == "%" ? "modulo by zero" : "division by zero");
    if (floats) {
      double x = a.as_double(), y = b.as_double();
      double mod = std::fmod(x, y);
      if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
      if (mod == 0) mod = std::copysign(0.0, y);  // Python: a zero remainder takes the divisor's sign
      if (op == "%") return Value::floating(mod);
      return Value::floating(std::floor(x / y));
    }
    int64_t x = a.as_int(), y = b.as_int();
    if (x == INT64_MIN && y == -1) throw TemplateError(0, "an integer result is too large");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value::integer(op == "%" ? m : q);
  }
  if (op == "**") {
    if (!floats && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t i = 0; i < b.as_int(); ++i) result = mul(result, base);
      return Value::integer(result);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  throw TemplateError(0, "unknown operator '" + op + "'");
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equal(a, b);
  if (op == ">=") return less(b, a) || equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  throw TemplateError(0, "unknown comparison '" + op + "'");
}

}  // namespace onecat::chat
