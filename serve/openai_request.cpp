#include "serve/openai_request.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

#include "base/error.h"
#include "models/chat/ordered_json.h"
#include "serve/reasoning.h"
#include "serve/tool_calls.h"

namespace onecat::serve {
namespace {

using nlohmann::json;

constexpr int kMaxStops = 16;
constexpr size_t kMaxStopBytes = 256;

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, message, param); }

// A field, or null when absent or null (clients send null for "not given").
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad(name, std::string(name) + " must be true or false.");
  return v->get<bool>();
}

// "in [lo, hi]", or "at least lo" where hi is only the type's limit; numbers as %g writes them
// (2, not 2.000000).
std::string range_text(double lo, double hi, bool unbounded) {
  auto text = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return std::string(buf);
  };
  return unbounded ? "at least " + text(lo) : "in [" + text(lo) + ", " + text(hi) + "]";
}

int64_t get_int(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw bad(name, std::string(name) + " must be an integer.");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
    throw bad(name, std::string(name) + " must be at most " + std::to_string(hi) + ".");
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    throw bad(name, std::string(name) + " must be " +
                        range_text(double(lo), double(hi), hi == std::numeric_limits<int64_t>::max()) + ", got " +
                        std::to_string(x) + ".");
  }
  return x;
}

float get_number(const json& body, const char* name, float fallback, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad(name, std::string(name) + " must be a number.");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad(name, std::string(name) + " must be " + range_text(lo, hi, false) + ", got " + v->dump() + ".");
  }
  return float(x);
}

// JSON text inside a string field, held to the body's nesting limit (kMaxJsonDepth); nullopt
// when it is not JSON.
std::optional<nlohmann::ordered_json> parse_json_text(const std::string& text, const std::string& param) {
  if (chat::json_nests_deeper(text, kMaxJsonDepth)) {
    throw bad(param, param + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels.");
  }
  try {
    return chat::parse_ordered_json(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // parse_error, or out_of_range for a number past a double (1e400)
  }
}

std::vector<int32_t> ids_of(const json& array, const ServedModel& model, const std::string& param) {
  std::vector<int32_t> ids;
  for (const json& v : array) {
    if (!v.is_number_integer()) throw bad(param, param + " must hold token ids (integers).");
    const bool outside = v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(model.vocab)
                                                : (v.get<int64_t>() < 0 || v.get<int64_t>() >= model.vocab);
    if (outside) {
      throw bad(param, "token id " + v.dump() + " is outside the model's vocabulary (0 to " +
                           std::to_string(model.vocab - 1) + ").");
    }
    const int64_t id = v.get<int64_t>();
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::vector<int32_t> encode(const ServedModel& model, const std::string& text, bool add_special, const char* param) {
  try {
    return model.tokenizer.encode(text, add_special);
  } catch (const InputError& e) {
    throw bad(param, e.what());
  }
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> stops;
  if (!v) return stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStops) throw bad("stop", "stop holds at most " + std::to_string(kMaxStops) + " strings.");
    for (const json& s : *v) {
      if (!s.is_string()) throw bad("stop", "stop must be a string or a list of strings.");
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", "stop must be a string or a list of strings.");
  }
  for (const std::string& s : stops) {
    if (s.empty()) throw bad("stop", "a stop string must not be empty.");
    if (s.size() > kMaxStopBytes) throw bad("stop", "a stop string is at most 256 bytes.");
  }
  return stops;
}

// logit_bias: {"token id": bias in [−100, 100]} (OpenAI's), ids of the model's vocabulary.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body, const ServedModel& model) {
  std::vector<std::pair<int32_t, float>> out;
  const json* lb = field(body, "logit_bias");
  if (!lb) return out;
  if (!lb->is_object()) {
    throw bad("logit_bias", "logit_bias must be an object mapping token ids (as strings) to biases in [-100, 100].");
  }
  for (const auto& [key, value] : lb->items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      throw bad("logit_bias",
                "logit_bias keys must be token ids written as decimal strings, not " + quoted_input(key) + ".");
    }
    const int64_t id = std::stoll(key);
    if (id >= model.vocab) {
      throw bad("logit_bias", "logit_bias names token id " + key + ", outside the model's vocabulary (0 to " +
                                  std::to_string(model.vocab - 1) + ").");
    }
    if (!value.is_number() ||
        !(value.get<double>() >= -cpu::kMaxLogitBias && value.get<double>() <= cpu::kMaxLogitBias)) {
      throw bad("logit_bias",
                "the logit_bias of token " + key + " must be a number in [-100, 100], not " + value.dump() + ".");
    }
    out.emplace_back(int32_t(id), float(value.get<double>()));
  }
  // "7" and "07" are one token: sorted by id, a repeat sits beside its first (a scan per key was
  // quadratic in a whole vocabulary's biases).
  std::vector<std::pair<int32_t, float>> by_id = out;
  std::sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < by_id.size(); ++i) {
    if (by_id[i].first == by_id[i - 1].first) {
      throw bad("logit_bias", "logit_bias names token " + std::to_string(by_id[i].first) + " twice.");
    }
  }
  return out;
}

