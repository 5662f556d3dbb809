#include "serve/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "base/bytes.h"
#include "base/error.h"
#include "engine/draft_model.h"
#include "engine/text_stream.h"
#include "models/chat/ordered_json.h"
#include "models/model/generation_config.h"
#include "serve/connection.h"
#include "serve/engine_loop.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/reasoning.h"
#include "serve/tool_calls.h"

#ifndef ONECAT_VERSION
#define ONECAT_VERSION "unknown"
#endif

namespace onecat::serve {
namespace {

using nlohmann::json;

// Generated text is valid UTF-8 (DecodeStream), but a single byte token's text for logprobs
// may not be: replaced, never thrown on.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "",
                const std::string& code = "") {
  send_json(res, status, error_body(status, message, param, code));
}

// Connections the kernel queues before the server accepts them (SOMAXCONN caps it).
constexpr int kListenBacklog = 1024;

// How often a non-streamed request looks whether its client is still there: a client that left
// costs the engine at most this long.
constexpr std::chrono::milliseconds kClientCheck{50};

// The status /metrics counts for a request whose client left before its response (nginx's
// "client closed request"; nobody reads it).
constexpr int kClientClosedRequest = 499;

json parse_body(const httplib::Request& req) {
  if (chat::json_nests_deeper(req.body, kMaxJsonDepth)) {
    throw ApiError(400, "the request body nests deeper than 64 levels.");
  }
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double's range (1e400).
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
}

struct TokenLogprob {
  int32_t id;
  float logprob;
  std::vector<std::pair<int, float>> top;
  bool none = false;  // a prompt's first token: null logprob and top logprobs
};

// One choice of a request as it is generated.
struct Choice {
  // reasoning_opened: the prompt ends inside <think> (Generation::reasoning_opened); forced: the
  // reply's start the prompt ends with (Generation::forced_reply).
  Choice(const tokenizer::Tokenizer& tok, const std::vector<std::string>& stop, bool reasoning_opened,
         std::string forced, ToolCallFormat tool_format)
      : text(tok, stop), reasoning(reasoning_opened), tools(tool_format), unparsed(std::move(forced)) {}
  engine::TextStream text;
  int64_t tokens = 0;
  std::string finish_reason;
  bool done = false;
  std::vector<TokenLogprob> logprobs;  // with echo and logprobs, the prompt's first
  size_t logprobs_sent = 0;            // streaming: entries already in a chunk
  int64_t text_offset = 0;             // streaming: where the next entry's text begins
  bool echo_sent = false;              // streaming echo with logprobs: the prompt's event is out
  ReasoningSplitter reasoning;         // streaming chat with --reasoning-parser
  ToolCallStream tools;                // streaming chat with tools
  std::string unparsed;                // streaming chat: the forced start, until the first chunk parses it
  int tool_calls_sent = 0;             // streaming: the next call's index in this choice
};

// A generation request in flight: its choices on the engine thread and their state here.
struct Job {
  const ServedModel& model;
  EngineLoop& loop;
  Generation gen;
  bool chat;
  std::string id;
  int64_t created;
  std::shared_ptr<Channel> channel;
  std::vector<Choice> choices;
  std::vector<Channel::Output> first;  // the outputs read while checking the engine took it

  using Clock = std::chrono::steady_clock;
  Metrics& metrics;
  Clock::time_point arrival = Clock::now(), first_token{}, last_token{};

  Job(const ServedModel& m, EngineLoop& l, Metrics& metrics_, Generation g, bool is_chat, std::string request_id)
      : model(m),
        loop(l),
        gen(std::move(g)),
        chat(is_chat),
        id(std::move(request_id)),
        created(std::time(nullptr)),
        metrics(metrics_) {
    std::vector<engine::Request> requests;
    for (const auto& prompt : gen.prompts) {
      for (int j = 0; j < gen.n; ++j) {
        engine::Request r;
        r.prompt = prompt;
        r.sampling = gen.sampling;
        r.sampling.seed = gen.sampling.seed + uint64_t(j);
        r.sampling.logprobs = gen.logprobs ? std::max(1, gen.top_logprobs) : 0;
        r.max_tokens = gen.max_tokens;
        // max_tokens 0 (echo) needs no logprobs, but the engine ends such a request only with them.
        r.prompt_logprobs = gen.prompt_logprobs ? gen.top_logprobs : gen.max_tokens == 0 ? 0 : -1;
        if (!gen.ignore_eos) r.stop_ids = model.stop_ids;
        r.num_draft_tokens = gen.num_draft_tokens;
        if (gen.grammar) {
          std::optional<engine::ReasoningGate> gate;
          if (gen.gated && model.reasoning_gate) {
            gate = model.reasoning_gate;
            gate->opened = gen.reasoning_opened;
          }
          r.constraint = std::make_shared<engine::GrammarConstraint>(gen.grammar, r.stop_ids, gate);
        }
        requests.push_back(std::move(r));
        choices.emplace_back(model.tokenizer, gen.stop, gen.reasoning_opened, gen.forced_reply, model.tool_format);
      }
    }
    channel = loop.submit(std::move(requests));
    // The engine's refusal (InputError) arrives with the first outputs: a 400 before any byte
    // of a stream is sent.
    try {
      first = channel->next();
    } catch (const InputError& e) {
      throw ApiError(400, e.what());
    }
  }

