// onecat tokenize / detokenize: a checkpoint's (or GGUF's) tokenizer on the command line.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "models/checkpoint/locate.h"
#include "models/tokenizer/decode_stream.h"
#include "models/tokenizer/tokenizer.h"
#include "tools/onecat/commands.h"

namespace onecat::cli {
namespace {

using tokenizer::Tokenizer;

std::string read_stdin() {
  std::ostringstream s;
  s << std::cin.rdbuf();
  return s.str();
}

nlohmann::json parse_json_line(const std::string& line, size_t number) {
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for 1e400
    throw InputError("Line " + std::to_string(number) + " of the input is not JSON.");
  }
}

void print_ids(const std::vector<int32_t>& ids, bool json) {
  if (json) {
    std::cout << nlohmann::json{{"ids", ids}}.dump() << "\n";
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
}

void add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Text → token ids with a checkpoint's tokenizer (or a GGUF's)");
  struct Options {
    std::string model, text;
    bool no_special = false, json = false, jsonl = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Checkpoint directory (tokenizer.json) or .gguf file")->required();
  auto* text = cmd->add_option("--text", o->text, "Text to tokenize (default: all of stdin)");
  cmd->add_flag("--no-special", o->no_special, "Do not add the template's special tokens (e.g. BOS)");
  cmd->add_flag("--json", o->json, "Print {\"ids\": [...]}");
  cmd->add_flag("--jsonl", o->jsonl, "Batch: each stdin line is a JSON string; prints one JSON array of ids per line");
  cmd->callback([o, text] {
    Tokenizer tok = Tokenizer::load(models::locate_checkpoint(o->model));
    if (!o->jsonl) {
      print_ids(tok.encode(text->count() ? o->text : read_stdin(), !o->no_special), o->json);
      return;
    }
    std::string line;
    for (size_t n = 1; std::getline(std::cin, line); ++n) {
      nlohmann::json j = parse_json_line(line, n);
      if (!j.is_string()) throw InputError("Line " + std::to_string(n) + " of the input is not a JSON string.");
      std::cout << nlohmann::json(tok.encode(j.get<std::string>(), !o->no_special)).dump() << "\n";
    }
  });
}

void add_detokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("detokenize", "Token ids → text with a checkpoint's tokenizer (or a GGUF's)");
  struct Options {
    std::string model, ids;
    bool skip_special = false, json = false, jsonl = false, stream = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--model", o->model, "Checkpoint directory (tokenizer.json) or .gguf file")->required();
  auto* ids = cmd->add_option("--ids", o->ids, "Comma-separated token ids");
  cmd->add_flag("--skip-special", o->skip_special, "Leave out special tokens");
  cmd->add_flag("--json", o->json, "Print {\"text\": \"...\"} (with --stream, also the pieces)");
  cmd->add_flag("--jsonl", o->jsonl, "Batch: each stdin line is a JSON array of ids; prints one JSON string per line");
  cmd->add_flag("--stream", o->stream, "Decode one id at a time, as during generation, printing each new piece");
  cmd->callback([o, ids] {
    Tokenizer tok = Tokenizer::load(models::locate_checkpoint(o->model));
    if (o->jsonl) {
      std::string line;
      for (size_t n = 1; std::getline(std::cin, line); ++n) {
        nlohmann::json j = parse_json_line(line, n);
        if (!j.is_array()) throw InputError("Line " + std::to_string(n) + " of the input is not a JSON array of ids.");
        std::cout << nlohmann::json(tok.decode(j.get<std::vector<int32_t>>(), o->skip_special)).dump() << "\n";
      }
      return;
    }
    if (!ids->count()) throw InputError("detokenize needs --ids (or --jsonl with arrays of ids on stdin).");
    std::vector<int32_t> list = parse_ids(o->ids, "--ids");
    if (!o->stream) {
      std::string text = tok.decode(list, o->skip_special);
      if (o->json) {
        std::cout << nlohmann::json{{"text", text}}.dump() << "\n";
      } else {
        std::cout << text << "\n";
      }
      return;
    }
    tokenizer::DecodeStream stream(tok, o->skip_special);
    nlohmann::json pieces = nlohmann::json::array();
    std::string text;
    auto emit = [&](const std::string& piece) {
      pieces.push_back(piece);
      text += piece;
      if (!o->json) std::cout << piece << std::flush;
    };
    for (int32_t id : list) emit(stream.step(id));
    emit(stream.finish());
    if (o->json) {
      std::cout << nlohmann::json{{"text", text}, {"pieces", pieces}}.dump() << "\n";
    } else {
      std::cout << "\n";
    }
  });
}

}  // namespace

void add_speculative_options(CLI::App* cmd, engine::EngineOptions& options, const std::string& k_default) {
  cmd->add_option("--num-draft-tokens,--num-speculative-tokens", options.num_speculative_tokens,
                  "Speculative decoding: up to K draft tokens per request and step (default " + k_default + ")");
  cmd->add_option("--speculative", options.speculative,
                  "The drafter: ngram (prompt lookup, default) or draft:DIR (a draft checkpoint with the same "
                  "tokenizer)");
  cmd->add_option("--prompt-lookup-min,--ngram-min", options.ngram_min,
                  "The n-gram drafter's shortest match of the sequence's last tokens (default 1)");
  cmd->add_option("--prompt-lookup-max,--ngram-max", options.ngram_max,
                  "The n-gram drafter's longest match, tried first (default 4)");
  cmd->add_option("--draft-p-min", options.draft_p_min,
                  "A draft model stops drafting a request's step at a draft whose most likely token has less "
                  "probability than this (default 0: always K)");
}

void add_device_sampling_option(CLI::App* cmd, bool& device_sampling) {
  cmd->add_flag("--device-sampling,!--no-device-sampling", device_sampling,
                "Sample on the device that holds the logits (cuda: the sampling kernel; the default) or, "
                "with --no-device-sampling, copy the logits to the host sampler");
}

void add_device_option(CLI::App* cmd, std::string& device) {
  cmd->add_option("--device", device, "auto (the default: cuda where there is a CUDA GPU, else cpu), cuda or cpu");
}

model::Device resolve_device(const std::string& device, const char* command) {
  const model::Device d = model::parse_device(device);
  if (const std::string note = model::auto_device_note(device); !note.empty()) {
    std::fprintf(stderr, "onecat %s: %s\n", command, note.c_str());
  }
  return d;
}

void add_kv_cache_dtype_option(CLI::App* cmd, std::string& kv_cache_dtype) {
  cmd->add_option("--kv-cache-dtype", kv_cache_dtype,
                  "The KV cache's elements: auto (fp16, the default), fp8 or fp8_e4m3, or fp8_e5m2 (one byte: "
                  "twice the tokens in the same memory)");
}

std::vector<int32_t> parse_ids(const std::string& text, const std::string& option) {
  std::vector<int32_t> ids;
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) {
    size_t used = 0;
    const long long v = leading_integer(item, used).value_or(-1);
    if (used == 0 || item.find_first_not_of(" \t", used) != std::string::npos || v < 0 || v > INT32_MAX)
      throw InputError(option + " must be comma-separated token ids, and " + quoted_input(item) + " is not one.");
    ids.push_back(int32_t(v));
  }
  return ids;
}

void add_text_commands(CLI::App& app) {
  add_tokenize(app);
  add_detokenize(app);
}

}  // namespace onecat::cli
