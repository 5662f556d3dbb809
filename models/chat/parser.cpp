#include "models/chat/parser.h"

#include <initializer_list>

#include "models/chat/error.h"
#include "models/chat/filters.h"
#include "models/chat/jinja_tests.h"

namespace onecat::chat {
namespace {

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

bool mentions(const Expr& e, const std::string& name) {
  if (e.kind == Expr::Kind::name && e.name == name) return true;
  for (const auto& a : e.args)
    if (a && mentions(*a, name)) return true;
  for (const auto& kv : e.kwargs)
    if (kv.second && mentions(*kv.second, name)) return true;
  return false;
}

// Whether a body refers to `name` anywhere (jinja2 gives a macro varargs/kwargs only then).
bool mentions(const Body& body, const std::string& name) {
  for (const auto& s : body) {
    for (const Expr* e : {s->expr.get(), s->condition.get()})
      if (e && mentions(*e, name)) return true;
    for (const auto* list : {&s->conditions, &s->values})
      for (const auto& c : *list)
        if (c && mentions(*c, name)) return true;
    for (const auto& p : s->params)
      if (p.second && mentions(*p.second, name)) return true;
    for (const auto& b : s->bodies)
      if (mentions(b, name)) return true;
    if (mentions(s->body, name) || mentions(s->else_body, name)) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().type != TokenType::end) fail("unexpected '" + cur().text + "'");
    return body;
  }

 private:
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  const Token& take() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(cur().line, message); }