  // Outputs to handle: the first batch, then the channel's; empty once every choice is done.
  std::vector<Channel::Output> next() {
    if (!first.empty()) return std::exchange(first, {});
    return channel->next();
  }
  // The same, waiting no later than `deadline` (nullopt: nothing new by then).
  std::optional<std::vector<Channel::Output>> next_until(Clock::time_point deadline) {
    if (!first.empty()) return std::exchange(first, {});
    return channel->next_until(deadline);
  }

  // The request's timings and usage, once it has ended.
  void record() const {
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    int64_t longest = 0;
    for (const Choice& c : choices) longest = std::max(longest, c.tokens);
    const json u = usage();
    const bool any = first_token != Clock::time_point{};
    metrics.generation(u["prompt_tokens"].get<int64_t>(), u["completion_tokens"].get<int64_t>(),
                       any ? seconds(first_token - arrival) : seconds(Clock::now() - arrival),
                       any && longest > 1 ? seconds(last_token - first_token) / double(longest - 1) : -1.0,
                       seconds(Clock::now() - arrival));
  }

  // With echo and logprobs: the prompt's entries, from a choice's first output (null first).
  void take_prompt_logprobs(const Channel::Output& o) {
    Choice& c = choices[size_t(o.choice)];
    const std::vector<int32_t>& prompt = gen.prompts[size_t(o.choice / gen.n)];
    if (!gen.prompt_logprobs || !c.logprobs.empty() || o.step.prompt_logprobs.size() + 1 != prompt.size()) return;
    c.logprobs.push_back({prompt[0], 0, {}, true});
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
      const engine::TokenLogprobs& p = o.step.prompt_logprobs[i];
      TokenLogprob t{prompt[i + 1], p.logprob, p.top};
      if (int(t.top.size()) > gen.top_logprobs) t.top.resize(size_t(gen.top_logprobs));
      c.logprobs.push_back(std::move(t));
    }
  }

  // Feeds one output to its choice; the text that became final.
  std::string feed(const Channel::Output& o) {
    Choice& c = choices[size_t(o.choice)];
    take_prompt_logprobs(o);
    std::string piece;
    if (o.step.token >= 0 && !c.text.stopped()) {
      last_token = Clock::now();
      if (first_token == Clock::time_point{}) first_token = last_token;
      ++c.tokens;
      if (gen.logprobs) {
        TokenLogprob t{o.step.token, o.step.logprob, o.step.top_logprobs};
        if (int(t.top.size()) > gen.top_logprobs) t.top.resize(size_t(gen.top_logprobs));
        c.logprobs.push_back(std::move(t));
      }
      piece = c.text.step(o.step.token);
      if (c.text.stopped()) {
        c.finish_reason = "stop";
        loop.cancel(channel, o.choice);
      }
    }
    if (o.step.finished) {
      c.done = true;
      // "cancelled" only follows a stop string here (a client that left reads nothing more).
      if (c.finish_reason.empty())
        c.finish_reason = o.step.finish_reason == "cancelled" ? "stop" : o.step.finish_reason;
      piece += c.text.finish();
    }
    return piece;
  }

  json usage() const {
    int64_t prompt = 0, completion = 0;
    for (const auto& p : gen.prompts) prompt += int64_t(p.size());
    for (const Choice& c : choices) completion += c.tokens;
    return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  }

  std::string token_text(int32_t id) const {
    if (!model.tokenizer.id_to_token(id)) return "";
    return model.tokenizer.decode(std::vector<int32_t>{id});
  }