// A field of the body with its keys in the order sent (`ordered`), or in body's order.
nlohmann::ordered_json ordered_field(const json& body, const nlohmann::ordered_json* ordered,
                                     const std::vector<const char*>& path) {
  if (ordered) {
    const nlohmann::ordered_json* at = ordered;
    for (const char* key : path) at = &(*at)[key];
    return *at;
  }
  const json* at = &body;
  for (const char* key : path) at = &(*at)[key];
  return chat::to_ordered_json(*at);
}

// The automaton of a schema's instances (then `suffix`); a schema it cannot take is a 400 on
// `param`, its message starting with `where`.
std::shared_ptr<engine::GrammarAutomaton> schema_automaton(const ServedModel& model,
                                                           const nlohmann::ordered_json& schema,
                                                           const std::string& param, const std::string& where,
                                                           std::string_view suffix = {}) {
  try {
    return model.grammars->json_schema(schema, suffix);
  } catch (const InputError& e) {
    throw bad(param, where + ": " + e.what());
  }
}

// Structured outputs: response_format (OpenAI's json_object and json_schema), or vLLM's
// guided_json / guided_regex / guided_choice or structured_outputs {json | regex | choice |
// json_object}: one of them.
void parse_structured(const json& body, const nlohmann::ordered_json* ordered, const ServedModel& model,
                      Generation& g) {
  struct Ask {
    std::string kind;  // json_object, json_schema (response_format's), json, regex, choice
    const json* value;
    std::vector<const char*> path;  // of value in the body
    std::string param;
  };
  std::vector<Ask> asks;
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      throw bad("response_format", "response_format must be an object with a string type.");
    }
    const std::string type = (*rf)["type"];
    if (type != "text" && type != "json_object" && type != "json_schema") {
      throw bad("response_format",
                "response_format's type must be text, json_object or json_schema, not " + quoted_input(type) + ".");
    }
    if (type != "text") asks.push_back({type, rf, {"response_format"}, "response_format"});
  }
  for (const char* key : {"guided_json", "guided_regex", "guided_choice"}) {
    if (const json* v = field(body, key)) asks.push_back({std::string(key).substr(7), v, {key}, key});
  }
  if (const json* so = field(body, "structured_outputs")) {
    if (!so->is_object()) throw bad("structured_outputs", "structured_outputs must be an object.");
    for (const char* key : {"json", "regex", "choice"}) {
      if (const json* v = field(*so, key)) {
        asks.push_back({key, v, {"structured_outputs", key}, std::string("structured_outputs.") + key});
      }
    }
    for (const auto& [key, value] : so->items()) {
      if (key == "json" || key == "regex" || key == "choice") continue;
      if (key == "json_object" && value.is_boolean()) {
        if (value.get<bool>()) asks.push_back({"json_object", &value, {}, "structured_outputs.json_object"});
        continue;
      }
      if (key == "disable_fallback" && value.is_boolean()) continue;  // onecat never falls back
      throw bad("structured_outputs", "structured_outputs." + key +
                                          " is not supported (json, regex, choice and "
                                          "json_object are).");
    }
  }
  if (asks.empty()) return;
  const Ask& a = asks.front();
  const std::string& param = a.param;
  if (asks.size() > 1) {
    throw bad(param, "give one of response_format, guided_json, guided_regex, guided_choice and structured_outputs.");
  }
  if (!model.grammars) throw bad(param, "this server has no structured outputs.");
  if (a.kind == "json_object") {
    g.grammar = model.grammars->json_object();
  } else if (a.kind == "json_schema") {
    const json* js = field(*a.value, "json_schema");
    if (!js || !js->is_object()) throw bad(param, "response_format json_schema needs a json_schema object.");
    if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean()) {
      throw bad(param, "response_format.json_schema.strict must be a boolean.");
    }
    g.grammar =
        !field(*js, "schema")
            ? model.grammars->json_object()
            : schema_automaton(model, ordered_field(body, ordered, {"response_format", "json_schema", "schema"}), param,
                               "response_format.json_schema.schema");
  } else if (a.kind == "regex") {
    if (!a.value->is_string()) throw bad(param, param + " must be a string (a regular expression).");
    const std::string pattern = a.value->get<std::string>();
    try {
      g.grammar = model.grammars->regex(pattern);
    } catch (const InputError& e) {
      throw bad(param, param + ": " + e.what());
    }
  } else if (a.kind == "json") {
    nlohmann::ordered_json schema = ordered_field(body, ordered, a.path);
    if (schema.is_string()) {
      std::optional<nlohmann::ordered_json> parsed = parse_json_text(schema.get<std::string>(), param);
      if (!parsed) throw bad(param, param + " must be a JSON schema (an object or its JSON text).");
      schema = std::move(*parsed);
    }
    g.grammar = schema_automaton(model, schema, param, param);
  } else {
    if (!a.value->is_array() || a.value->empty()) throw bad(param, param + " must be a non-empty array of strings.");
    std::vector<std::string> choices;
    for (const json& c : *a.value) {
      if (!c.is_string() || c.get<std::string>().empty()) throw bad(param, param + " must hold non-empty strings.");
      choices.push_back(c.get<std::string>());
    }
    g.grammar = model.grammars->choice(choices);
  }
}

