#include "models/chat/interpreter.h"

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "models/chat/error.h"
#include "models/chat/filters.h"
#include "models/chat/jinja_tests.h"
#include "models/chat/methods.h"
#include "models/chat/operators.h"

namespace onecat::chat {
namespace {

// Real templates nest macros a few levels (a JSON schema's depth). jinja2 stops at Python's
// recursion limit, about 200 levels from a plain script and fewer under transformers, so
// stopping earlier errs on the side of an error rather than output jinja2 would not give.
constexpr int kMaxCallDepth = 100;

// Scopes live in the interpreter's arena until the render ends: macros and caller() keep a
// pointer to the scope they were defined in, and a macro stored in that same scope must not
// keep it alive by itself (a reference cycle would leak every render).
struct Scope {
  std::map<std::string, Value> vars;
  Scope* parent = nullptr;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = Scope*;

enum class Flow { normal, loop_break, loop_continue };

class Interpreter {
 public:
  Interpreter(const Value& variables, const RenderOptions& options) : options_(options) {
    root_ = child_of(nullptr);
    install_globals();
    if (!variables.is_dict()) throw TemplateError(0, "the template variables must be a JSON object");
    for (const auto& [k, v] : variables.dict_data().items) root_->vars[k.str()] = v;
  }

  std::string render(const Body& program) {
    std::string out;
    Flow flow = exec(program, root_, out);
    if (flow != Flow::normal) throw TemplateError(0, "'break' or 'continue' outside a for loop");
    return out;
  }

 private:
  ScopePtr child_of(ScopePtr parent) {
    scopes_.push_back(std::make_unique<Scope>());
    scopes_.back()->parent = parent;
    return scopes_.back().get();
  }

  void install_globals() {
    globals_["range"] = Value::callable("range", [](CallArgs& a) { return range(a); });
    globals_["dict"] = Value::callable("dict", [](CallArgs& a) {
      if (!a.positional.empty()) throw TemplateError(0, "dict() with positional arguments is not supported");
      std::vector<std::pair<Value, Value>> items;
      for (auto& [k, v] : a.keyword) items.emplace_back(Value::string(k), v);
      return Value::dict(std::move(items));
    });
    globals_["namespace"] = Value::callable("namespace", [](CallArgs& a) {
      std::vector<std::pair<Value, Value>> attrs;
      for (const Value& p : a.positional) {
        if (!p.is_dict()) throw TemplateError(0, "namespace() takes a dict or keyword arguments");
        for (const auto& kv : p.dict_data().items) attrs.push_back(kv);
      }
      Value ns = Value::ns(std::move(attrs));
      for (auto& [k, v] : a.keyword) ns.dict_data().set(Value::string(k), v);
      return ns;
    });
    globals_["raise_exception"] = Value::callable("raise_exception", [](CallArgs& a) -> Value {
      Value message = a.get(0, "message");
      throw TemplateError(0, "the template refused the input: " + to_str(message), true);
    });
    globals_["strftime_now"] = Value::callable("strftime_now", [this](CallArgs& a) {
      Value format = a.get(0, "format");
      a.expect_no_more("strftime_now");
      if (!format.is_string()) throw TemplateError(0, "strftime_now needs a format string");
      std::time_t t = options_.now ? *options_.now : std::time(nullptr);
      std::tm tm{};
      if (options_.now)
        gmtime_r(&t, &tm);
      else
        localtime_r(&t, &tm);
      char buf[512];
      size_t n = std::strftime(buf, sizeof buf, format.str().c_str(), &tm);
      if (n == 0 && !format.str().empty()) throw TemplateError(0, "strftime_now's format gives no text or too much");
      return Value::string(std::string(buf, n));
    });
  }

