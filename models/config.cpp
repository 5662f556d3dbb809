#include "models/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "base/file.h"

namespace onecat::models {
namespace {

using nlohmann::json;

const std::vector<std::string> kArchitectures = {"LlamaForCausalLM",   "MistralForCausalLM",  "Qwen2ForCausalLM",
                                                 "Qwen3ForCausalLM",   "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM",
                                                 "MixtralForCausalLM", "Phi3ForCausalLM",     "GraniteForCausalLM"};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Every integer field is a size, a count or a position (dimensions, layers, experts, bits, window,
// context): none comes near 2^24 in a real checkpoint, and bounding them keeps the products the
// loader forms (heads × head_dim, rows × cols × bytes) far from int64's end (head_dim 2^63 − 1
// overflowed one: undefined behaviour).
constexpr int64_t kMaxConfigInteger = int64_t(1) << 24;

// Reads the fields of one JSON object; prefix ("quantization_config.") names nested fields.
class Fields {
 public:
  Fields(const json& object, const std::string& origin, std::string prefix)
      : j_(object), origin_(origin), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw InputError(origin_ + ": field \"" + prefix_ + key + "\" " + why + ".");
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& at(const std::string& key) const {
    if (!has(key)) fail(key, "is missing");
    return j_.at(key);
  }
  int64_t integer(const std::string& key, int64_t min = 1) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, std::string("must be an integer, not ") + v.type_name());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) fail(key, "is too large");
    int64_t x = v.get<int64_t>();
    if (x < min) fail(key, "must be at least " + std::to_string(min) + ", not " + std::to_string(x));
    if (x > kMaxConfigInteger) {
      fail(key, "is " + std::to_string(x) + ", more than onecat supports (" + std::to_string(kMaxConfigInteger) + ")");
    }
    return x;
  }
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min = 1) const {
    return has(key) ? integer(key, min) : fallback;
  }
  double number(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number()) fail(key, std::string("must be a number, not ") + v.type_name());
    return v.get<double>();
  }
  double positive(const std::string& key) const {
    const double x = number(key);
    if (!(x > 0) || !std::isfinite(x)) fail(key, "must be a positive number, not " + at(key).dump());
    return x;
  }
  double positive_or(const std::string& key, double fallback) const { return has(key) ? positive(key) : fallback; }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, std::string("must be true or false, not ") + v.type_name());
    return v.get<bool>();
  }
  std::string string(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, std::string("must be a string, not ") + v.type_name());
    return v.get<std::string>();
  }
  const json& object(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_object()) fail(key, std::string("must be an object, not ") + v.type_name());
    return v;
  }

 private:
  const json& j_;
  const std::string& origin_;
  std::string prefix_;
};

json parse_json_object(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    throw InputError(origin + " is not valid JSON (" + e.what() + ").");
  }
  if (!j.is_object()) throw InputError(origin + " must hold a JSON object, not " + std::string(j.type_name()) + ".");
  return j;
}

int int4_group(const Fields& f) {
  int64_t g = f.integer("group_size", INT64_MIN);
  if (g != 32 && g != 64 && g != 128) {
    f.fail("group_size", "is " + std::to_string(g) + ", but onecat's int4 kernels take groups of 32, 64 or 128");
  }
  return int(g);
}

void require_bits(const Fields& f, int64_t want) {
  int64_t bits = f.integer("bits");
  if (bits != want) f.fail("bits", "is " + std::to_string(bits) + ", but only " + std::to_string(want) + "-bit weights are supported");
}