// The settings both endpoints share. max_tokens is checked once the prompts are known.
void parse_common(const json& body, const ServedModel& model, uint64_t default_seed, Generation& g,
                  const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object.");
  check_model(body, model);
  g.n = int(get_int(body, "n", 1, 1, model.max_choices));
  if (const json* b = field(body, "best_of"); b && !(b->is_number_integer() && b->get<int64_t>() == g.n)) {
    throw bad("best_of", "best_of is not supported yet (leave it out or equal to n).");
  }
  g.stream = get_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "stream_options must be an object.");
    if (!g.stream) throw bad("stream_options", "stream_options needs stream: true.");
    g.include_usage = get_bool(*so, "include_usage", false);
  }
  g.stop = parse_stop(body);
  g.ignore_eos = get_bool(body, "ignore_eos", false);
  cpu::SamplingParams& s = g.sampling;
  // A field left out takes the checkpoint's recommendation (generation_config.json), else the API's.
  const model::SamplingDefaults& d = model.sampling_defaults;
  s.temperature = get_number(body, "temperature", d.temperature.value_or(1.0f), 0, 2);
  s.top_p = get_number(body, "top_p", d.top_p.value_or(1.0f), 0, 1);
  if (s.top_p <= 0) throw bad("top_p", "top_p must be in (0, 1].");
  s.top_k = int(get_int(body, "top_k", d.top_k.value_or(0), -1, std::numeric_limits<int32_t>::max()));
  s.min_p = get_number(body, "min_p", d.min_p.value_or(0.0f), 0, 1);
  s.repetition_penalty = get_number(body, "repetition_penalty", d.repetition_penalty.value_or(1.0f), 0, 1e6);
  if (s.repetition_penalty <= 0) throw bad("repetition_penalty", "repetition_penalty must be greater than 0.");
  s.presence_penalty = get_number(body, "presence_penalty", 0.0f, -2, 2);
  s.frequency_penalty = get_number(body, "frequency_penalty", 0.0f, -2, 2);
  const json* seed = field(body, "seed");
  if (seed && !seed->is_number_integer()) throw bad("seed", "seed must be an integer.");
  s.seed = seed ? (seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>())) : default_seed;
  s.logit_bias = parse_logit_bias(body, model);
  if (const std::optional<std::string> why = cpu::invalid_reason(s)) throw bad("", *why);
  if (const json* u = field(body, "user"); u && !u->is_string()) throw bad("user", "user must be a string.");
  // Extension: this request's speculative k, 0 (none) up to the server's --num-draft-tokens.
  if (field(body, "num_draft_tokens") && model.num_draft_tokens == 0) {
    const json& k = body["num_draft_tokens"];
    if (!(k.is_number_integer() && k.get<int64_t>() == 0)) {
      throw bad("num_draft_tokens",
                "num_draft_tokens needs a server started with --num-draft-tokens (this one does not speculate).");
    }
  }
  g.num_draft_tokens = int(get_int(body, "num_draft_tokens", -1, 0, model.num_draft_tokens));
  parse_structured(body, ordered, model, g);
}