  static Value range(CallArgs& a) {
    std::vector<int64_t> bounds;
    for (const Value& v : a.positional) {
      if (v.kind() != Value::Kind::integer && v.kind() != Value::Kind::boolean)
        throw TemplateError(0, "range() needs integer arguments");
      bounds.push_back(v.as_int());
    }
    if (bounds.empty() || bounds.size() > 3 || !a.keyword.empty())
      throw TemplateError(0, "range() takes one to three integer arguments");
    int64_t start = bounds.size() > 1 ? bounds[0] : 0, stop = bounds.size() > 1 ? bounds[1] : bounds[0];
    int64_t step = bounds.size() > 2 ? bounds[2] : 1;
    if (step == 0) throw TemplateError(0, "range() step must not be zero");
    std::vector<Value> items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      items.push_back(Value::integer(i));
      if (items.size() > 1000000) throw TemplateError(0, "range() is too long for a chat template");
      if (__builtin_add_overflow(i, step, &i)) break;  // past INT64's end: past stop too
    }
    Value r = Value::list(std::move(items), Flavor::range);
    r.list_data().range_start = start;
    r.list_data().range_stop = stop;
    r.list_data().range_step = step;
    return r;
  }

  Value lookup(const std::string& name, const ScopePtr& scope) const {
    if (const Value* v = scope->find(name)) return *v;
    auto it = globals_.find(name);
    if (it != globals_.end()) return it->second;
    return Value::undefined("'" + name + "' is undefined");
  }

  // ---- statements ----

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const StmtPtr& s : body) {
      Flow flow;
      try {
        flow = exec_one(*s, scope, out);
        check_text_bytes(out.size());
      } catch (const TemplateError& e) {
        if (e.line() == 0) throw TemplateError(s->line, e.message(), e.raised_by_template());
        throw;
      }
      if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
  }

  Flow exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::text:
        out += s.text;
        return Flow::normal;
      case Stmt::Kind::print:
        out += to_str(eval(*s.expr, scope));
        return Flow::normal;
      case Stmt::Kind::branch:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (!s.conditions[i] || eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        return Flow::normal;
      case Stmt::Kind::loop:
        exec_loop(s, scope, out);
        return Flow::normal;
      case Stmt::Kind::assign:
        assign(s, eval(*s.expr, scope), scope);
        return Flow::normal;
      case Stmt::Kind::assign_block: {
        std::string text;
        exec_nested(s.body, scope, text);
        Value v = Value::string(text);
        if (s.expr) v = eval_filter_chain(*s.expr, v, scope);
        scope->vars[s.targets[0]] = v;
        return Flow::normal;
      }
      case Stmt::Kind::macro:
        scope->vars[s.name] = make_macro(s, scope);
        return Flow::normal;
      case Stmt::Kind::loop_break:
        return Flow::loop_break;
      case Stmt::Kind::loop_continue:
        return Flow::loop_continue;
      case Stmt::Kind::filter_block: {
        std::string text;
        exec_nested(s.body, scope, text);
        out += to_str(eval_filter_chain(*s.expr, Value::string(text), scope));
        return Flow::normal;
      }
      case Stmt::Kind::block:
        return exec(s.body, scope, out);
      case Stmt::Kind::call_block: {
        Value callee = eval(*s.expr->args[0], scope);
        if (callee.kind() != Value::Kind::callable || callee.fn().name.rfind("macro ", 0) != 0)
          throw TemplateError(0, "a call block must call a macro");
        CallArgs a = eval_args(*s.expr, 1, scope);
        a.keyword.emplace_back("caller", make_caller(s, scope));
        out += to_str(callee.fn().call(a));
        return Flow::normal;
      }
      case Stmt::Kind::with_block: {
        ScopePtr inner = child_of(scope);
        std::vector<Value> values;
        for (const auto& e : s.values) values.push_back(eval(*e, scope));  // all in the outer scope
        for (size_t i = 0; i < s.targets.size(); ++i) inner->vars[s.targets[i]] = values[i];
        return exec(s.body, inner, out);
      }
    }
    return Flow::normal;
  }

  // A body rendered into its own text (block set, filter block): break/continue cannot leave it.
  void exec_nested(const Body& body, const ScopePtr& scope, std::string& out) {
    if (exec(body, scope, out) != Flow::normal)
      throw TemplateError(0, "'break' or 'continue' inside a block set or filter block is not supported");
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return;
    }
    std::vector<Value> items = iterate(v);
    if (items.size() != targets.size())
      throw TemplateError(0, "cannot unpack " + std::to_string(items.size()) + " values into " +
                                 std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scope.vars[targets[i]] = items[i];
  }