// llm-compressor's compressed-tensors config: every config group's weights one scheme, in a
// format whose tensors map onto one of onecat's weight formats. Activation schemes
// (input_activations: W8A8 FP8, W4A4 NVFP4) are not applied: Volta computes with fp16
// activations, which is the weights' exact product.
QuantConfig parse_compressed_tensors(const Fields& f, const std::string& origin) {
  if (f.has("quantization_status") && lower(f.string("quantization_status")) != "compressed") {
    f.fail("quantization_status", "is \"" + f.string("quantization_status") +
                                      "\", but only compressed checkpoints (their packed weights) are read");
  }
  const json& groups = f.object("config_groups");
  if (groups.empty()) f.fail("config_groups", "is empty");
  std::string format = f.has("format") ? lower(f.string("format")) : "";
  const json* weights = nullptr;
  std::string first;
  for (const auto& [name, group] : groups.items()) {
    const Fields g(group, origin, "quantization_config.config_groups." + name + ".");
    if (!group.is_object()) f.fail("config_groups." + name, "must be an object");
    if (g.has("format")) {
      const std::string gf = lower(g.string("format"));
      if (!format.empty() && gf != format && !(format == "mixed-precision")) {
        g.fail("format",
               "is \"" + gf + "\" where another group's is \"" + format + "\"; mixed schemes are not supported");
      }
      format = gf;
    }
    const json& w = g.object("weights");
    if (weights && w != *weights) {
      g.fail("weights", "differ from group " + first + "'s; onecat reads one weight scheme per checkpoint");
    }
    if (!weights) weights = &w, first = name;
  }
  if (format.empty()) f.fail("format", "is missing");
  const Fields w(*weights, origin, "quantization_config.config_groups." + first + ".weights.");
  const int64_t bits = w.integer("num_bits");
  const std::string type = lower(w.string("type"));
  const std::string strategy = w.has("strategy") ? lower(w.string("strategy")) : "";
  const bool symmetric = w.boolean_or("symmetric", true);
  QuantConfig c;
  if (format == "pack-quantized" && type == "int" && bits == 4) {
    if (strategy != "group") {
      w.fail("strategy", "is \"" + strategy + "\", but onecat's int4 kernels take groups of 32, 64 or 128");
    }
    const std::string actorder = w.has("actorder") ? lower(w.string("actorder")) : "";
    c = {QuantConfig::kGptq, 4, int4_group(w), actorder == "group", symmetric, 0, 0};
  } else if (format == "float-quantized" && type == "float" && bits == 8) {
    if (!symmetric) w.fail("symmetric", "is false, but FP8 weights have no zero point in onecat");
    if (strategy == "channel" || strategy == "tensor") {
      c = {QuantConfig::kFp8Block, 8, 0, false, true, 0, 0};  // a tensor's one scale, given to every row
    } else if (strategy == "block") {
      const json& b = w.at("block_structure");
      if (!b.is_array() || b.size() != 2 || b[0] != 128 || b[1] != 128) {
        w.fail("block_structure", "is " + b.dump() + ", but only [128, 128] blocks are supported for FP8");
      }
      c = {QuantConfig::kFp8Block, 8, 128, false, true, 128, 128};
    } else {
      w.fail("strategy", "is \"" + strategy + "\", but FP8 weights need channel, tensor or block scales");
    }
  } else if (format == "nvfp4-pack-quantized" && type == "float" && bits == 4) {
    if (w.integer_or("group_size", 16) != 16) w.fail("group_size", "must be 16 for NVFP4");
    c = {QuantConfig::kNvfp4, 4, 16, false, true, 0, 0};
  } else if (format == "mxfp4-pack-quantized" && type == "float" && bits == 4) {
    if (w.integer_or("group_size", 32) != 32) w.fail("group_size", "must be 32 for MXFP4");
    c = {QuantConfig::kMxfp4, 4, 32, false, true, 0, 0};
  } else {
    f.fail("format", "is \"" + format + "\" with " + std::to_string(bits) + "-bit " + type +
                         " weights, which onecat does not read (it reads pack-quantized 4-bit int, float-quantized "
                         "8-bit float, nvfp4-pack-quantized and mxfp4-pack-quantized)");
  }
  c.compressed_tensors = true;
  return c;
}