// max_tokens (and chat's max_completion_tokens) against the longest prompt and max_model_len.
void set_max_tokens(const json& body, const ServedModel& model, Generation& g, int64_t fallback,
                    const char* alternative) {
  int64_t longest = 0;
  for (const auto& p : g.prompts) {
    if (p.empty()) throw bad("prompt", "the prompt has no tokens.");
    longest = std::max<int64_t>(longest, int64_t(p.size()));
  }
  if (longest >= model.max_model_len) {
    throw bad("prompt", "the prompt is " + std::to_string(longest) + " tokens; this server's max_model_len is " +
                            std::to_string(model.max_model_len) + ", which leaves no room for output.");
  }
  const int64_t room = model.max_model_len - longest;
  const char* name = "max_tokens";
  // 0 with echo: the prompt (and its logprobs) alone, as lm-eval's log-likelihood requests ask.
  const int64_t least = g.echo.empty() ? 1 : 0;
  int64_t max_tokens = get_int(body, "max_tokens", -1, least, std::numeric_limits<int64_t>::max());
  if (alternative && field(body, alternative)) {
    name = alternative;
    max_tokens = get_int(body, alternative, -1, 1, std::numeric_limits<int64_t>::max());
  }
  if (max_tokens > room) {
    throw bad(name, std::string(name) + " is " + std::to_string(max_tokens) + " but the prompt's " +
                        std::to_string(longest) + " tokens leave " + std::to_string(room) + " of max_model_len " +
                        std::to_string(model.max_model_len) + ".");
  }
  g.max_tokens = max_tokens >= 0 ? max_tokens : std::min(fallback, room);
  if (int64_t(g.prompts.size()) * g.n > model.max_choices) {
    throw bad("n", "prompts × n is at most " + std::to_string(model.max_choices) + " in one request.");
  }
}

// A message's content as the template sees it: a string (text parts joined by newlines, as
// vLLM's "string" content format does), or null.
json message_content(const json& content, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) throw bad(param, param + " must be a string, an array of content parts or null.");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      throw bad(param, param + "[" + std::to_string(i) + "] must be an object with a string type.");
    }
    if (part["type"] != "text") {
      throw bad(param, "content parts of type " + quoted_input(part["type"].get<std::string>()) +
                           " are not supported yet (only text).");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      throw bad(param, param + "[" + std::to_string(i) + "].text must be a string.");
    }
    if (i > 0) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's earlier tool calls. Templates (Qwen's, Hermes's) print arguments with
// tojson, so JSON-text arguments are parsed into objects first, as vLLM does.
nlohmann::ordered_json checked_tool_calls(const json& calls, const nlohmann::ordered_json* ordered,
                                          const std::string& param) {
  if (!calls.is_array()) throw bad(param, param + " must be an array.");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      throw bad(param, at + " must be an object with a function.");
    }
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) throw bad(param, at + ".function.name must be a string.");
    nlohmann::ordered_json call{{"type", "function"}};
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    if (f.contains("arguments") && f["arguments"].is_string()) {
      std::optional<nlohmann::ordered_json> parsed =
          parse_json_text(f["arguments"].get<std::string>(), at + ".function.arguments");
      if (!parsed) throw bad(param, at + ".function.arguments must be JSON text.");
      args = std::move(*parsed);
    } else if (f.contains("arguments") && f["arguments"].is_object()) {
      args = ordered ? (*ordered)[i]["function"]["arguments"] : chat::to_ordered_json(f["arguments"]);
    } else if (f.contains("arguments") && !f["arguments"].is_null()) {
      throw bad(param, at + ".function.arguments must be a JSON string.");
    }
    call["function"] = {{"name", f["name"].get<std::string>()}, {"arguments", args}};
    out.push_back(std::move(call));
  }
  return out;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