  static json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char ch : s) b.push_back(int(ch));
    return b;
  }

  // Logprobs entries [from, to) of a choice in the endpoint's format; completions' text
  // offsets from *text_offset on (moved past them).
  json logprobs_json(const Choice& c, size_t from, size_t to, int64_t* text_offset) const {
    if (chat) {
      json content = json::array();
      for (size_t i = from; i < to; ++i) {
        const TokenLogprob& t = c.logprobs[i];
        json top = json::array();
        for (const auto& [id, lp] : t.top) {
          const std::string s = token_text(id);
          top.push_back({{"token", s}, {"logprob", lp}, {"bytes", bytes_of(s)}});
        }
        const std::string s = token_text(t.id);
        content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
      }
      return {{"content", content}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
    for (size_t i = from; i < to; ++i) {
      const TokenLogprob& t = c.logprobs[i];
      const std::string s = token_text(t.id);
      tokens.push_back(s);
      json top = json::object();
      for (const auto& [id, lp] : t.top) top[token_text(id)] = lp;
      token_logprobs.push_back(t.none ? json(nullptr) : json(t.logprob));
      top_logprobs.push_back(t.none ? json(nullptr) : top);
      offsets.push_back(*text_offset);
      *text_offset += int64_t(s.size());
    }
    return {{"tokens", tokens},
            {"token_logprobs", token_logprobs},
            {"top_logprobs", top_logprobs},
            {"text_offset", offsets}};
  }

  std::string next_call_id() { return id + "-call-" + std::to_string(calls_made++); }
  int calls_made = 0;

  // Waits for every choice to end and builds the response. While it waits, `client_left` (when
  // given) is asked every kClientCheck: true cancels every choice (their pages are let go at
  // once) and gives nullopt, as nobody will read the response.
  std::optional<json> whole_response(const std::function<bool()>& client_left = {}) {
    std::vector<std::string> texts(choices.size());
    for (size_t i = 0; i < gen.echo.size(); ++i) {
      for (int j = 0; j < gen.n; ++j) texts[i * size_t(gen.n) + size_t(j)] = gen.echo[i];
    }
    Clock::time_point check = Clock::now() + kClientCheck;
    for (;;) {
      const std::optional<std::vector<Channel::Output>> out = client_left ? next_until(check) : std::optional(next());
      if (client_left && Clock::now() >= check) {
        if (client_left()) {
          loop.cancel_all(channel);
          return std::nullopt;
        }
        check = Clock::now() + kClientCheck;
      }
      if (!out) continue;       // nothing new before the check
      if (out->empty()) break;  // every choice has ended
      for (const auto& o : *out) texts[size_t(o.choice)] += feed(o);
    }
    json list = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const Choice& c = choices[i];
      int64_t text_offset = 0;
      json lp = gen.logprobs ? logprobs_json(c, 0, c.logprobs.size(), &text_offset) : json(nullptr);
      if (chat) {
        // A forced start is the reply's as far as parsing goes; left as content when no call parses.
        const std::string reply = gen.forced_reply + texts[i];
        json message{{"role", "assistant"}, {"content", reply}};
        std::string answer = reply;
        if (model.reasoning) {
          ReasoningSplitter::Delta d = ReasoningSplitter::split(reply, gen.reasoning_opened);
          message["reasoning_content"] = d.reasoning.empty() ? json(nullptr) : json(d.reasoning);
          answer = std::move(d.content);
          message["content"] = answer;
        }
        std::string reason = c.finish_reason;
        if (gen.tool_calls) {
          const ParsedToolCalls parsed = parse_tool_calls(answer, model.tool_format);
          if (!parsed.calls.empty()) {
            message["content"] = parsed.content ? json(*parsed.content) : json(nullptr);
            json calls = json::array();
            for (const ToolCall& call : parsed.calls) {
              calls.push_back({{"id", next_call_id()},
                               {"type", "function"},
                               {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
            }
            message["tool_calls"] = calls;
            if (reason == "stop") reason = "tool_calls";
          }
        }
        list.push_back({{"index", i}, {"message", message}, {"logprobs", lp}, {"finish_reason", reason}});
      } else {
        list.push_back({{"index", i}, {"text", texts[i]}, {"logprobs", lp}, {"finish_reason", c.finish_reason}});
      }
    }
    record();
    return json{{"id", id},           {"object", chat ? "chat.completion" : "text_completion"},
                {"created", created}, {"model", model.name},
                {"choices", list},    {"usage", usage()}};
  }

  json chunk(json choice_list) const {
    json j{{"id", id},
           {"object", chat ? "chat.completion.chunk" : "text_completion"},
           {"created", created},
           {"model", model.name},
           {"choices", std::move(choice_list)}};
    if (gen.include_usage) j["usage"] = nullptr;
    return j;
  }

  json choice_chunk(size_t i, const std::string& piece, bool with_role) {
    Choice& c = choices[i];
    json lp = nullptr;
    if (gen.logprobs) {
      lp = logprobs_json(c, c.logprobs_sent, c.logprobs.size(), &c.text_offset);
      c.logprobs_sent = c.logprobs.size();
    }
    const json reason = c.done ? json(c.finish_reason) : json(nullptr);
    if (chat) {
      json delta = json::object();
      if (with_role) delta["role"] = "assistant";
      // The forced start goes through the parsers first, with the role's chunk.
      std::string content = std::exchange(c.unparsed, {}) + piece;
      if (model.reasoning) {
        ReasoningSplitter::Delta d = c.reasoning.step(content);
        if (c.done) {
          const ReasoningSplitter::Delta rest = c.reasoning.finish();
          d.reasoning += rest.reasoning;
          d.content += rest.content;
        }
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        content = std::move(d.content);
      }
      json finish = reason;
      if (gen.tool_calls) {
        ToolCallStream::Delta t = c.tools.step(content);
        if (c.done) {
          ToolCallStream::Delta rest = c.tools.finish();
          t.content += rest.content;
          for (ToolCall& call : rest.calls) t.calls.push_back(std::move(call));
        }
        content = std::move(t.content);
        // Each call whole in one delta (its index, id, name and all of its arguments): OpenAI's
        // clients accumulate argument fragments, and one fragment is a valid stream of them.
        json calls = json::array();
        for (const ToolCall& call : t.calls) {
          calls.push_back({{"index", c.tool_calls_sent++},
                           {"id", next_call_id()},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        if (!calls.empty()) delta["tool_calls"] = std::move(calls);
        if (c.done && c.tools.any_call() && c.finish_reason == "stop") finish = "tool_calls";
      }
      if (with_role || !content.empty()) delta["content"] = content;
      return {{"index", i}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish}};
    }
    return {{"index", i}, {"text", piece}, {"logprobs", lp}, {"finish_reason", reason}};
  }

  // Streams SSE events through `write`; false when the client went away (every choice is
  // then cancelled, its pages let go).
  bool stream(const std::function<bool(const std::string&)>& write) {
    const auto event = [&](const json& j) { return write("data: " + dump(j) + "\n\n"); };
    bool alive = true;
    if (chat) {
      for (size_t i = 0; i < choices.size() && alive; ++i)
        alive = event(chunk(json::array({choice_chunk(i, "", true)})));
    }
    // Echo with logprobs: each choice's prompt event waits for its first output (the prompt's
    // logprobs come with it).
    for (size_t i = 0; i < gen.echo.size() && alive && !gen.prompt_logprobs; ++i) {
      for (int j = 0; j < gen.n && alive; ++j) {
        alive = event(chunk(json::array({{{"index", i * size_t(gen.n) + size_t(j)},
                                          {"text", gen.echo[i]},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}})));
      }
    }
    try {
      while (alive) {
        const std::vector<Channel::Output> out = next();
        if (out.empty()) break;
        for (const auto& o : out) {
          Choice& first = choices[size_t(o.choice)];
          if (gen.prompt_logprobs && !first.echo_sent) {
            first.echo_sent = true;
            take_prompt_logprobs(o);
            alive =
                event(chunk(json::array({choice_chunk(size_t(o.choice), gen.echo[size_t(o.choice / gen.n)], false)})));
            if (!alive) break;
          }
          const std::string piece = feed(o);
          const Choice& c = choices[size_t(o.choice)];
          const bool new_logprobs = gen.logprobs && c.logprobs.size() > c.logprobs_sent;
          if (!piece.empty() || c.done || new_logprobs) {
            json choice = choice_chunk(size_t(o.choice), piece, false);
            // Text held back (a tag that may be starting, a tool call not yet closed) leaves
            // nothing to send.
            const bool empty =
                chat && choice["delta"].empty() && choice["finish_reason"].is_null() && choice["logprobs"].is_null();
            if (!empty) alive = event(chunk(json::array({std::move(choice)})));
            if (!alive) break;
          }
        }
      }
    } catch (const std::exception& e) {
      // The engine failed mid-stream: an error event, then the end (and no choice left running).
      loop.cancel_all(channel);
      return event(error_body(500, e.what())) && write("data: [DONE]\n\n");
    }
    if (!alive) {
      loop.cancel_all(channel);
      std::fprintf(stderr, "onecat serve: %s: the client went away; its request is cancelled\n", id.c_str());
      return false;
    }
    record();
    if (gen.include_usage) {
      json u = chunk(json::array());
      u["usage"] = usage();
      if (!event(u)) return false;
    }
    return write("data: [DONE]\n\n");
  }
};

class Server {
 public:
  Server(const ServeOptions& o, ServedModel& m, EngineLoop& l, Metrics& metrics)
      : options_(o), model_(m), loop_(l), metrics_(metrics) {
    std::random_device rd;
    seed_base_ = o.seed ? *o.seed * 0xD1B54A32D192ED03ull + 1 : (uint64_t(rd()) << 32) ^ rd();
    routes();
  }

  httplib::Server& http() { return http_; }

 private:
  uint64_t next_seed() { return seed_base_ + 0x9E3779B97F4A7C15ull * counter_.fetch_add(1); }
  std::string next_id(const char* prefix) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s-%016llx", prefix, static_cast<unsigned long long>(next_seed()));
    return buf;
  }

  // Runs a handler body: ApiError → its status, InputError → 400, anything else → 500.
  template <class F>
  static void guarded(httplib::Response& res, F&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      send_error(res, e.status, e.what(), e.param, e.code);
    } catch (const InputError& e) {
      send_error(res, 400, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    }
  }

  void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    guarded(res, [&] {
      const json body = parse_body(req);
      // Schemas, tools and tool calls keep the key order they were sent in.
      const nlohmann::ordered_json ordered = chat::parse_ordered_json(req.body);
      Generation g = chat ? parse_chat(body, model_, next_seed(), &ordered)
                          : parse_completion(body, model_, next_seed(), &ordered);
      auto job =
          std::make_shared<Job>(model_, loop_, metrics_, std::move(g), chat, next_id(chat ? "chatcmpl" : "cmpl"));
      if (!job->gen.stream) {
        const int connection = connection_socket(req.remote_addr, req.remote_port, req.local_addr, req.local_port);
        std::function<bool()> client_left;
        if (connection >= 0) {
          client_left = [connection] { return peer_left(connection); };
        } else {
          std::fprintf(stderr,
                       "onecat serve: %s: its connection's socket (%s:%d to %s:%d) was not found; it runs to its end "
                       "even if its client leaves\n",
                       job->id.c_str(), req.remote_addr.c_str(), req.remote_port, req.local_addr.c_str(),
                       req.local_port);
        }
        std::optional<json> whole = job->whole_response(client_left);
        if (!whole) {
          std::fprintf(stderr, "onecat serve: %s: the client went away; its request is cancelled\n", job->id.c_str());
          send_error(res, kClientClosedRequest, "the client closed the connection before the response was ready.");
          return;
        }
        send_json(res, 200, *whole);
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [job](size_t, httplib::DataSink& sink) {
            // Nothing may escape into cpp-httplib's worker thread (it would end the process).
            try {
              const bool ok = job->stream([&](const std::string& s) { return sink.write(s.data(), s.size()); });
              if (ok) sink.done();
              return ok;
            } catch (const std::exception& e) {
              std::fprintf(stderr, "onecat serve: %s: the stream failed: %s\n", job->id.c_str(), e.what());
              job->loop.cancel_all(job->channel);
              return false;
            }
          },
          [job](bool success) {
            if (!success) job->loop.cancel_all(job->channel);
          });
    });
  }

  void routes() {
    http_.set_payload_max_length(options_.max_body_bytes);
    const int threads = options_.threads;
    http_.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + options_.api_key) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      send_error(res, 401, "this server needs an API key: send the header 'Authorization: Bearer KEY'.", "",
                 "invalid_api_key");
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) {
        send_error(res, 404, "there is no " + req.method + " " + quoted_input(req.path) + " here.");
      } else if (res.status == 413 &&
                 req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
        // cpp-httplib caps form bodies before any handler runs (a constant of the library as built),
        // and `curl -d` sends JSON as a form unless told otherwise.
        send_error(res, 413,
                   "the request body came as application/x-www-form-urlencoded, which this server takes up to " +
                       human_bytes(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                       " only: send JSON with the header 'Content-Type: application/json'.");
      } else if (res.status == 413) {
        send_error(
            res, 413,
            "the request body is larger than this server accepts (" + human_bytes(options_.max_body_bytes) + ").");
      } else {
        send_error(res, res.status, "the request could not be served (HTTP " + std::to_string(res.status) + ").");
      }
    });
    http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, 500, "internal error: " + what);
    });

    http_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      static const char* const routes[] = {
          "/health",   "/version",    "/v1/models", "/v1/completions", "/v1/chat/completions",
          "/tokenize", "/detokenize", "/metrics"};
      std::string endpoint = "other";
      for (const char* r : routes) {
        if (req.path == r) endpoint = r;
      }
      metrics_.request(endpoint, res.status);
    });
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_.text(model_.name), "text/plain; version=0.0.4");
    });
    http_.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    http_.Get("/version", [](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"version", ONECAT_VERSION}});
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200,
                {{"object", "list"},
                 {"data",
                  {{{"id", model_.name},
                    {"object", "model"},
                    {"created", created_},
                    {"owned_by", "onecat"},
                    {"root", options_.model_dir},
                    {"max_model_len", model_.max_model_len}}}}});
    });
    http_.Post("/v1/completions",
               [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, false); });
    http_.Post("/v1/chat/completions",
               [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, true); });
    http_.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const json body = parse_body(req);
        const nlohmann::ordered_json ordered = chat::parse_ordered_json(req.body);
        const std::vector<int32_t> ids = parse_tokenize(body, model_, &ordered);
        send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model_.max_model_len}});
      });
    });
    http_.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] {
        const json body = parse_body(req);
        if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object.");
        check_model(body, model_);
        if (!body.contains("tokens") || !body["tokens"].is_array()) {
          throw ApiError(400, "/detokenize needs tokens: an array of token ids.", "tokens");
        }
        std::vector<int32_t> ids;
        for (const json& v : body["tokens"]) {
          const bool inside = v.is_number_unsigned() && v.get<uint64_t>() < uint64_t(model_.tokenizer.vocab_size());
          if (!inside || !model_.tokenizer.id_to_token(int32_t(v.get<uint64_t>()))) {
            throw ApiError(400, "tokens must be ids of the tokenizer's vocabulary; " + v.dump() + " is not.", "tokens");
          }
          ids.push_back(int32_t(v.get<uint64_t>()));
        }
        send_json(res, 200, {{"prompt", model_.tokenizer.decode(ids)}});
      });
    });
  }

  const ServeOptions& options_;
  ServedModel& model_;
  EngineLoop& loop_;
  Metrics& metrics_;
  httplib::Server http_;
  uint64_t seed_base_ = 0;
  std::atomic<uint64_t> counter_{0};
  int64_t created_ = std::time(nullptr);
};