QuantConfig parse_quantization_config(const json& q, const std::string& origin) {
  Fields f(q, origin, "quantization_config.");
  const std::string method = lower(f.string("quant_method"));
  QuantConfig c;
  if (method == "compressed-tensors") {
    c = parse_compressed_tensors(f, origin);
  } else if (method == "awq") {
    require_bits(f, 4);
    c = {QuantConfig::kAwq, 4, int4_group(f), false, !f.boolean_or("zero_point", true), 0, 0};
    if (f.has("version") && lower(f.string("version")) != "gemm") {
      f.fail("version", "is \"" + f.string("version") + "\", but only AutoAWQ's GEMM packing is supported");
    }
  } else if (method == "gptq") {
    require_bits(f, 4);
    c = {QuantConfig::kGptq, 4, int4_group(f), f.boolean_or("desc_act", false), f.boolean_or("sym", true), 0, 0};
    if (f.has("checkpoint_format") && lower(f.string("checkpoint_format")) != "gptq") {
      f.fail("checkpoint_format", "is \"" + f.string("checkpoint_format") + "\", but only the gptq (v1) format is supported");
    }
  } else if (method == "fp8") {
    const json& b = f.at("weight_block_size");
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer()) {
      f.fail("weight_block_size", "must be a list of two integers [block_n, block_k]");
    }
    const int64_t bn = b[0].get<int64_t>(), bk = b[1].get<int64_t>();
    // [128, 128] is DeepSeek-V3's block (gemm format fp8b128); [32, 32] is gemm format fp8b32,
    // whose one exponent per 32×32 block the weight_scale_inv of such a checkpoint is exactly.
    // MXFP8's one scale per row and 32 columns ([1, 32]) has no onecat format: fp8b32 shares
    // one scale across 32 rows.
    if ((bn != 128 || bk != 128) && (bn != 32 || bk != 32)) {
      f.fail("weight_block_size", "is [" + std::to_string(bn) + ", " + std::to_string(bk) +
                                      "], but only [128, 128] and [32, 32] blocks are supported");
    }
    c = {QuantConfig::kFp8Block, 8, int(bk), false, true, int(bn), int(bk)};
    if (f.has("scale_fmt")) {
      const std::string fmt = lower(f.string("scale_fmt"));
      if (fmt != "ue8m0" && fmt != "float") {
        f.fail("scale_fmt", "is \"" + f.string("scale_fmt") +
                                "\", but only \"ue8m0\" (power-of-two scales) and \"float\" are supported");
      }
      c.ue8m0_scales = fmt == "ue8m0";
    }
    if (bn == 32 && !c.ue8m0_scales) {
      f.fail("weight_block_size",
             "is [32, 32] but scale_fmt is not \"ue8m0\", and onecat's block-32 format (fp8b32) holds only "
             "power-of-two (UE8M0) scales");
    }
  } else if (method == "fbgemm_fp8") {
    // FBGEMM FP8 (transformers' FbgemmFp8Config): E4M3 weights with one f32 scale per output row.
    c = {QuantConfig::kFp8Block, 8, 0, false, true, 0, 0};
  } else if (method == "modelopt") {
    const std::string algo = f.string("quant_algo");
    if (algo != "NVFP4") f.fail("quant_algo", "is \"" + algo + "\", but only NVFP4 is supported for ModelOpt checkpoints");
    if (f.has("group_size") && f.integer("group_size") != 16) f.fail("group_size", "must be 16 for NVFP4");
    c = {QuantConfig::kNvfp4, 4, 16, false, true, 0, 0};
  } else if (method == "mxfp4") {
    c = {QuantConfig::kMxfp4, 4, 32, false, true, 0, 0};
  } else {
    f.fail("quant_method", "is \"" + method +
                               "\", which onecat does not support (supported: awq, gptq, fp8, fbgemm_fp8, modelopt, "
                               "mxfp4, compressed-tensors)");
  }
  return c;
}

