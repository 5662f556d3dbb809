// The parsed template: expressions and statements, each with its source line for errors.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/chat/value.h"

namespace onecat::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    attr,     // args[0].name
    item,     // args[0][args[1]]
    slice,    // args[0][args[1]:args[2]:args[3]], each bound may be null
    call,     // args[0](args[1:], kwargs)
    filter,   // args[0] | name(args[1:], kwargs); args[0] is null in a {% filter %} block's chain
    test,     // args[0] is [not] name(args[1:])
    unary,    // name is "not", "-" or "+"
    binary,   // args[0] name args[1]: arithmetic, ~, and, or
    compare,  // args[0] ops[0] args[1] ops[1] args[2] ... (Python chains)
    cond,     // args[0] if args[1] else args[2] (args[2] may be null)
    list,
    tuple,
    dict,  // args: key, value, key, value, ...
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    text,          // text
    print,         // {{ expr }}
    branch,        // if / elif / else: conditions[i] (null for else) guards bodies[i]
    loop,          // for targets in expr [if condition]: body, else_body
    assign,        // set targets = expr, or set targets[0].attr = expr
    assign_block,  // set targets[0] %} body {% endset (expr: optional filter chain)
    macro,         // macro name(params): body
    loop_break,
    loop_continue,
    filter_block,  // filter chain (expr) applied to the rendered body
    block,         // generation: renders its body
    with_block,    // with targets[i] = values[i], ...: body in its own scope
    call_block,    // call(params) expr: body is the caller() the called macro may render
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<ExprPtr> values;
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  std::string attr;
  Body body, else_body;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;
  // A macro whose body names varargs / kwargs / caller (jinja2 passes them only then).
  bool takes_varargs = false, takes_kwargs = false, takes_caller = false;
};

}  // namespace onecat::chat
