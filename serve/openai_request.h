// The OpenAI API's request bodies (/v1/completions, /v1/chat/completions) checked and turned
// into prompts and engine settings. Every mistake is an ApiError: an HTTP status and one
// sentence naming the field, returned to the client as OpenAI's error body.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "models/chat/chat_template.h"
#include "models/model/generation_config.h"
#include "models/tokenizer/tokenizer.h"
#include "runtime/cpu/sampling.h"
#include "serve/tool_calls.h"

namespace onecat::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string param, code;
};

// How deep a request's JSON may nest: its body, and JSON text inside its strings (guided_json's
// schema, a tool call's arguments). Deeper than any request the API defines; it bounds the work
// (and the stack of the recursive walks over it) a hostile body can cause.
inline constexpr int kMaxJsonDepth = 64;

// {"error": {"message", "type", "param", "code"}} for a status.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

// What the handlers know of the served checkpoint.
struct ServedModel {
  std::string name;
  int64_t max_model_len = 0;
  int64_t vocab = 0;  // the model's (ids past the tokenizer's decode to nothing)
  tokenizer::Tokenizer tokenizer;
  std::vector<int32_t> stop_ids;  // generation_config.json's EOS and the tokenizer's
  std::optional<chat::ChatTemplate> chat_template;
  std::optional<chat::ChatTemplate> tool_template;  // for requests with tools (tool_use, if the checkpoint has one)
  nlohmann::ordered_json special_tokens;            // bos_token, eos_token, ... for the template
  int max_choices = 64;                             // prompts × n in one request, at most
  bool reasoning = false;                           // chat replies' <think>…</think> → reasoning_content
  int num_draft_tokens = 0;                         // the server's --num-draft-tokens (0: no speculation)
  model::SamplingDefaults sampling_defaults;        // what a request leaves out (generation_config.json's)
  ToolCallFormat tool_format = ToolCallFormat::kHermes;  // --tool-call-parser
  std::shared_ptr<engine::GrammarCache> grammars;   // structured outputs (null: refused)
  // With reasoning: <think> and </think> as single tokens, so a grammar applies after the reasoning.
  std::optional<engine::ReasoningGate> reasoning_gate;
};

// A checked generation request.
struct Generation {
  std::vector<std::vector<int32_t>> prompts;  // completions: one per prompt; chat: one
  int n = 1;
  int64_t max_tokens = 0;  // per choice (prompt + max_tokens ≤ max_model_len); 0 only with echo
  bool stream = false, include_usage = false;
  bool ignore_eos = false;        // vLLM's extension: EOS does not end the choice
  bool tool_calls = false;        // chat with tools: the output's <tool_call> blocks become tool_calls
  std::vector<std::string> echo;  // completions with echo: each prompt's text, put before its choices' text
  std::vector<std::string> stop;
  cpu::SamplingParams sampling;  // per choice: seed + choice index
  bool logprobs = false;         // chat: logprobs; completions: logprobs is given
  int top_logprobs = 0;
  bool prompt_logprobs = false;  // completions with echo and logprobs: the prompt's too
  int num_draft_tokens = -1;     // extension: draft tokens per step, 0 up to the server's (−1: the server's)
  bool reasoning_opened = false;  // chat: the rendered prompt ends inside <think> (opens_reasoning)
  // Chat with tool_choice "required" or a named function: the reply's start, forced at the end of
  // the prompt (forced_tool_call); the reply parsed (reasoning, tool calls) is it and then the
  // generated text.
  std::string forced_reply;
  // Structured output (response_format json_object / json_schema, guided_json, guided_regex, guided_choice, or
  // a forced tool call's arguments): the grammar every choice's reply follows, after its
  // reasoning when `gated` (engine/grammar.h).
  std::shared_ptr<engine::GrammarAutomaton> grammar;
  bool gated = true;
};

// Bodies are JSON objects (ApiError 400 otherwise). `ordered`: the same body with its objects'
// keys in the order sent (chat::parse_ordered_json): schemas' properties are written in it, and
// tools, tool calls' arguments and chat_template_kwargs reach the chat template in it, as they
// do in transformers; nullptr: body's (sorted) order.
Generation parse_completion(const nlohmann::json& body, const ServedModel& model, uint64_t default_seed,
                            const nlohmann::ordered_json* ordered = nullptr);
Generation parse_chat(const nlohmann::json& body, const ServedModel& model, uint64_t default_seed,
                      const nlohmann::ordered_json* ordered = nullptr);
// /tokenize's body ({"prompt"} or {"messages"}) → ids.
std::vector<int32_t> parse_tokenize(const nlohmann::json& body, const ServedModel& model,
                                    const nlohmann::ordered_json* ordered = nullptr);
// The chat template's rendering of a messages array (add_generation_prompt, kwargs), then the
// reply's start that tool_choice "required" or a named function forces.
std::string render_chat(const nlohmann::json& body, const ServedModel& model,
                        const nlohmann::ordered_json* ordered = nullptr);
// The "model" field, when given, must name the served model (400 otherwise).
void check_model(const nlohmann::json& body, const ServedModel& model);

}  // namespace onecat::serve
