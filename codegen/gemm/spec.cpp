#include "codegen/gemm/spec.h"

#include "base/error.h"
#include "codegen/spec_text.h"

namespace onecat::gemm {
namespace {

// Largest N or K a kernel is generated for (the biggest vocabularies are ~256K rows).
constexpr int64_t kMaxDim = 1 << 20;

int default_group(WeightFormat f) {
  switch (f) {
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4: return 128;
    case WeightFormat::kFp8B32: return 32;
    case WeightFormat::kFp8B128: return 128;
    case WeightFormat::kNvfp4: return 16;
    case WeightFormat::kMxfp4: return 32;
    case WeightFormat::kF16: return 0;
  }
  return 0;
}

std::string check_group(WeightFormat f, int g) {
  switch (f) {
    case WeightFormat::kAwq4:
    case WeightFormat::kGptq4: return g == 32 || g == 64 || g == 128 ? "" : "int4 groups are 32, 64 or 128";
    case WeightFormat::kFp8B128: return g == 128 || g == 0 ? "" : "fp8b128 takes group=128 (blocks) or group=0 (per channel)";
    default: return g == default_group(f) ? "" : std::string(quant::format_name(f)) + " has group=" + std::to_string(default_group(f));
  }
}

}  // namespace

std::string_view epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return "none";
    case Epilogue::kBias: return "bias";
    case Epilogue::kResidual: return "residual";
    case Epilogue::kSiluMul: return "silu_mul";
  }
  return "none";
}

int Spec::per_chunk() const {
  switch (format) {
    case WeightFormat::kF16: return 8;
    case WeightFormat::kFp8B32:
    case WeightFormat::kFp8B128: return 16;
    default: return 32;
  }
}

Spec Spec::parse(std::string_view text) {
  SpecText st = split_spec(text);
  const std::string what = "spec " + quoted_input(text);
  if (st.family != "gemm") throw InputError(what + " is not a gemm spec");
  FieldReader r(st.fields, what);
  Spec s;
  s.n = r.integer("n", 1, kMaxDim);
  s.k = r.integer("k", 1, kMaxDim);
  s.format = quant::parse_weight_format(r.choice("fmt", {"f16", "awq4", "gptq4", "fp8b32", "fp8b128", "nvfp4", "mxfp4"}));
  s.group = static_cast<int>(r.integer_or("group", default_group(s.format), 0, 128));
  s.out_f32 = r.choice_or("out", "f16", {"f16", "f32"}) == "f32";
  const std::string epi = r.choice_or("epi", "none", {"none", "bias", "residual", "silu_mul"});
  s.epilogue = epi == "bias" ? Epilogue::kBias : epi == "residual" ? Epilogue::kResidual
             : epi == "silu_mul" ? Epilogue::kSiluMul : Epilogue::kNone;
  s.act_order = r.integer_or("act_order", 0, 0, 1) == 1;
  s.norm = r.choice_or("norm", "none", {"none", "rms"}) == "rms";
  r.finish();
  if (std::string why = check_group(s.format, s.group); !why.empty()) throw InputError(what + ": " + why);
  if (s.act_order && s.format != WeightFormat::kGptq4) throw InputError(what + ": act_order=1 is for gptq4 only");
  if (s.epilogue == Epilogue::kSiluMul && s.n % 2 != 0) {
    throw InputError(what + ": epi=silu_mul needs an even n (gate and up rows stacked)");
  }
  // Every strategy loads whole 16-byte chunks of a row, and scales cover whole chunks.
  if (s.k % s.per_chunk() != 0) {
    throw InputError(what + ": k=" + std::to_string(s.k) + " must be a multiple of " + std::to_string(s.per_chunk()) +
                     " for " + std::string(quant::format_name(s.format)) + " (one 16-byte load of a weight row)");
  }
  if (s.group > 0 && s.format != WeightFormat::kFp8B128 && s.k % s.group != 0) {
    throw InputError(what + ": k=" + std::to_string(s.k) + " must be a multiple of group=" + std::to_string(s.group));
  }
  return s;
}

std::string Spec::to_string() const {
  std::vector<std::pair<std::string, std::string>> fields = {{"n", std::to_string(n)},
                                                             {"k", std::to_string(k)},
                                                             {"fmt", std::string(quant::format_name(format))},
                                                             {"group", std::to_string(group)},
                                                             {"out", out_f32 ? "f32" : "f16"},
                                                             {"epi", std::string(epilogue_name(epilogue))},
                                                             {"act_order", act_order ? "1" : "0"}};
  if (norm) fields.emplace_back("norm", "rms");
  return "gemm:" + join_fields(fields);
}

}  // namespace onecat::gemm
