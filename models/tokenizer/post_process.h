// The post-processor of a tokenizer.json, for one sequence: the special tokens placed
// before and after the encoded text when add_special_tokens is set.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace onecat::tokenizer {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;

  // TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel (no ids), Sequence.
  // Error naming any other type.
  static PostProcessor from_json(const nlohmann::json& j);
};

}  // namespace onecat::tokenizer