void check_tools(const json& tools) {
  if (!tools.is_array()) throw bad("tools", "tools must be an array.");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      throw bad("tools", at + " must be {\"type\": \"function\", \"function\": {...}}.");
    }
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string()) throw bad("tools", at + ".function.name must be a string.");
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null()) {
      throw bad("tools", at + ".function.parameters must be an object.");
    }
  }
}

// tool_choice with the request's tools: "auto" (the default) and "none" (the tools left out of
// the prompt, as vLLM does), or forcing a call: "required" (any of the tools) or
// {"type": "function", "function": {"name"}} (that one). A forced call is the reply's start put
// at the end of the prompt (forced_tool_call), not constrained decoding, which does not exist
// yet: the model writes the rest.
struct ToolChoice {
  bool on = false;                      // the tools go to the template and the reply is parsed for calls
  bool forced = false;                  // required or named
  std::optional<std::string> function;  // named
};

ToolChoice tool_choice(const json& body) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  const bool any = tools && !(tools->is_array() && tools->empty());
  const char* const shapes =
      "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
      "{\"name\": NAME}}.";
  ToolChoice t;
  if (choice && choice->is_object()) {
    const json* type = field(*choice, "type");
    const json* function = field(*choice, "function");
    const json* name = function && function->is_object() ? field(*function, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string()) throw bad("tool_choice", shapes);
    t.function = name->get<std::string>();
  } else if (choice && !(choice->is_string() && (*choice == "auto" || *choice == "none" || *choice == "required"))) {
    throw bad("tool_choice", shapes);
  }
  if (any) check_tools(*tools);
  t.forced = t.function || (choice && *choice == "required");
  if (t.forced && !any) {
    const std::string what = t.function ? "names the function " + quoted_input(*t.function) : "is \"required\"";
    throw bad("tool_choice", "tool_choice " + what + " but the request has no tools.");
  }
  if (t.function) {
    const bool known = std::any_of(tools->begin(), tools->end(),
                                   [&](const json& tool) { return tool["function"]["name"] == *t.function; });
    if (!known) {
      throw bad("tool_choice",
                "tool_choice names the function " + quoted_input(*t.function) + ", which is not among tools.");
    }
  }
  t.on = any && !(choice && *choice == "none");
  return t;
}

nlohmann::ordered_json checked_messages(const json& body, const nlohmann::ordered_json* ordered) {
  const json* messages = field(body, "messages");
  if (!messages) throw bad("messages", "messages is required.");
  if (!messages->is_array() || messages->empty()) throw bad("messages", "messages must be a non-empty array.");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad(param, param + " must be an object.");
    if (!m.contains("role") || !m["role"].is_string()) throw bad(param, param + ".role must be a string.");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
      throw bad(param,
                param + ".role must be system, developer, user, assistant or tool, not " + quoted_input(role) + ".");
    }
    nlohmann::ordered_json msg = nlohmann::ordered_json::object();
    msg["role"] = role;
    msg["content"] = message_content(m.contains("content") ? m["content"] : json(), i);
    for (const char* key : {"name", "tool_call_id"}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) throw bad(param, param + "." + key + " must be a string.");
      msg[key] = m[key].get<std::string>();
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (role != "assistant") throw bad(param, param + ": only assistant messages carry tool_calls.");
      msg["tool_calls"] = checked_tool_calls(
          m["tool_calls"], ordered ? &(*ordered)["messages"][i]["tool_calls"] : nullptr, param + ".tool_calls");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// A chat request's prompt: the template's rendering, then the reply's start that tool_choice
// forces (empty unless required or named).
struct ChatPrompt {
  std::string rendered, forced;
  ToolChoice tools;
};