// template_source: --chat-template's text (chat_template_argument), checked before the model loads.
ServedModel served_model(const ServeOptions& o, const model::Model& m,
                         const std::optional<std::string>& template_source, const model::SamplingDefaults& defaults) {
  if (!std::filesystem::exists(std::filesystem::path(o.model_dir) / "tokenizer.json")) {
    throw InputError("serve needs the checkpoint's tokenizer.json, which " + o.model_dir + " lacks.");
  }
  ServedModel s{.tokenizer = tokenizer::Tokenizer::from_hf_directory(o.model_dir)};
  s.name = o.served_model_name.empty() ? o.model_dir : o.served_model_name;
  s.vocab = m.config().vocab;
  s.max_model_len = o.max_model_len;
  s.max_choices = std::max(1, 8 * o.max_num_seqs);
  s.reasoning = !o.reasoning_parser.empty();
  s.num_draft_tokens = o.speculation.num_speculative_tokens;
  s.stop_ids = model::eos_token_ids(o.model_dir);
  s.sampling_defaults = defaults;
  s.tool_format = parse_tool_call_format(o.tool_call_parser);
  s.grammars = std::make_shared<engine::GrammarCache>(engine::TokenVocabulary::of(s.tokenizer, s.vocab));
  if (s.reasoning) {
    const std::optional<int32_t> open = s.tokenizer.token_to_id("<think>"), close = s.tokenizer.token_to_id("</think>");
    if (open && close && *open < s.vocab && *close < s.vocab) s.reasoning_gate = engine::ReasoningGate{*open, *close};
  }
  for (int32_t id : s.tokenizer.eos_token_ids()) {
    if (std::find(s.stop_ids.begin(), s.stop_ids.end(), id) == s.stop_ids.end()) s.stop_ids.push_back(id);
  }
  if (template_source) {
    s.chat_template.emplace(*template_source);
    s.tool_template.emplace(*template_source);
    s.special_tokens = chat::checkpoint_special_tokens(o.model_dir);
    return s;
  }
  try {
    chat::CheckpointChatTemplate t = chat::load_chat_template(o.model_dir, false);
    s.chat_template.emplace(t.source);
    s.special_tokens = t.special_tokens;
    s.tool_template.emplace(chat::load_chat_template(o.model_dir, true).source);
  } catch (const InputError& e) {
    std::fprintf(stderr, "onecat serve: /v1/chat/completions is off (give --chat-template FILE): %s\n", e.what());
  }
  return s;
}

}  // namespace

