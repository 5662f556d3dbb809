#include "models/tokenizer/post_process.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace onecat::tokenizer {

namespace {

void add(const nlohmann::json& j, PostProcessor& p) {
  std::string type = j.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : j.at("processors")) add(step, p);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets.
  } else if (type == "TemplateProcessing") {
    bool after_text = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        if (item["Sequence"].at("id") != "A")
          throw Error("The tokenizer's single-sequence template refers to sequence " +
                      item["Sequence"].at("id").dump() + ".");
        after_text = true;
        continue;
      }
      std::string name = item.at("SpecialToken").at("id").get<std::string>();
      const auto& special = j.at("special_tokens");
      if (!special.contains(name))
        throw Error("The tokenizer's template uses the special token '" + name +
                    "', which its special_tokens do not define.");
      for (const auto& id : special.at(name).at("ids")) (after_text ? p.suffix : p.prefix).push_back(id.get<int32_t>());
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    p.prefix.push_back(j.at("cls").at(1).get<int32_t>());
    p.suffix.push_back(j.at("sep").at(1).get<int32_t>());
  } else {
    throw Error("The tokenizer's post-processor '" + type + "' is not supported by onecat.");
  }
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& j) {
  PostProcessor p;
  if (!j.is_null()) add(j, p);
  return p;
}

}  // namespace onecat::tokenizer