ChatPrompt chat_prompt(const json& body, const ServedModel& model, const nlohmann::ordered_json* ordered) {
  ChatPrompt p;
  p.tools = tool_choice(body);
  const std::optional<chat::ChatTemplate>& chat_template = p.tools.on ? model.tool_template : model.chat_template;
  if (!chat_template) {
    throw bad("messages",
              "the model has no chat template (tokenizer_config.json's chat_template or "
              "chat_template.jinja); use /v1/completions.");
  }
  chat::ChatRequest request;
  request.messages = checked_messages(body, ordered);
  request.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  // tool_choice() checked them.
  if (p.tools.on) request.tools = ordered ? (*ordered)["tools"] : chat::to_ordered_json(body["tools"]);
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw bad("chat_template_kwargs", "chat_template_kwargs must be an object.");
    request.kwargs = ordered ? (*ordered)["chat_template_kwargs"] : chat::to_ordered_json(*kw);
  }
  try {
    p.rendered = chat_template->apply(request, model.special_tokens);
  } catch (const InputError& e) {
    throw bad("messages", std::string("the chat template failed: ") + e.what());
  }
  if (p.tools.forced) {
    if (!request.add_generation_prompt) {
      throw bad("tool_choice",
                "tool_choice \"required\" or a named function needs add_generation_prompt: the "
                "reply's start is forced after it.");
    }
    // A template that opens the reasoning (DeepSeek-R1's, Qwen3-2507-thinking's) has it closed
    // first, empty, as Qwen3's own template writes a reply without thinking: a forced call
    // cannot wait for it.
    if (opens_reasoning(p.rendered)) p.forced = "</think>\n\n";
    p.forced += forced_tool_call(p.tools.function, model.tool_format);
  }
  return p;
}

}  // namespace

nlohmann::json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  std::string type = "invalid_request_error";
  if (status == 401) type = "authentication_error";
  if (status == 404) type = "not_found_error";
  if (status >= 500) type = "server_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(status) : json(code)}}}};
}

void check_model(const json& body, const ServedModel& model) {
  const json* m = field(body, "model");
  if (!m) return;
  if (!m->is_string()) throw bad("model", "model must be a string.");
  if (m->get<std::string>() != model.name) {
    // 404 model_not_found, as OpenAI and vLLM answer (clients raise their not-found error).
    throw ApiError(404,
                   "the model " + quoted_input(m->get<std::string>()) + " does not exist; this server serves " +
                       quoted_input(model.name) + ".",
                   "model", "model_not_found");
  }
}

Generation parse_completion(const json& body, const ServedModel& model, uint64_t default_seed,
                            const nlohmann::ordered_json* ordered) {
  Generation g;
  parse_common(body, model, default_seed, g, ordered);
  g.gated = false;  // a completion's text is not a chat reply
  const json* prompt = field(body, "prompt");
  if (!prompt) throw bad("prompt", "prompt is required.");
  if (prompt->is_string()) {
    g.prompts.push_back(encode(model, prompt->get<std::string>(), true, "prompt"));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    g.prompts.push_back(ids_of(*prompt, model, "prompt"));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const json& p : *prompt) {
      if (p.is_string()) {
        g.prompts.push_back(encode(model, p.get<std::string>(), true, "prompt"));
      } else if (p.is_array()) {
        g.prompts.push_back(ids_of(p, model, "prompt"));
      } else {
        throw bad("prompt", "prompt must be a string, token ids, or a list of either.");
      }
    }
  } else {
    throw bad("prompt", "prompt must be a string, token ids, or a non-empty list of either.");
  }
  if (get_bool(body, "echo", false)) {
    g.prompt_logprobs = field(body, "logprobs") != nullptr;  // the prompt's logprobs come first
    // The prompt as text: a string as given, ids decoded (as vLLM echoes them).
    if (prompt->is_string()) {
      g.echo.push_back(prompt->get<std::string>());
    } else {
      for (size_t i = 0; i < g.prompts.size(); ++i) {
        const json& p = prompt->is_array() && !(*prompt)[0].is_number() ? (*prompt)[i] : json();
        g.echo.push_back(p.is_string() ? p.get<std::string>() : model.tokenizer.decode(g.prompts[i]));
      }
    }
  }
  if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty())) {
    throw bad("suffix", "suffix is not supported.");
  }
  if (const json* lp = field(body, "logprobs")) {
    if (!lp->is_number_integer()) throw bad("logprobs", "logprobs must be an integer (0 to 20) for completions.");
    g.top_logprobs = int(get_int(body, "logprobs", 0, 0, cpu::kMaxLogprobs));
    g.logprobs = true;
  }
  set_max_tokens(body, model, g, 16, nullptr);
  return g;
}

