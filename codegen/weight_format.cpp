#include "codegen/weight_format.h"

#include <array>
#include <string>
#include <utility>

#include "base/error.h"

namespace onecat::quant {
namespace {

constexpr std::array<std::pair<WeightFormat, std::string_view>, 7> kNames{{
    {WeightFormat::kF16, "f16"},
    {WeightFormat::kAwq4, "awq4"},
    {WeightFormat::kGptq4, "gptq4"},
    {WeightFormat::kFp8B32, "fp8b32"},
    {WeightFormat::kFp8B128, "fp8b128"},
    {WeightFormat::kNvfp4, "nvfp4"},
    {WeightFormat::kMxfp4, "mxfp4"},
}};

}  // namespace

WeightFormat parse_weight_format(std::string_view name) {
  std::string choices;
  for (const auto& [format, text] : kNames) {
    if (text == name) return format;
    choices += (choices.empty() ? "" : ", ") + std::string(text);
  }
  throw InputError(quoted_input(name) + " is not a weight format; use one of " + choices);
}

std::string_view format_name(WeightFormat format) {
  for (const auto& [f, text] : kNames) {
    if (f == format) return text;
  }
  return "unknown";
}

}  // namespace onecat::quant