// Rotary embedding as transformers 5 standardises it (RotaryEmbeddingConfigMixin): the dict is
// rope_scaling when that is a non-empty object (transformers 4's name; version 5 lets it win),
// else rope_parameters (version 5's, which it writes); its rope_theta wins over the top-level
// one; the type is "rope_type" or the older "type"; llama3 and yarn take a top-level
// original_max_position_embeddings first (Phi-3 style), then the dict's, then
// max_position_embeddings. Fields the type does not use are ignored, as transformers does.
cpu::RopeParams parse_rope(const Fields& top, const std::string& origin, int64_t max_position, double default_theta) {
  using Scaling = cpu::RopeParams::Scaling;
  cpu::RopeParams r;
  r.theta = top.positive_or("rope_theta", default_theta);
  if (top.has("partial_rotary_factor") && top.number("partial_rotary_factor") != 1) {
    top.fail("partial_rotary_factor", "is not 1, and onecat rotates the whole head");
  }
  const bool scaling = top.has("rope_scaling") && !(top.at("rope_scaling").is_object() && top.at("rope_scaling").empty());
  const std::string key = scaling ? "rope_scaling" : "rope_parameters";
  if (!top.has(key)) return r;
  const Fields f(top.object(key), origin, key + ".");
  r.theta = f.positive_or("rope_theta", r.theta);
  if (f.has("partial_rotary_factor") && f.number("partial_rotary_factor") != 1) {
    f.fail("partial_rotary_factor", "is not 1, and onecat rotates the whole head");
  }
  const std::string type_key = f.has("rope_type") ? "rope_type" : "type";
  const std::string type = f.has(type_key) ? f.string(type_key) : "default";
  auto original_max_position = [&] {
    if (top.has("original_max_position_embeddings")) return top.integer("original_max_position_embeddings");
    if (f.has("original_max_position_embeddings")) return f.integer("original_max_position_embeddings");
    if (max_position <= 0) {
      f.fail("original_max_position_embeddings", "is missing, and so is max_position_embeddings, which " + type + " then uses");
    }
    return max_position;
  };
  if (type == "default") {
    r.scaling = Scaling::kNone;
  } else if (type == "linear") {
    r.scaling = Scaling::kLinear;
    r.factor = f.positive("factor");
  } else if (type == "llama3") {
    r.scaling = Scaling::kLlama3;
    r.factor = f.positive("factor");
    r.low_freq_factor = f.positive("low_freq_factor");
    r.high_freq_factor = f.positive("high_freq_factor");
    if (!(r.high_freq_factor > r.low_freq_factor)) {
      f.fail("high_freq_factor", "must be larger than low_freq_factor (llama3 interpolates between them)");
    }
    r.original_max_position = original_max_position();
  } else if (type == "yarn") {
    r.scaling = Scaling::kYarn;
    r.original_max_position = original_max_position();
    // transformers: a null factor is max_position_embeddings / original_max_position_embeddings.
    if (f.has("factor")) {
      r.factor = f.positive("factor");
    } else if (max_position > 0) {
      r.factor = double(max_position) / double(r.original_max_position);
    } else {
      f.fail("factor", "is missing, and so is max_position_embeddings, from which yarn would derive it");
    }
    r.beta_fast = f.positive_or("beta_fast", r.beta_fast);
    r.beta_slow = f.positive_or("beta_slow", r.beta_slow);
    r.attention_factor = f.positive_or("attention_factor", 0);
    r.mscale = f.positive_or("mscale", 0);
    r.mscale_all_dim = f.positive_or("mscale_all_dim", 0);
    r.truncate = f.boolean_or("truncate", true);
  } else {
    f.fail(type_key, "is \"" + type + "\", which onecat does not support (supported: default, linear, llama3, yarn)");
  }
  return r;
}