std::string render_chat(const json& body, const ServedModel& model, const nlohmann::ordered_json* ordered) {
  ChatPrompt p = chat_prompt(body, model, ordered);
  return p.rendered + p.forced;
}

Generation parse_chat(const json& body, const ServedModel& model, uint64_t default_seed,
                      const nlohmann::ordered_json* ordered) {
  Generation g;
  parse_common(body, model, default_seed, g, ordered);
  g.logprobs = get_bool(body, "logprobs", false);
  g.top_logprobs = int(get_int(body, "top_logprobs", 0, 0, cpu::kMaxLogprobs));
  if (g.top_logprobs > 0 && !g.logprobs) throw bad("top_logprobs", "top_logprobs needs logprobs: true.");
  const ChatPrompt p = chat_prompt(body, model, ordered);
  g.tool_calls = p.tools.on;
  g.forced_reply = p.forced;
  // A named function's call is over when its block closes: the reply ends there.
  if (p.tools.function && model.tool_format == ToolCallFormat::kHermes) g.stop.emplace_back(kToolCallClose);
  g.reasoning_opened = model.reasoning && opens_reasoning(p.rendered);
  if (p.tools.on && g.grammar) {
    throw bad("response_format",
              "response_format (or guided_json / guided_choice) with tools is not supported: the "
              "grammar would forbid the tool calls.");
  }
  if (p.tools.forced && model.grammars) {
    // The forced call's rest follows the tool's parameters: a named function's arguments and the
    // "}" closing its call, or for "required" one call to any of the tools.
    const nlohmann::ordered_json tools = ordered_field(body, ordered, {"tools"});
    auto parameters = [](const nlohmann::ordered_json& t) {
      const nlohmann::ordered_json& f = t["function"];
      return f.contains("parameters") && f["parameters"].is_object() ? f["parameters"]
                                                                     : nlohmann::ordered_json::object();
    };
    if (p.tools.function) {
      for (const auto& t : tools) {
        if (t["function"]["name"] == *p.tools.function) {
          g.grammar =
              schema_automaton(model, parameters(t), "tools", "the parameters of " + quoted_input(*p.tools.function),
                               forced_call_suffix(model.tool_format, true));
          break;
        }
      }
    } else {
      nlohmann::ordered_json any = {{"anyOf", nlohmann::ordered_json::array()}};
      const char* key = arguments_key(model.tool_format);
      for (const auto& t : tools) {
        any["anyOf"].push_back({{"type", "object"},
                                {"properties", {{"name", {{"const", t["function"]["name"]}}}, {key, parameters(t)}}},
                                {"required", {"name", key}}});
      }
      g.grammar =
          schema_automaton(model, any, "tools", "the tools' parameters", forced_call_suffix(model.tool_format, false));
    }
    g.gated = false;  // the reply starts inside the call
  }
  g.prompts.push_back(encode(model, p.rendered + p.forced, false, "messages"));
  // Chat's max_tokens defaults to the room left, or the checkpoint's max_new_tokens (vLLM's
  // way; completions keep the API's 16).
  set_max_tokens(body, model, g, model.sampling_defaults.max_tokens.value_or(model.max_model_len),
                 "max_completion_tokens");
  return g;
}

std::vector<int32_t> parse_tokenize(const json& body, const ServedModel& model, const nlohmann::ordered_json* ordered) {
  if (!body.is_object()) throw bad("", "the request body must be a JSON object.");
  check_model(body, model);
  const bool add_special = get_bool(body, "add_special_tokens", !field(body, "messages"));
  if (const json* p = field(body, "prompt")) {
    if (!p->is_string()) throw bad("prompt", "prompt must be a string.");
    return encode(model, p->get<std::string>(), add_special, "prompt");
  }
  if (field(body, "messages")) return encode(model, render_chat(body, model, ordered), add_special, "messages");
  throw bad("prompt", "/tokenize needs prompt (a string) or messages.");
}

}  // namespace onecat::serve