  void assign(const Stmt& s, const Value& v, const ScopePtr& scope) {
    if (s.attr.empty()) return bind_targets(s.targets, v, *scope);
    Value target = lookup(s.targets[0], scope);
    if (target.kind() != Value::Kind::ns) throw TemplateError(0, "cannot assign attribute on non-namespace object");
    target.dict_data().set(Value::string(s.attr), v);
  }

  void exec_loop(const Stmt& s, const ScopePtr& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*s.expr, scope));
    if (s.condition) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        ScopePtr filter_scope = child_of(scope);
        bind_targets(s.targets, item, *filter_scope);
        if (eval(*s.condition, filter_scope).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_nested_loop_else(s, scope, out);
      return;
    }
    int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      ScopePtr body_scope = child_of(scope);
      bind_targets(s.targets, items[size_t(i)], *body_scope);
      Value loop = Value::ns({
          {Value::string("index"), Value::integer(i + 1)},
          {Value::string("index0"), Value::integer(i)},
          {Value::string("revindex"), Value::integer(n - i)},
          {Value::string("revindex0"), Value::integer(n - i - 1)},
          {Value::string("first"), Value::boolean(i == 0)},
          {Value::string("last"), Value::boolean(i == n - 1)},
          {Value::string("length"), Value::integer(n)},
          {Value::string("depth"), Value::integer(1)},
          {Value::string("depth0"), Value::integer(0)},
      });
      if (i > 0) loop.dict_data().set(Value::string("previtem"), items[size_t(i - 1)]);
      if (i + 1 < n) loop.dict_data().set(Value::string("nextitem"), items[size_t(i + 1)]);
      loop.dict_data().set(Value::string("cycle"), Value::callable("loop.cycle", [i](CallArgs& a) {
                             if (a.positional.empty()) throw TemplateError(0, "loop.cycle() needs at least one value");
                             return a.positional[size_t(i) % a.positional.size()];
                           }));
      body_scope->vars["loop"] = loop;
      Flow flow = exec(s.body, body_scope, out);
      if (flow == Flow::loop_break) break;
    }
  }

  void exec_nested_loop_else(const Stmt& s, const ScopePtr& scope, std::string& out) {
    if (s.else_body.empty()) return;
    if (exec(s.else_body, child_of(scope), out) != Flow::normal)
      throw TemplateError(0, "'break' or 'continue' in a for loop's else block is not supported");
  }

  // The body of a call block, as the function caller() the called macro sees.
  Value make_caller(const Stmt& s, const ScopePtr& scope) {
    const Stmt* block = &s;
    return Value::callable("caller", [this, block, scope](CallArgs& a) {
      ScopePtr call_scope = child_of(scope);
      for (size_t i = 0; i < block->params.size(); ++i) {
        const auto& [name, fallback] = block->params[i];
        Value v = a.get(i, name);
        if (v.is_undefined() && fallback) v = eval(*fallback, call_scope);
        call_scope->vars[name] = v;
      }
      a.expect_no_more("caller()");
      std::string text;
      if (exec(block->body, call_scope, text) != Flow::normal)
        throw TemplateError(0, "'break' or 'continue' outside a for loop in a call block");
      return Value::string(text);
    });
  }

  Value make_macro(const Stmt& s, const ScopePtr& scope) {
    const Stmt* def = &s;
    return Value::callable("macro " + s.name, [this, def, scope](CallArgs& a) {
      if (++depth_ > kMaxCallDepth) throw TemplateError(0, "macros call each other too deeply (recursion?)");
      ScopePtr call_scope = child_of(scope);
      for (size_t i = 0; i < def->params.size(); ++i) {
        const auto& [name, fallback] = def->params[i];
        Value v = a.get(i, name);
        if (v.is_undefined() && fallback) v = eval(*fallback, call_scope);
        if (v.is_undefined()) v = Value::undefined("parameter '" + name + "' was not provided");
        call_scope->vars[name] = v;
      }
      if (def->takes_caller) call_scope->vars["caller"] = a.get(CallArgs::kKeywordOnly, "caller");
      if (def->takes_varargs) {
        std::vector<Value> extra;
        for (size_t i = def->params.size(); i < a.positional.size(); ++i) extra.push_back(a.get(i, ""));
        call_scope->vars["varargs"] = Value::list(std::move(extra), Flavor::tuple);
      }
      if (def->takes_kwargs) {
        Value extra = Value::dict();
        for (const auto& [k, v] : a.keyword) {
          bool is_param = k == "caller" && def->takes_caller;
          for (const auto& p : def->params) is_param = is_param || p.first == k;
          if (!is_param) {
            extra.dict_data().set(Value::string(k), v);
            a.get(CallArgs::kKeywordOnly, k);  // marks it used
          }
        }
        call_scope->vars["kwargs"] = extra;
      }
      a.expect_no_more("the macro '" + def->name + "'");
      std::string text;
      if (exec(def->body, call_scope, text) != Flow::normal)
        throw TemplateError(0, "'break' or 'continue' outside a for loop in a macro");
      --depth_;
      return Value::string(text);
    });
  }

  // ---- expressions ----

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_unwrapped(e, scope);
    } catch (const TemplateError& err) {
      if (err.line() == 0) throw TemplateError(e.line, err.message(), err.raised_by_template());
      throw;
    }
  }

  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
    CallArgs a;
    a.line = e.line;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v, scope));
    return a;
  }

  Value eval_filter_chain(const Expr& e, const Value& input, const ScopePtr& scope) {
    Value inner = e.args[0] ? eval_filter_chain(*e.args[0], input, scope) : input;
    CallArgs a = eval_args(e, 1, scope);
    return apply_filter(e.name, inner, a);
  }

  Value eval_unwrapped(const Expr& e, const ScopePtr& scope) {
    using EK = Expr::Kind;
    switch (e.kind) {
      case EK::literal:
        return e.value;
      case EK::name:
        return lookup(e.name, scope);
      case EK::attr:
        return get_attribute(eval(*e.args[0], scope), e.name);
      case EK::item:
        return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case EK::slice: {
        Value obj = eval(*e.args[0], scope);
        auto bound = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value::none(); };
        return get_slice(obj, bound(1), bound(2), bound(3));
      }
      case EK::call: {
        Value callee = eval(*e.args[0], scope);
        if (callee.is_undefined())
          throw TemplateError(
              0, callee.undefined_reason().empty() ? "called an undefined value" : callee.undefined_reason());
        if (callee.kind() != Value::Kind::callable)
          throw TemplateError(0, "'" + callee.type_name() + "' object is not callable");
        CallArgs a = eval_args(e, 1, scope);
        return callee.fn().call(a);
      }
      case EK::filter: {
        Value input = eval(*e.args[0], scope);
        CallArgs a = eval_args(e, 1, scope);
        return apply_filter(e.name, input, a);
      }
      case EK::test: {
        Value v = eval(*e.args[0], scope);
        CallArgs a = eval_args(e, 1, scope);
        return Value::boolean(apply_test(e.name, v, a) != e.negated);
      }
      case EK::unary: {
        Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value::boolean(!v.truthy());
        return unary_arithmetic(e.name, v);
      }
      case EK::binary: {
        Value left = eval(*e.args[0], scope);
        if (e.name == "and") return left.truthy() ? eval(*e.args[1], scope) : left;
        if (e.name == "or") return left.truthy() ? left : eval(*e.args[1], scope);
        return binary_arithmetic(e.name, left, eval(*e.args[1], scope));
      }
      case EK::compare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          if (!compare(e.ops[i], left, right)) return Value::boolean(false);
          left = right;
        }
        return Value::boolean(true);
      }
      case EK::cond:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("the inline if-expression evaluated to false and has no else");
      case EK::list:
      case EK::tuple: {
        std::vector<Value> items;
        for (const auto& x : e.args) items.push_back(eval(*x, scope));
        return Value::list(std::move(items), e.kind == EK::tuple ? Flavor::tuple : Flavor::list);
      }
      case EK::dict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key = eval(*e.args[i], scope);
          if (key.is_list() || key.is_dict() || key.is_undefined())
            throw TemplateError(0, "a dict key must be a string, number, boolean or none");
          d.dict_data().set(key, eval(*e.args[i + 1], scope));
        }
        return d;
      }
    }
    throw TemplateError(0, "unsupported expression");
  }

  const RenderOptions& options_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  ScopePtr root_;
  std::map<std::string, Value> globals_;
  int depth_ = 0;
};

}  // namespace

std::string run(const Body& program, const Value& variables, const RenderOptions& options) {
  return Interpreter(variables, options).render(program);
}

}  // namespace onecat::chat