ModelConfig load_config_file(const std::filesystem::path& config_path, const std::string& name) {
  ModelConfig m = parse_model_config(read_file(config_path), config_path.string());
  m.name = name;
  const std::filesystem::path hf_quant = config_path.parent_path() / "hf_quant_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(hf_quant, ec)) {
    QuantConfig q = parse_hf_quant_config(read_file(hf_quant), hf_quant.string());
    if (q.method != QuantConfig::kNone) {
      if (m.quant.method != QuantConfig::kNone && m.quant.method != q.method) {
        throw InputError(hf_quant.string() + ": field \"quantization.quant_algo\" says " +
                         std::string(quant_method_name(q.method)) + " but " + config_path.string() +
                         " says " + std::string(quant_method_name(m.quant.method)) + "; remove the stale one.");
      }
      m.quant = q;
    }
  }
  return m;
}

}  // namespace

std::string_view quant_method_name(QuantConfig::Method method) {
  switch (method) {
    case QuantConfig::kNone: return "none";
    case QuantConfig::kAwq: return "awq";
    case QuantConfig::kGptq: return "gptq";
    case QuantConfig::kFp8Block: return "fp8";
    case QuantConfig::kNvfp4: return "nvfp4";
    case QuantConfig::kMxfp4: return "mxfp4";
  }
  return "none";
}

// vLLM's --quantization names for what the checkpoint declares; a name that asks for another
// method (or none the checkpoint has) is refused, since onecat never converts a checkpoint.
void check_quantization(const std::string& given, const ModelConfig& config, const std::string& dir) {
  if (given.empty()) return;
  static const std::pair<const char*, QuantConfig::Method> kNames[] = {
      {"awq", QuantConfig::kAwq},          {"awq_marlin", QuantConfig::kAwq}, {"gptq", QuantConfig::kGptq},
      {"gptq_marlin", QuantConfig::kGptq}, {"fp8", QuantConfig::kFp8Block},   {"modelopt_fp4", QuantConfig::kNvfp4},
      {"nvfp4", QuantConfig::kNvfp4},      {"mxfp4", QuantConfig::kMxfp4},    {"none", QuantConfig::kNone}};
  const std::string_view declared = quant_method_name(config.quant.method);
  if (given == "compressed-tensors") {  // vLLM's name for llm-compressor's checkpoints, whatever their scheme
    if (config.quant.compressed_tensors) return;
    throw InputError("quantization compressed-tensors, but " + dir + " declares " + std::string(declared) +
                     " (onecat takes the method from the checkpoint and converts nothing).");
  }
  for (const auto& [name, method] : kNames) {
    if (given != name) continue;
    if (method == config.quant.method) return;
    throw InputError("quantization " + given + ", but " + dir + " declares " + std::string(declared) +
                     " (onecat takes the method from the checkpoint and converts nothing).");
  }
  throw InputError(
      "quantization must be one of awq, awq_marlin, gptq, gptq_marlin, fp8, modelopt_fp4, nvfp4, "
      "mxfp4, compressed-tensors or none (what the checkpoint declares: " +
      std::string(declared) + "), not " + quoted_input(given) + ".");
}