  bool is_op(const char* op) const { return cur().type == TokenType::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::name && cur().text == name; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    ++pos_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "' but found " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::name) fail("expected a name but found " + describe(cur()));
    return take().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::block_end) fail("expected the end of the tag ('%}') but found " + describe(cur()));
    ++pos_;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::block_end:
        return "the end of the tag";
      case TokenType::print_end:
        return "the end of the print tag";
      case TokenType::end:
        return "the end of the template";
      case TokenType::data:
        return "template text";
      case TokenType::string:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }

  // Statements until a block tag named in `ends`; leaves pos_ on that tag's name.
  Body parse_body(std::initializer_list<const char*> ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::end) {
        if (ends.size()) fail(std::string("the template ends before its '{% ") + *ends.begin() + " %}'");
        return body;
      }
      if (t.type == TokenType::data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++pos_;
      } else if (t.type == TokenType::print_begin) {
        ++pos_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::print;
        s->line = t.line;
        s->expr = parse_tuple(true, false);
        if (cur().type != TokenType::print_end)
          fail("expected the end of the print tag ('}}') but found " + describe(cur()));
        ++pos_;
        body.push_back(std::move(s));
      } else if (t.type == TokenType::block_begin) {
        const Token& name = peek();
        if (name.type != TokenType::name) {
          ++pos_;
          fail("expected a tag name after '{%'");
        }
        for (const char* end : ends)
          if (name.text == end) {
            ++pos_;
            return body;
          }
        ++pos_;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    Nesting guard(*this);
    int line = cur().line;
    std::string tag = take().text;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "if") {
      Softness soft(soft_, true);
      s->kind = Stmt::Kind::branch;
      s->conditions.push_back(parse_tuple(false, false));
      expect_block_end();
      while (true) {
        s->bodies.push_back(parse_body({"elif", "else", "endif"}));
        std::string end = take().text;
        if (end == "endif") break;
        if (end == "elif") {
          s->conditions.push_back(parse_tuple(false, false));
        } else {
          s->conditions.push_back(nullptr);
          expect_block_end();
          s->bodies.push_back(parse_body({"endif"}));
          ++pos_;
          break;
        }
        expect_block_end();
      }
      expect_block_end();
    } else if (tag == "for") {
      s->kind = Stmt::Kind::loop;
      s->targets = parse_targets();
      if (!accept_name("in")) fail("expected 'in' in the for tag");
      s->expr = parse_tuple(false, false);
      Softness hard(soft_, false);
      if (accept_name("if")) s->condition = parse_expression(true);
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"endfor", "else"});
      if (take().text == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"});
        ++pos_;
      }
      expect_block_end();
    } else if (tag == "set") {
      if (cur().type == TokenType::name && peek().type == TokenType::op && peek().text == ".") {
        s->targets.push_back(take().text);
        ++pos_;
        s->attr = expect_name();
      } else {
        s->targets = parse_targets();
      }
      if (accept_op("=")) {
        s->kind = Stmt::Kind::assign;
        s->expr = parse_tuple(true, false);
        expect_block_end();
      } else {
        if (!s->attr.empty() || s->targets.size() != 1) fail("a block set assigns one plain name");
        Softness hard(soft_, false);
        s->kind = Stmt::Kind::assign_block;
        if (is_op("|")) s->expr = parse_filters(nullptr);
        expect_block_end();
        s->body = parse_body({"endset"});
        ++pos_;
        expect_block_end();
      }
    } else if (tag == "macro") {
      Softness hard(soft_, false);
      s->kind = Stmt::Kind::macro;
      s->name = expect_name();
      expect_op("(");
      while (!accept_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (accept_op(")")) break;
        std::string param = expect_name();
        ExprPtr fallback;
        if (accept_op("=")) fallback = parse_expression(true);
        s->params.emplace_back(param, std::move(fallback));
      }
      expect_block_end();
      s->body = parse_body({"endmacro"});
      ++pos_;
      if (cur().type == TokenType::name) ++pos_;  // {% endmacro name %}
      expect_block_end();
      s->takes_varargs = mentions(s->body, "varargs");
      s->takes_kwargs = mentions(s->body, "kwargs");
      s->takes_caller = mentions(s->body, "caller");
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::loop_break : Stmt::Kind::loop_continue;
      expect_block_end();
    } else if (tag == "filter") {
      Softness hard(soft_, false);
      s->kind = Stmt::Kind::filter_block;
      s->expr = parse_filter_chain(nullptr);
      expect_block_end();
      s->body = parse_body({"endfilter"});
      ++pos_;
      expect_block_end();
    } else if (tag == "call") {
      Softness hard(soft_, false);
      s->kind = Stmt::Kind::call_block;
      if (is_op("(")) {  // {% call(a, b) macro() %}: caller() takes a and b
        ++pos_;
        while (!accept_op(")")) {
          if (!s->params.empty()) expect_op(",");
          std::string param = expect_name();
          ExprPtr fallback;
          if (accept_op("=")) fallback = parse_expression(true);
          s->params.emplace_back(param, std::move(fallback));
        }
      }
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::call) fail("a call block needs a macro call, e.g. {% call m() %}");
      expect_block_end();
      s->body = parse_body({"endcall"});
      ++pos_;
      expect_block_end();
    } else if (tag == "with") {
      Softness hard(soft_, false);
      s->kind = Stmt::Kind::with_block;
      while (cur().type != TokenType::block_end) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->values.push_back(parse_expression(true));
      }
      expect_block_end();
      s->body = parse_body({"endwith"});
      ++pos_;
      expect_block_end();
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::block;
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      ++pos_;
      expect_block_end();
    } else {
      throw TemplateError(line, "the '{% " + tag + " %}' tag is not supported");
    }
    return s;
  }

  // for/set targets: a name, or names separated by commas, optionally in parentheses.
  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  // Comma-separated expressions: one is itself, several (or a trailing comma) a tuple.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_ends(explicit_parens)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("expected an expression but found " + describe(cur()));
    }
    auto e = make(Expr::Kind::tuple, line);
    e->args = std::move(items);
    return e;
  }

  bool tuple_ends(bool explicit_parens) const {
    if (cur().type == TokenType::block_end || cur().type == TokenType::print_end) return true;
    if (explicit_parens && is_op(")")) return true;
    return is_name("recursive");
  }

  ExprPtr parse_expression(bool with_condexpr) {
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = take().line;
      Softness soft(soft_, true);
      auto cond = make(Expr::Kind::cond, line);
      cond->args.push_back(std::move(expr));
      cond->args.push_back(parse_or());
      cond->args.push_back(accept_name("else") ? parse_expression(true) : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    auto e = make(Expr::Kind::binary, line);
    e->name = op;
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = take().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = take().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(Expr::Kind::unary, take().line);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<std::string> ops;
    while (true) {
      if (cur().type == TokenType::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                          cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        ops.push_back(take().text);
      } else if (is_name("in")) {
        ++pos_;
        ops.push_back("in");
      } else if (is_name("not") && peek().type == TokenType::name && peek().text == "in") {
        pos_ += 2;
        ops.push_back("not in");
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = make(Expr::Kind::compare, line);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = take();
      left = binary(op.text, std::move(left), parse_concat(), op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      int line = take().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = take();
      left = binary(op.text, std::move(left), parse_pow(), op.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = take().line;
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nesting guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = take();
      node = make(Expr::Kind::unary, op.line);
      node->name = op.text;
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    ExprPtr e;
    switch (t.type) {
      case TokenType::name: {
        ++pos_;
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          e = make(Expr::Kind::literal, t.line);
          e->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
        } else if (t.text == "none" || t.text == "None") {
          e = make(Expr::Kind::literal, t.line);
          e->value = Value::none();
        } else {
          e = make(Expr::Kind::name, t.line);
          e->name = t.text;
        }
        return e;
      }
      case TokenType::string: {
        std::string text;
        while (cur().type == TokenType::string) text += take().text;  // adjacent literals join
        e = make(Expr::Kind::literal, t.line);
        e->value = Value::string(text);
        return e;
      }
      case TokenType::integer:
        e = make(Expr::Kind::literal, t.line);
        e->value = Value::integer(take().integer);
        return e;
      case TokenType::number:
        e = make(Expr::Kind::literal, t.line);
        e->value = Value::floating(take().number);
        return e;
      case TokenType::op:
        if (t.text == "(") {
          ++pos_;
          e = parse_tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          e = make(Expr::Kind::list, t.line);
          while (!accept_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (accept_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        if (t.text == "{") {
          ++pos_;
          e = make(Expr::Kind::dict, t.line);
          while (!accept_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (accept_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        break;
      default:
        break;
    }
    fail("expected an expression but found " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        int line = take().line;
        if (cur().type == TokenType::integer) {
          auto e = make(Expr::Kind::item, line);
          e->args.push_back(std::move(node));
          auto index = make(Expr::Kind::literal, line);
          index->value = Value::integer(take().integer);
          e->args.push_back(std::move(index));
          node = std::move(e);
        } else {
          auto e = make(Expr::Kind::attr, line);
          e->name = expect_name();
          e->args.push_back(std::move(node));
          node = std::move(e);
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    int line = take().line;
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!is_op(":")) start = parse_expression(true);
    if (accept_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
      if (accept_op(":") && !is_op("]")) step = parse_expression(true);
    }
    if (is_op(",")) fail("subscripts with several indexes are not supported");
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::slice : Expr::Kind::item, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(start));
    if (is_slice) {
      e->args.push_back(std::move(stop));
      e->args.push_back(std::move(step));
    }
    return e;
  }

  // Fills e->args (after any already there) and e->kwargs from "( ... )".
  void parse_arguments(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::name && peek().type == TokenType::op && peek().text == "=") {
        std::string key = take().text;
        ++pos_;
        e.kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::call, cur().line);
    e->args.push_back(std::move(callee));
    parse_arguments(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filters(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (accept_op(".")) name += "." + expect_name();
    return name;
  }

  // | name(args) | name ... ; `node` may be null (the chain of a filter block).
  ExprPtr parse_filters(ExprPtr node) {
    while (accept_op("|")) {
      int line = cur().line;
      auto e = make(Expr::Kind::filter, line);
      e->name = dotted_name();
      check_filter(e->name, line);
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_arguments(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_filter_chain(ExprPtr node) {
    // {% filter name(args) | other %}: the first filter has no leading '|'.
    int line = cur().line;
    auto e = make(Expr::Kind::filter, line);
    e->name = dotted_name();
    check_filter(e->name, line);
    e->args.push_back(std::move(node));
    if (is_op("(")) parse_arguments(*e);
    return parse_filters(std::move(e));
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = take().line;
    auto e = make(Expr::Kind::test, line);
    e->negated = accept_name("not");
    e->name = dotted_name();
    check_test(e->name, line);
    e->args.push_back(std::move(node));
    if (is_op("(")) {
      parse_arguments(*e);
    } else if ((cur().type == TokenType::name || cur().type == TokenType::string || cur().type == TokenType::integer ||
                cur().type == TokenType::number || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("tests cannot be chained with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  // jinja2 reports an unknown filter or test when it compiles the template, except inside an
  // if-statement or an inline if (its "soft frame", which a for, macro or block body ends):
  // there only when it runs.
  void check_filter(const std::string& name, int line) const {
    if (!soft_ && !filter_exists(name)) throw TemplateError(line, "unknown filter '" + name + "'");
  }
  void check_test(const std::string& name, int line) const {
    if (!soft_ && !test_exists(name)) throw TemplateError(line, "unknown test '" + name + "'");
  }
  // Nesting is recursion here and in the interpreter; a bound keeps a hostile template from
  // exhausting the stack (real templates nest a dozen levels).
  static constexpr int kMaxNesting = 256;
  struct Nesting {
    explicit Nesting(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) p_.fail("the template nests expressions or blocks too deeply");
    }
    ~Nesting() { --p_.nesting_; }
    Parser& p_;
  };

  struct Softness {
    Softness(bool& flag, bool value) : flag_(flag), saved_(flag) { flag_ = value; }
    ~Softness() { flag_ = saved_; }
    bool& flag_;
    bool saved_;
  };

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  bool soft_ = false;
  int nesting_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace onecat::chat