void serve(const ServeOptions& options) {
  ServeOptions o = options;
  if (o.port < 0 || o.port > 65535) throw InputError("--port must be in [0, 65535].");
  parse_tool_call_format(o.tool_call_parser);  // checked before the load
  if (!o.reasoning_parser.empty() && o.reasoning_parser != "qwen3" && o.reasoning_parser != "deepseek_r1") {
    throw InputError("--reasoning-parser must be qwen3 or deepseek_r1, not " + quoted_input(o.reasoning_parser) + ".");
  }
  const bool cuda = o.device == model::Device::kCuda;
  if (o.max_num_seqs == 0) o.max_num_seqs = cuda ? 128 : 8;
  if (o.max_num_batched_tokens == 0) o.max_num_batched_tokens = cuda ? 2048 : 512;
  if (o.max_num_seqs < 1 || o.max_num_batched_tokens < 1) {
    throw InputError("--max-num-seqs and --max-num-batched-tokens must be at least 1.");
  }
  std::optional<std::string> template_source;
  if (!o.chat_template.empty()) {
    template_source = chat::chat_template_argument(o.chat_template);
    try {
      chat::ChatTemplate check(*template_source);
    } catch (const InputError& e) {
      throw InputError(std::string("--chat-template: ") + e.what());
    }
  }
  if (o.max_model_len < 0 || o.kv_cache_tokens < 0 || o.num_pages < 0)
    throw InputError("--max-model-len, --kv-cache-tokens and --num-pages must be positive.");
  if (o.num_pages > 0 && o.kv_cache_tokens > 0) throw InputError("give --kv-cache-tokens or --num-pages, not both.");
  if (o.num_pages > (int64_t(1) << 32)) {
    throw InputError("--num-pages " + std::to_string(o.num_pages) + " is more than any GPU holds.");
  }
  if (o.num_pages > 0) o.kv_cache_tokens = o.num_pages * model::ModelOptions{}.page_size;
  const models::KvCacheDtype kv_dtype = models::parse_kv_cache_dtype(o.kv_cache_dtype);
  const models::ModelConfig config = models::load_model(o.model_dir);
  models::check_quantization(o.quantization, config, o.model_dir);
  // Checked before the weights load, like every other option.
  model::SamplingDefaults defaults = model::sampling_defaults(o.model_dir, o.generation_config);
  if (!o.override_generation_config.empty()) model::override_sampling_defaults(defaults, o.override_generation_config);
  const int64_t positions = model::default_max_model_len(config);
  if (o.max_model_len == 0) o.max_model_len = positions;
  if (o.max_model_len > positions) {
    throw InputError("--max-model-len " + std::to_string(o.max_model_len) + " is more than the model's " +
                     std::to_string(positions) + " positions (config.json's max_position_embeddings).");
  }

  // SIGINT and SIGTERM are taken by one thread (sigtimedwait), not by a handler: every thread
  // started from here on inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  model::ModelOptions mo;
  mo.device = o.device;
  mo.max_batch_tokens = o.max_num_batched_tokens;
  mo.max_sequences = o.max_num_seqs;
  // The KV pool: as given; else on a GPU all the memory gpu_memory_utilization leaves (vLLM's
  // way), on the CPU room for every sequence at max_model_len.
  mo.kv_cache_tokens = o.kv_cache_tokens > 0              ? o.kv_cache_tokens
                       : o.device == model::Device::kCuda ? 0
                                                          : int64_t(o.max_num_seqs) * o.max_model_len;
  mo.gpu_memory_utilization = o.gpu_memory_utilization;
  mo.max_model_len = o.max_model_len;
  mo.kv_cache_dtype = kv_dtype;
  mo.progress = true;  // a bar on a terminal (models/checkpoint/load_progress.h)
  mo.cuda_graphs = o.cuda_graphs;
  engine::leave_room_for_draft(mo, o.speculation);  // a draft model's pool is as large as this one's
  const auto start = std::chrono::steady_clock::now();
  const std::unique_ptr<model::Model> m = model::Model::load(o.model_dir, mo);
  ServedModel served = served_model(o, *m, template_source, defaults);
  const int64_t pool_tokens = m->pages().pages() * m->pages().page_size();
  if (pool_tokens < o.max_model_len) {  // vLLM refuses this too: a long request could never run
    throw InputError("the KV cache holds " + std::to_string(pool_tokens) + " tokens, fewer than --max-model-len " +
                     std::to_string(o.max_model_len) + "; lower --max-model-len or give the cache more room.");
  }
  // Start-up in figures (before the address line): what the load read and how fast, the
  // backend's share (upload and kernels prepared), the pool, then the engine's own start.
  const model::Model::LoadStats& ls = m->load_stats();
  std::fprintf(stderr, "onecat serve: loaded %s: %.2f GB read in %.2f s (%.2f GB/s), %s ready in %.2f s\n",
               o.model_dir.c_str(), double(ls.checkpoint_bytes) / 1e9, ls.read_seconds,
               ls.read_seconds > 0 ? double(ls.checkpoint_bytes) / 1e9 / ls.read_seconds : 0.0,
               o.device == model::Device::kCuda ? "GPU backend" : "CPU backend", ls.backend_seconds);
  if (ls.kernels > 0) {
    std::fprintf(stderr, "onecat serve: %d kernels (%d tuned, the rest default; %d compiled, the rest from the cache) "
                 "ready in %.2f s; weights uploaded in %.2f s\n", ls.kernels, ls.tuned_kernels, ls.compiled_kernels,
                 ls.kernel_seconds, ls.backend_seconds - ls.kernel_seconds);
  }
  std::fprintf(stderr, "onecat serve: KV cache %lld tokens (%lld pages of %d, %s)\n",
               static_cast<long long>(pool_tokens), static_cast<long long>(m->pages().pages()),
               m->pages().page_size(), models::kv_cache_dtype_name(kv_dtype));
  if (!defaults.empty()) {  // vLLM says this too: a request's missing fields are not the API's defaults
    std::fprintf(stderr,
                 "onecat serve: requests' default sampling is the checkpoint's (%s); --generation-config vllm "
                 "uses the API's own\n",
                 defaults.describe().c_str());
  }

  Metrics metrics;
  engine::EngineOptions eo = o.speculation;
  eo.device_sampling = o.device_sampling;
  eo.prefix_caching = o.prefix_caching;
  const auto engine_start = std::chrono::steady_clock::now();
  EngineLoop loop(*m, eo, o.device == model::Device::kCuda, metrics);
  const auto ready = std::chrono::steady_clock::now();
  if (loop.graphs().sizes > 0) {
    std::fprintf(stderr, "onecat serve: CUDA graphs of %d decode batch sizes (up to %d sequences) captured in %.2f s\n",
                 loop.graphs().sizes, o.max_num_seqs, loop.graphs().seconds);
  }
  if (loop.warm_up().steps > 0) {
    std::fprintf(stderr, "onecat serve: %d prefill step sizes warmed up in %.2f s\n", loop.warm_up().steps,
                 loop.warm_up().seconds);
  }
  std::fprintf(stderr, "onecat serve: engine ready in %.2f s (%.2f s since start)\n",
               std::chrono::duration<double>(ready - engine_start).count(),
               std::chrono::duration<double>(ready - start).count());
  Server server(o, served, loop, metrics);
  httplib::Server& http = server.http();
  // cpp-httplib 0.11 listens with a backlog of 5 (compiled into Debian's library): with dozens
  // of clients connecting at once the kernel drops connections (clients saw resets). The
  // listening socket is caught as it is made and given a real backlog after the bind.
  std::atomic<int> listen_fd{-1};
  http.set_socket_options([&listen_fd](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  const int port = o.port == 0 ? http.bind_to_any_port(o.host) : (http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port >= 0 && ::listen(listen_fd, kListenBacklog) != 0) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  if (port < 0) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                " (in use, or not an address of this machine); choose another --host or --port.");
  }
  std::fprintf(stderr, "onecat serve: %s on http://%s:%d (max_model_len %lld, %d sequences per step)\n",
               served.name.c_str(), o.host.c_str(), port, static_cast<long long>(o.max_model_len), o.max_num_seqs);

  std::atomic<bool> stopped{false};
  std::thread signals([&] {
    const timespec poll{0, 100'000'000};
    while (!stopped) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &poll);
      if (sig != SIGINT && sig != SIGTERM) continue;
      std::fprintf(stderr, "onecat serve: %s: no new connections; finishing the requests in flight\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      // listen_after_bind returns once every connection's thread is done.
      while (!stopped) {
        http.stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
  http.listen_after_bind();
  stopped = true;
  signals.join();
  std::fprintf(stderr, "onecat serve: stopped\n");
}

}  // namespace onecat::serve