float ModelConfig::attention_scale() const {
  return float(attention_multiplier > 0 ? attention_multiplier : 1.0 / std::sqrt(double(head_dim)));
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  const json j = parse_json_object(json_text, origin);
  Fields f(j, origin, "");
  ModelConfig m;
  m.name = j.contains("_name_or_path") && j["_name_or_path"].is_string() && !j["_name_or_path"].get<std::string>().empty()
               ? j["_name_or_path"].get<std::string>()
               : origin;

  const json& archs = f.at("architectures");
  if (!archs.is_array() || archs.empty()) f.fail("architectures", "must be a non-empty list of strings");
  std::vector<std::string> given;
  for (const json& a : archs) {
    if (!a.is_string()) f.fail("architectures", "must be a non-empty list of strings");
    given.push_back(a.get<std::string>());
  }
  for (const auto& a : given) {
    if (std::find(kArchitectures.begin(), kArchitectures.end(), a) != kArchitectures.end()) {
      m.architecture = a;
      break;
    }
  }
  if (m.architecture.empty()) {
    f.fail("architectures", "is [" + join(given) + "], none of which onecat supports (supported: " + join(kArchitectures) + ")");
  }

  m.hidden = f.integer("hidden_size");
  m.intermediate = f.integer("intermediate_size");
  m.layers = f.integer("num_hidden_layers");
  m.heads = f.integer("num_attention_heads");
  m.kv_heads = f.integer_or("num_key_value_heads", m.heads);
  m.vocab = f.integer("vocab_size");
  m.rms_norm_eps = f.number("rms_norm_eps");
  if (!(m.rms_norm_eps > 0)) f.fail("rms_norm_eps", "must be positive");
  if (f.has("head_dim")) {
    m.head_dim = f.integer("head_dim");
  } else {
    if (m.hidden % m.heads != 0) {
      f.fail("head_dim", "is missing and hidden_size " + std::to_string(m.hidden) + " is not a multiple of num_attention_heads " +
                             std::to_string(m.heads));
    }
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0) {
    f.fail("num_key_value_heads", "is " + std::to_string(m.kv_heads) + ", which does not divide num_attention_heads " +
                                      std::to_string(m.heads));
  }
  m.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);

  const std::string& a = m.architecture;
  m.qk_norm = a == "Qwen3ForCausalLM" || a == "Qwen3MoeForCausalLM";
  // Qwen2 always has q/k/v biases (its config has no attention_bias field); Phi-3 never has
  // any (Phi-4's config says attention_bias false, and transformers' Phi3 reads no such field);
  // the others say so.
  m.attention_bias = a == "Qwen2ForCausalLM"      ? true
                     : a == "Qwen2MoeForCausalLM" ? f.boolean_or("qkv_bias", true)
                     : a == "Phi3ForCausalLM"     ? false
                                                  : f.boolean_or("attention_bias", false);
  // Qwen2/Qwen3 with use_sliding_window: layers from max_window_layers on (Hugging Face's
  // default 28) see only the last sliding_window keys. The plan takes one window for every layer.
  if (a == "MistralForCausalLM" || a == "MixtralForCausalLM" || a == "Phi3ForCausalLM") {
    // Mistral, Mixtral and Phi-3 window every layer whenever sliding_window is set (null since
    // Mistral v0.2 and in Phi-4; 2047 in Phi-3-mini-4k).
    m.sliding_window = f.integer_or("sliding_window", 0, 1);
  } else if (a != "LlamaForCausalLM" && f.boolean_or("use_sliding_window", false)) {
    const int64_t first = f.integer_or("max_window_layers", 28, 0);
    if (first == 0) {
      m.sliding_window = f.integer("sliding_window");
    } else if (first < m.layers) {
      f.fail("max_window_layers", "is " + std::to_string(first) + ", so only layers " + std::to_string(first) + " to " +
                                      std::to_string(m.layers - 1) +
                                      " use the sliding window, which onecat does not support (one window for every layer)");
    }
  }
  m.max_position_embeddings = f.integer_or("max_position_embeddings", 0);
  // θ where the config gives none: transformers' default for the architecture (MixtralConfig's
  // 1e6; the others' 10000).
  m.rope = parse_rope(f, origin, m.max_position_embeddings, a == "MixtralForCausalLM" ? 1e6 : cpu::RopeParams().theta);
  if ((a == "LlamaForCausalLM" || a == "GraniteForCausalLM") && f.boolean_or("mlp_bias", false)) {
    f.fail("mlp_bias", "is true, which onecat does not support");
  }
  if (a == "GraniteForCausalLM") {  // transformers' GraniteConfig defaults: 1 each
    m.embedding_multiplier = f.positive_or("embedding_multiplier", 1);
    m.residual_multiplier = f.positive_or("residual_multiplier", 1);
    m.logits_scaling = f.positive_or("logits_scaling", 1);
    m.attention_multiplier = f.positive_or("attention_multiplier", 1);
  }
  const bool qwen_moe = a == "Qwen3MoeForCausalLM" || a == "Qwen2MoeForCausalLM", mixtral = a == "MixtralForCausalLM";
  if (qwen_moe || mixtral) {
    // Mixtral names the expert count num_local_experts; so does transformers 5's save_pretrained
    // (its attribute map's name) where Qwen's published config.json has num_experts.
    const std::string count =
        mixtral || (!f.has("num_experts") && f.has("num_local_experts")) ? "num_local_experts" : "num_experts";
    m.experts = f.integer(count);
    m.experts_per_token = f.integer("num_experts_per_tok");
    if (m.experts_per_token > m.experts) f.fail("num_experts_per_tok", "is larger than " + count);
  }
  if (mixtral) {
    // Every layer sparse: MLPs of intermediate_size, the top num_experts_per_tok of a softmax
    // router renormalised (MixtralSparseMoeBlock always divides by their sum).
    m.moe_intermediate = m.intermediate;
    m.norm_topk_prob = true;
  }
  if (qwen_moe) {
    m.moe_intermediate = f.integer("moe_intermediate_size");
    m.norm_topk_prob = f.boolean_or("norm_topk_prob", false);
    // Qwen2-MoE: every MoE layer also runs a shared expert, gated by sigmoid(x · shared_expert_gate).
    if (a == "Qwen2MoeForCausalLM") m.shared_intermediate = f.integer("shared_expert_intermediate_size");
    if (f.integer_or("decoder_sparse_step", 1) != 1) f.fail("decoder_sparse_step", "must be 1 (every layer a MoE layer)");
    if (f.has("mlp_only_layers")) {
      const json& dense = f.at("mlp_only_layers");
      if (!dense.is_array() || !dense.empty()) f.fail("mlp_only_layers", "must be empty (dense layers in a MoE model are not supported)");
    }
  }

  if (f.has("quantization_config")) m.quant = parse_quantization_config(f.object("quantization_config"), origin);
  return m;
}

QuantConfig parse_hf_quant_config(const std::string& json_text, const std::string& origin) {
  const json j = parse_json_object(json_text, origin);
  Fields top(j, origin, "");
  Fields f(top.object("quantization"), origin, "quantization.");
  if (!f.has("quant_algo")) return {};  // ModelOpt writes null when only the KV cache is quantised
  const std::string algo = f.string("quant_algo");
  if (algo != "NVFP4") f.fail("quant_algo", "is \"" + algo + "\", but only NVFP4 is supported for ModelOpt checkpoints");
  if (f.has("group_size") && f.integer("group_size") != 16) f.fail("group_size", "must be 16 for NVFP4");
  return {QuantConfig::kNvfp4, 4, 16, false, true, 0, 0};
}

ModelConfig load_model(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(model);
  if (fs::is_directory(p, ec)) {
    const fs::path config = p / "config.json";
    if (!fs::is_regular_file(config, ec)) {
      throw InputError("directory " + model + " has no config.json; pass a Hugging Face checkpoint directory.");
    }
    fs::path canonical = fs::weakly_canonical(p, ec);
    return load_config_file(config, (ec ? p : canonical).filename().string());
  }
  if (fs::is_regular_file(p, ec)) {
    fs::path dir = fs::weakly_canonical(p, ec).parent_path();
    return load_config_file(p, ec ? p.string() : dir.filename().string());
  }
  const auto names = builtin_model_names();
  if (std::find(names.begin(), names.end(), model) != names.end()) return builtin_model(model);
  throw InputError("model " + quoted_input(model) + " is neither a checkpoint directory, a config.json nor a built-in model (built-in: " +
                   join(names) + ").");
}

}  // namespace onecat::models
