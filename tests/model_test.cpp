// Model config parsing (config.json, quantization_config, hf_quant_config.json), the built-in
// configs, load_model, and per-rank kernel plans under tensor parallelism.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "codegen/family.h"
#include "models/config.h"
#include "models/plan.h"
#include "test_util.h"

namespace onecat::models {
namespace {

using nlohmann::json;
using test::expect_throw;

// Qwen/Qwen3-8B's config.json (abridged to what onecat reads, plus a few it ignores).
json qwen3_8b_json() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936})");
}

// Qwen/Qwen2.5-7B's config.json: no head_dim, no attention_bias field (Qwen2 always has q/k/v bias).
json qwen25_7b_json() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944, "model_type": "qwen2",
    "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "tie_word_embeddings": false, "vocab_size": 152064})");
}

ModelConfig parse(const json& j) { return parse_model_config(j.dump(), "/ckpt/config.json"); }

QuantConfig parse_quant(const json& q) {
  json j = qwen3_8b_json();
  j["quantization_config"] = q;
  return parse(j).quant;
}

std::string parse_error(const json& j, std::initializer_list<std::string_view> needles) {
  return expect_throw<InputError>([&] { parse(j); }, needles);
}

std::string quant_error(const json& q, std::initializer_list<std::string_view> needles) {
  json j = qwen3_8b_json();
  j["quantization_config"] = q;
  return parse_error(j, needles);
}

const PlannedOp& op(const std::vector<PlannedOp>& plan, const std::string& name) {
  auto it = std::find_if(plan.begin(), plan.end(), [&](const PlannedOp& o) { return o.name == name; });
  if (it == plan.end()) throw std::runtime_error("plan has no op " + name);
  return *it;
}

bool has_op(const std::vector<PlannedOp>& plan, const std::string& name) {
  return std::any_of(plan.begin(), plan.end(), [&](const PlannedOp& o) { return o.name == name; });
}

std::string spec_of(const std::vector<PlannedOp>& plan, const std::string& name) {
  const PlannedOp& o = op(plan, name);
  EXPECT_TRUE(o.spec.has_value()) << name;
  return o.spec.value_or("");
}

// ---------------------------------------------------------------------------------------------
// config.json

TEST(ModelConfig, ParsesQwen3) {
  ModelConfig m = parse(qwen3_8b_json());
  EXPECT_EQ(m.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.intermediate, 12288);
  EXPECT_EQ(m.layers, 36);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab, 151936);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-6);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_FALSE(m.is_moe());
  EXPECT_EQ(m.quant.method, QuantConfig::kNone);
  EXPECT_EQ(m.quant.bits, 16);
}

TEST(ModelConfig, Qwen2DefaultsHeadDimAndHasBias) {
  ModelConfig m = parse(qwen25_7b_json());
  EXPECT_EQ(m.head_dim, 3584 / 28);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_FALSE(m.qk_norm);
}

TEST(ModelConfig, KvHeadsDefaultToHeads) {
  json j = qwen3_8b_json();
  j.erase("num_key_value_heads");
  EXPECT_EQ(parse(j).kv_heads, 32);
}

TEST(ModelConfig, ParsesQwen3Moe) {
  json j = qwen3_8b_json();
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["num_experts"] = 128;
  j["num_experts_per_tok"] = 8;
  j["moe_intermediate_size"] = 768;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = json::array();
  ModelConfig m = parse(j);
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.experts, 128);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate, 768);
  EXPECT_FALSE(m.norm_topk_prob);  // transformers' default
  j["norm_topk_prob"] = true;
  EXPECT_TRUE(parse(j).norm_topk_prob);
  j.erase("moe_intermediate_size");
  parse_error(j, {"/ckpt/config.json", "\"moe_intermediate_size\"", "missing"});
  j["moe_intermediate_size"] = 768;
  j["mlp_only_layers"] = {0, 1};
  parse_error(j, {"/ckpt/config.json", "\"mlp_only_layers\""});
  // transformers 5's save_pretrained names the expert count num_local_experts.
  j["mlp_only_layers"] = json::array();
  j.erase("num_experts");
  j["num_local_experts"] = 64;
  EXPECT_EQ(parse(j).experts, 64);
  j.erase("num_local_experts");
  parse_error(j, {"/ckpt/config.json", "\"num_experts\"", "missing"});
}

// Qwen1.5-MoE-A2.7B's config.json (Qwen2MoeForCausalLM): Qwen2's q/k/v biases (qkv_bias), 60
// experts, 4 per token, not renormalised, a shared expert of 5632 behind a sigmoid gate.
json qwen15_moe_json() {
  return json{{"architectures", {"Qwen2MoeForCausalLM"}},
              {"hidden_size", 2048},
              {"intermediate_size", 5632},
              {"num_hidden_layers", 24},
              {"num_attention_heads", 16},
              {"num_key_value_heads", 16},
              {"vocab_size", 151936},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 1000000.0},
              {"max_position_embeddings", 8192},
              {"num_experts", 60},
              {"num_experts_per_tok", 4},
              {"moe_intermediate_size", 1408},
              {"shared_expert_intermediate_size", 5632},
              {"norm_topk_prob", false},
              {"decoder_sparse_step", 1},
              {"mlp_only_layers", json::array()},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"}};
}

TEST(ModelConfig, ParsesQwen2MoeWithItsSharedExpert) {
  json j = qwen15_moe_json();
  const ModelConfig m = parse(j);
  EXPECT_TRUE(m.is_moe());
  EXPECT_TRUE(m.has_shared_expert());
  EXPECT_EQ(m.shared_intermediate, 5632);
  EXPECT_EQ(m.experts, 60);
  EXPECT_TRUE(m.attention_bias);  // qkv_bias defaults to true
  EXPECT_FALSE(m.qk_norm);
  j["qkv_bias"] = false;
  EXPECT_FALSE(parse(j).attention_bias);
  j.erase("shared_expert_intermediate_size");
  parse_error(j, {"/ckpt/config.json", "\"shared_expert_intermediate_size\"", "missing"});
  // Qwen3-MoE has no shared expert.
  json q = qwen3_8b_json();
  q["architectures"] = {"Qwen3MoeForCausalLM"};
  q["num_experts"] = 128, q["num_experts_per_tok"] = 8, q["moe_intermediate_size"] = 768;
  EXPECT_FALSE(parse(q).has_shared_expert());
}

TEST(PlanModel, Qwen2MoeRunsItsSharedExpertAndGatesItInCombine) {
  const auto plan = plan_model(parse(qwen15_moe_json()), 1);
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=6144,k=2048,fmt=f16,group=0,out=f16,epi=bias,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_route"), "moe:op=route,experts=60,topk=4,norm=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_shared_gate_up"),
            "gemm:n=11264,k=2048,fmt=f16,group=0,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_shared_down"), "gemm:n=2048,k=5632,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_shared_gate"), "gemm:n=1,k=2048,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_combine"), "moe:op=combine,topk=4,hidden=2048,shared=gated");
  EXPECT_EQ(op(plan, "layers.moe_combine").count_per_rank, 24);
  EXPECT_FALSE(has_op(plan, "layers.moe_decode"));  // f16 experts: the four ops at every step
}

// Mixtral-8x7B-v0.1's config.json: Mistral's attention, 8 experts of intermediate_size 14336 in
// every layer, 2 per token, always renormalised; rope_theta 1e6 (also MixtralConfig's default).
json mixtral_json() {
  return json{{"architectures", {"MixtralForCausalLM"}},
              {"hidden_size", 4096},
              {"intermediate_size", 14336},
              {"num_hidden_layers", 32},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 8},
              {"vocab_size", 32000},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 1000000.0},
              {"max_position_embeddings", 32768},
              {"num_local_experts", 8},
              {"num_experts_per_tok", 2},
              {"sliding_window", nullptr},
              {"router_aux_loss_coef", 0.02},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"}};
}

TEST(ModelConfig, ParsesMixtral) {
  json j = mixtral_json();
  const ModelConfig m = parse(j);
  EXPECT_TRUE(m.is_moe());
  EXPECT_FALSE(m.has_shared_expert());
  EXPECT_EQ(m.experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.moe_intermediate, 14336);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_EQ(m.rope.theta, 1e6);
  j.erase("rope_theta");
  EXPECT_EQ(parse(j).rope.theta, 1e6);  // transformers' MixtralConfig default
  j["sliding_window"] = 4096;
  EXPECT_EQ(parse(j).sliding_window, 4096);
  j["num_experts_per_tok"] = 9;
  parse_error(j, {"/ckpt/config.json", "\"num_experts_per_tok\"", "num_local_experts"});
  j = mixtral_json();
  j.erase("num_local_experts");
  parse_error(j, {"/ckpt/config.json", "\"num_local_experts\"", "missing"});

  const auto plan = plan_model(parse(mixtral_json()), 1);
  EXPECT_EQ(spec_of(plan, "layers.moe_route"), "moe:op=route,experts=8,topk=2,norm=1");
}

// microsoft/phi-4's config.json (Phi3ForCausalLM at 14B).
json phi4_json() {
  return json{{"architectures", {"Phi3ForCausalLM"}},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"bos_token_id", 100257},
              {"embd_pdrop", 0.0},
              {"eos_token_id", 100265},
              {"hidden_act", "silu"},
              {"hidden_size", 5120},
              {"initializer_range", 0.02},
              {"intermediate_size", 17920},
              {"max_position_embeddings", 16384},
              {"model_type", "phi3"},
              {"num_attention_heads", 40},
              {"num_hidden_layers", 40},
              {"num_key_value_heads", 10},
              {"original_max_position_embeddings", 16384},
              {"pad_token_id", 100349},
              {"resid_pdrop", 0.0},
              {"rms_norm_eps", 1e-05},
              {"rope_scaling", nullptr},
              {"rope_theta", 250000},
              {"sliding_window", nullptr},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"},
              {"vocab_size", 100352}};
}

TEST(ModelConfig, ParsesPhi3) {
  json j = phi4_json();
  const ModelConfig m = parse(j);
  EXPECT_EQ(m.architecture, "Phi3ForCausalLM");
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.kv_heads, 10);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_FALSE(m.is_moe());
  EXPECT_EQ(m.sliding_window, 0);
  EXPECT_EQ(m.rope.theta, 250000);
  EXPECT_EQ(m.rope.scaling, cpu::RopeParams::Scaling::kNone);
  j["attention_bias"] = true;  // transformers' Phi3 has no biases whatever the field says
  EXPECT_FALSE(parse(j).attention_bias);
  // Phi-3-mini-4k windows every layer (2047), as transformers does whenever sliding_window is set.
  j = phi4_json();
  j["sliding_window"] = 2047;
  EXPECT_EQ(parse(j).sliding_window, 2047);
  // Phi-4-mini: rotary over 3/4 of the head, LongRoPE — neither is done: one sentence each.
  j = phi4_json();
  j["partial_rotary_factor"] = 0.75;
  parse_error(j, {"/ckpt/config.json", "partial_rotary_factor"});
  j = phi4_json();
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", json::array()}, {"long_factor", json::array()}};
  parse_error(j, {"/ckpt/config.json", "longrope"});

  const ModelConfig builtin = builtin_model("phi-4");
  EXPECT_EQ(builtin.architecture, m.architecture);
  EXPECT_EQ(builtin.hidden, m.hidden);
  EXPECT_EQ(builtin.intermediate, m.intermediate);
  EXPECT_EQ(builtin.layers, m.layers);
  EXPECT_EQ(builtin.heads, m.heads);
  EXPECT_EQ(builtin.kv_heads, m.kv_heads);
  EXPECT_EQ(builtin.vocab, m.vocab);
  EXPECT_EQ(builtin.rope.theta, m.rope.theta);
  EXPECT_EQ(builtin.rms_norm_eps, m.rms_norm_eps);
  EXPECT_EQ(builtin.max_position_embeddings, m.max_position_embeddings);
}

TEST(ModelBuiltin, Qwen25MatchesItsConfig) {
  json j = qwen25_7b_json();
  j["rope_theta"] = 1000000.0;
  j["max_position_embeddings"] = 32768;
  const ModelConfig published = parse(j), builtin = builtin_model("qwen2.5-7b");
  for (auto [a, b] : {std::pair{builtin.hidden, published.hidden},
                      {builtin.intermediate, published.intermediate},
                      {builtin.layers, published.layers},
                      {builtin.heads, published.heads},
                      {builtin.kv_heads, published.kv_heads},
                      {builtin.head_dim, published.head_dim},
                      {builtin.vocab, published.vocab},
                      {builtin.max_position_embeddings, published.max_position_embeddings}}) {
    EXPECT_EQ(a, b);
  }
  EXPECT_EQ(builtin.attention_bias, published.attention_bias);
  EXPECT_EQ(builtin.tie_word_embeddings, published.tie_word_embeddings);
  EXPECT_EQ(builtin.rope.theta, published.rope.theta);
  EXPECT_EQ(builtin.rms_norm_eps, published.rms_norm_eps);
  EXPECT_EQ(builtin.architecture, published.architecture);
  // Its attention is issue 27's GQA-7 decode: the plan asks for 28/4 heads.
  EXPECT_EQ(spec_of(plan_model(builtin, 1), "layers.attention_decode"),
            "attention:op=decode,heads=28,kv_heads=4,dim=128,page=16,kv=f16,kv_scale=none,window=0");
}

// ibm-granite/granite-3.1-8b-instruct's config.json, the fields onecat reads.
json granite_json() {
  return json{{"architectures", {"GraniteForCausalLM"}},
              {"attention_bias", false},
              {"attention_multiplier", 0.0078125},
              {"embedding_multiplier", 12.0},
              {"hidden_act", "silu"},
              {"hidden_size", 4096},
              {"intermediate_size", 12800},
              {"logits_scaling", 16.0},
              {"max_position_embeddings", 131072},
              {"mlp_bias", false},
              {"model_type", "granite"},
              {"num_attention_heads", 32},
              {"num_hidden_layers", 40},
              {"num_key_value_heads", 8},
              {"residual_multiplier", 0.22},
              {"rms_norm_eps", 1e-05},
              {"rope_scaling", nullptr},
              {"rope_theta", 10000000.0},
              {"tie_word_embeddings", true},
              {"vocab_size", 49155}};
}

TEST(ModelConfig, ParsesGranite) {
  json j = granite_json();
  const ModelConfig m = parse(j);
  EXPECT_EQ(m.architecture, "GraniteForCausalLM");
  EXPECT_EQ(m.embedding_multiplier, 12.0);
  EXPECT_EQ(m.residual_multiplier, 0.22);
  EXPECT_EQ(m.logits_scaling, 16.0);
  EXPECT_EQ(m.attention_scale(), 0.0078125f);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(m.vocab, 49155);
  // transformers' GraniteConfig defaults each multiplier to 1, the attention scale included.
  for (const char* key : {"attention_multiplier", "embedding_multiplier", "logits_scaling", "residual_multiplier"}) {
    j.erase(key);
  }
  const ModelConfig plain = parse(j);
  EXPECT_EQ(plain.attention_scale(), 1.0f);
  EXPECT_EQ(plain.embedding_multiplier, 1.0);
  // The others keep 1/√head_dim.
  EXPECT_EQ(parse(qwen3_8b_json()).attention_scale(), float(1 / std::sqrt(128.0)));
  j = granite_json();
  j["residual_multiplier"] = 0;
  parse_error(j, {"/ckpt/config.json", "\"residual_multiplier\"", "positive"});
  j = granite_json();
  j["mlp_bias"] = true;
  parse_error(j, {"\"mlp_bias\"", "not support"});
}

// llm-compressor's compressed-tensors configs as RedHatAI's checkpoints carry them (W4A16,
// FP8_DYNAMIC, FP8 block, NVFP4), mapped onto onecat's formats; what has no format is one sentence.
json ct_config(const json& weights, const std::string& format, const json& input_activations = nullptr) {
  return json{{"quant_method", "compressed-tensors"},
              {"format", format},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights", weights},
                  {"input_activations", input_activations},
                  {"output_activations", nullptr}}}}},
              {"ignore", {"lm_head"}},
              {"kv_cache_scheme", nullptr}};
}

TEST(ModelConfig, ParsesCompressedTensors) {
  const json w4a16 = {{"num_bits", 4},       {"type", "int"},        {"symmetric", true},
                      {"strategy", "group"}, {"group_size", 128},    {"actorder", nullptr},
                      {"dynamic", false},    {"observer", "minmax"}, {"block_structure", nullptr}};
  QuantConfig c = parse_quant(ct_config(w4a16, "pack-quantized"));
  EXPECT_EQ(c, (QuantConfig{QuantConfig::kGptq, 4, 128, false, true, 0, 0, false, true}));
  json asym = w4a16;
  asym["symmetric"] = false, asym["actorder"] = "group", asym["group_size"] = 64;
  c = parse_quant(ct_config(asym, "pack-quantized"));
  EXPECT_EQ(c, (QuantConfig{QuantConfig::kGptq, 4, 64, true, false, 0, 0, false, true}));

  const json fp8 = {
      {"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "channel"}, {"dynamic", false}};
  const json dynamic_tokens = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}};
  c = parse_quant(ct_config(fp8, "float-quantized", dynamic_tokens));
  EXPECT_EQ(c, (QuantConfig{QuantConfig::kFp8Block, 8, 0, false, true, 0, 0, false, true}));
  json block = fp8;
  block["strategy"] = "block", block["block_structure"] = {128, 128};
  c = parse_quant(ct_config(block, "float-quantized"));
  EXPECT_EQ(c, (QuantConfig{QuantConfig::kFp8Block, 8, 128, false, true, 128, 128, false, true}));
  const json nvfp4 = {
      {"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"strategy", "tensor_group"}, {"group_size", 16}};
  EXPECT_EQ(parse_quant(ct_config(nvfp4, "nvfp4-pack-quantized")).method, QuantConfig::kNvfp4);
  EXPECT_TRUE(parse_quant(ct_config(nvfp4, "nvfp4-pack-quantized")).compressed_tensors);

  auto refused = [](const json& q, std::initializer_list<std::string_view> says) {
    json j = qwen3_8b_json();
    j["quantization_config"] = q;
    parse_error(j, says);
  };
  const json int8 = {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "channel"}};
  refused(ct_config(int8, "int-quantized"),
          {"/ckpt/config.json", "\"quantization_config.format\"", "int-quantized", "8-bit int"});
  json channel = w4a16;
  channel["strategy"] = "channel";
  refused(ct_config(channel, "pack-quantized"), {"config_groups.group_0.weights.strategy", "channel"});
  json two = ct_config(w4a16, "pack-quantized");
  two["config_groups"]["group_1"] = two["config_groups"]["group_0"];
  two["config_groups"]["group_1"]["weights"]["group_size"] = 32;
  refused(two, {"config_groups.group_1.weights", "one weight scheme"});
  json frozen = ct_config(w4a16, "pack-quantized");
  frozen["quantization_status"] = "frozen";
  refused(frozen, {"quantization_status", "frozen"});
  json bad_block = block;
  bad_block["block_structure"] = {64, 64};
  refused(ct_config(bad_block, "float-quantized"), {"block_structure", "[128, 128]"});

  // vLLM's --quantization compressed-tensors names the library, not the scheme.
  json j = qwen3_8b_json();
  j["quantization_config"] = ct_config(w4a16, "pack-quantized");
  const ModelConfig m = parse(j);
  EXPECT_NO_THROW(check_quantization("compressed-tensors", m, "/ckpt"));
  EXPECT_NO_THROW(check_quantization("gptq", m, "/ckpt"));
  expect_throw<InputError>([] { check_quantization("compressed-tensors", parse(qwen3_8b_json()), "/ckpt"); },
                           {"compressed-tensors", "/ckpt", "none"});
}

TEST(ModelConfig, RejectsMalformedFields) {
  json j = qwen3_8b_json();
  j.erase("hidden_size");
  parse_error(j, {"/ckpt/config.json", "\"hidden_size\"", "missing"});

  j = qwen3_8b_json();
  j["num_hidden_layers"] = "36";
  parse_error(j, {"/ckpt/config.json", "\"num_hidden_layers\"", "integer", "string"});

  j = qwen3_8b_json();
  j["hidden_size"] = 4096.5;
  parse_error(j, {"\"hidden_size\"", "integer"});

  j = qwen3_8b_json();
  j["num_attention_heads"] = 0;
  parse_error(j, {"\"num_attention_heads\"", "at least 1"});

  // Sizes past 2^24 are refused: head_dim 2^63 − 1 overflowed heads × head_dim in the loader.
  j = qwen3_8b_json();
  j["head_dim"] = int64_t(9223372036854775807);
  parse_error(j, {"\"head_dim\"", "is 9223372036854775807, more than onecat supports (16777216)"});

  j = qwen3_8b_json();
  j["rms_norm_eps"] = "1e-6";
  parse_error(j, {"\"rms_norm_eps\"", "number"});

  j = qwen3_8b_json();
  j["tie_word_embeddings"] = 1;
  parse_error(j, {"\"tie_word_embeddings\"", "true or false"});

  j = qwen3_8b_json();
  j["num_key_value_heads"] = 5;
  parse_error(j, {"\"num_key_value_heads\"", "does not divide"});

  j = qwen3_8b_json();
  j["architectures"] = {"GPTNeoXForCausalLM"};
  parse_error(j, {"/ckpt/config.json", "\"architectures\"", "GPTNeoXForCausalLM", "Qwen3MoeForCausalLM"});

  j = qwen3_8b_json();
  j.erase("architectures");
  parse_error(j, {"\"architectures\"", "missing"});

  expect_throw<InputError>([] { parse_model_config("{\"hidden_size\": ", "/x/config.json"); }, {"/x/config.json", "not valid JSON"});
  expect_throw<InputError>([] { parse_model_config("[1, 2]", "/x/config.json"); }, {"/x/config.json", "object"});
  // A number past a double's range is nlohmann's out_of_range, not parse_error (it escaped: abort).
  expect_throw<InputError>([] { parse_model_config("{\"rms_norm_eps\": 1e400}", "/x/config.json"); },
                           {"/x/config.json", "not valid JSON"});
}

// ---------------------------------------------------------------------------------------------
// Rotary embedding: rope_theta + rope_scaling (transformers 4) or rope_parameters (transformers 5)

using Scaling = cpu::RopeParams::Scaling;

TEST(ModelRope, DefaultAndTheta) {
  ModelConfig m = parse(qwen3_8b_json());
  EXPECT_EQ(m.rope.scaling, Scaling::kNone);
  EXPECT_EQ(m.rope.theta, 1e6);
  EXPECT_EQ(m.max_position_embeddings, 40960);
  // No rope_theta: transformers' default for these architectures.
  json j = qwen25_7b_json();
  EXPECT_EQ(parse(j).rope.theta, 10000);
  EXPECT_EQ(parse(j).max_position_embeddings, 0);
  j["rope_scaling"] = nullptr;  // what Qwen's configs write
  j["rope_theta"] = 1234.5;
  EXPECT_EQ(parse(j).rope.scaling, Scaling::kNone);
  EXPECT_EQ(parse(j).rope.theta, 1234.5);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse(j).rope.scaling, Scaling::kNone);
}

TEST(ModelRope, Llama3) {
  // meta-llama/Llama-3.1-8B's
  json j = qwen3_8b_json();
  j["architectures"] = {"LlamaForCausalLM"};
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192},
                       {"rope_type", "llama3"}};
  const cpu::RopeParams r = parse(j).rope;
  EXPECT_EQ(r.scaling, Scaling::kLlama3);
  EXPECT_EQ(std::tuple(r.theta, r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position),
            std::tuple(500000.0, 8.0, 1.0, 4.0, int64_t(8192)));
  EXPECT_EQ(builtin_model("llama-3.1-8b").rope.scaling, Scaling::kLlama3);
  EXPECT_EQ(builtin_model("llama-3.1-8b").rope.original_max_position, 8192);

  // transformers 5 takes a top-level original_max_position_embeddings first (Phi-3 style), and
  // max_position_embeddings when neither says.
  j["original_max_position_embeddings"] = 4096;
  EXPECT_EQ(parse(j).rope.original_max_position, 4096);
  j.erase("original_max_position_embeddings");
  j["rope_scaling"].erase("original_max_position_embeddings");
  EXPECT_EQ(parse(j).rope.original_max_position, 40960);
  j.erase("max_position_embeddings");
  parse_error(j, {"/ckpt/config.json", "\"rope_scaling.original_max_position_embeddings\"", "missing",
                  "max_position_embeddings"});
  j["rope_scaling"]["original_max_position_embeddings"] = 8192;
  j["rope_scaling"]["high_freq_factor"] = 1.0;
  parse_error(j, {"\"rope_scaling.high_freq_factor\"", "larger than low_freq_factor"});
}

TEST(ModelRope, LinearWithTheOldTypeKey) {
  json j = qwen3_8b_json();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const cpu::RopeParams r = parse(j).rope;
  EXPECT_EQ(r.scaling, Scaling::kLinear);
  EXPECT_EQ(r.factor, 2.0);
  EXPECT_EQ(r.theta, 1e6);
  j["rope_scaling"]["factor"] = 0;
  parse_error(j, {"\"rope_scaling.factor\"", "positive"});
  j["rope_scaling"]["factor"] = "2";
  parse_error(j, {"\"rope_scaling.factor\"", "number", "string"});
  j["rope_scaling"].erase("factor");
  parse_error(j, {"\"rope_scaling.factor\"", "missing"});
}

TEST(ModelRope, Yarn) {
  // Qwen's recommended long-context setting for Qwen3.
  json j = qwen3_8b_json();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  cpu::RopeParams r = parse(j).rope;
  EXPECT_EQ(r.scaling, Scaling::kYarn);
  EXPECT_EQ(std::tuple(r.factor, r.original_max_position, r.beta_fast, r.beta_slow, r.attention_factor),
            std::tuple(4.0, int64_t(32768), 32.0, 1.0, 0.0));
  EXPECT_TRUE(r.truncate);
  // Without original_max_position_embeddings, transformers takes max_position_embeddings.
  j["rope_scaling"].erase("original_max_position_embeddings");
  EXPECT_EQ(parse(j).rope.original_max_position, 40960);
  // DeepSeek-style fields.
  j["rope_scaling"] = {{"type", "yarn"},           {"factor", 40},      {"beta_fast", 16},
                       {"beta_slow", 2},           {"mscale", 1.0},     {"mscale_all_dim", 0.5},
                       {"attention_factor", 1.25}, {"truncate", false}, {"original_max_position_embeddings", 4096}};
  r = parse(j).rope;
  EXPECT_EQ(std::tuple(r.factor, r.beta_fast, r.beta_slow, r.mscale, r.mscale_all_dim, r.attention_factor),
            std::tuple(40.0, 16.0, 2.0, 1.0, 0.5, 1.25));
  EXPECT_FALSE(r.truncate);
  EXPECT_EQ(r.original_max_position, 4096);
  j["rope_scaling"]["truncate"] = "no";
  parse_error(j, {"\"rope_scaling.truncate\"", "true or false"});
  // No factor: transformers derives it from the two lengths.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", nullptr}, {"original_max_position_embeddings", 32768}};
  EXPECT_EQ(parse(j).rope.factor, 40960.0 / 32768.0);
  j.erase("max_position_embeddings");
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  parse_error(j, {"\"rope_scaling.original_max_position_embeddings\"", "max_position_embeddings"});
}

TEST(ModelRope, RopeParametersOfTransformers5) {
  json j = qwen3_8b_json();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  EXPECT_EQ(parse(j).rope.theta, 250000.0);
  EXPECT_EQ(parse(j).rope.scaling, Scaling::kNone);
  j["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  // A null or empty rope_scaling leaves rope_parameters in charge …
  j["rope_scaling"] = nullptr;
  cpu::RopeParams r = parse(j).rope;
  EXPECT_EQ(r.scaling, Scaling::kYarn);
  EXPECT_EQ(std::tuple(r.theta, r.factor, r.original_max_position), std::tuple(1e6, 4.0, int64_t(32768)));
  j["rope_scaling"] = json::object();
  EXPECT_EQ(parse(j).rope.scaling, Scaling::kYarn);
  // … a real one replaces it, as in transformers 5 (its theta, else the top-level one, else 10000).
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  r = parse(j).rope;
  EXPECT_EQ(r.scaling, Scaling::kLinear);
  EXPECT_EQ(r.theta, 10000);
  j.erase("rope_scaling");
  j["rope_parameters"]["rope_theta"] = -1;
  parse_error(j, {"\"rope_parameters.rope_theta\"", "positive"});
}

TEST(ModelRope, RefusesWhatItCannotRotate) {
  json j = qwen3_8b_json();
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  const std::string e =
      parse_error(j, {"/ckpt/config.json", "\"rope_scaling.rope_type\"", "dynamic", "default, linear, llama3, yarn"});
  EXPECT_EQ(e.find(". "), std::string::npos) << "one sentence: " << e;
  j["rope_scaling"] = {{"type", "longrope"}};
  parse_error(j, {"\"rope_scaling.type\"", "longrope"});
  j["rope_scaling"] = "yarn";
  parse_error(j, {"\"rope_scaling\"", "object"});
  j = qwen3_8b_json();
  j["rope_theta"] = 0;
  parse_error(j, {"\"rope_theta\"", "positive"});
  j = qwen3_8b_json();
  j["partial_rotary_factor"] = 0.5;
  parse_error(j, {"\"partial_rotary_factor\"", "whole head"});
}

// ---------------------------------------------------------------------------------------------
// quantization_config

TEST(ModelQuant, Awq) {
  QuantConfig q = parse_quant({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "gemm"}});
  EXPECT_EQ(q.method, QuantConfig::kAwq);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_FALSE(q.sym);
  EXPECT_EQ(quant_method_name(q.method), "awq");
}

TEST(ModelQuant, Gptq) {
  QuantConfig q = parse_quant({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 64}, {"desc_act", true}, {"sym", true}});
  EXPECT_EQ(q.method, QuantConfig::kGptq);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 64);
  EXPECT_TRUE(q.desc_act);
  EXPECT_TRUE(q.sym);
  q = parse_quant({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}});
  EXPECT_FALSE(q.desc_act);
}

TEST(ModelQuant, Fp8Block) {
  QuantConfig q = parse_quant({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}});
  EXPECT_EQ(q.method, QuantConfig::kFp8Block);
  EXPECT_EQ(q.bits, 8);
  EXPECT_EQ(q.block_n, 128);
  EXPECT_EQ(q.block_k, 128);
  EXPECT_EQ(q.group_size, 128);
}

// fp8 with 32×32 blocks and scale_fmt "ue8m0" (transformers' FineGrainedFP8Config): gemm format
// fp8b32, whose exponent per 32×32 block the UE8M0 scales are.
TEST(ModelQuant, Fp8Block32Ue8m0) {
  QuantConfig q = parse_quant({{"quant_method", "fp8"}, {"weight_block_size", {32, 32}}, {"scale_fmt", "ue8m0"}});
  EXPECT_EQ(q.method, QuantConfig::kFp8Block);
  EXPECT_EQ(q.block_n, 32);
  EXPECT_EQ(q.block_k, 32);
  EXPECT_EQ(q.group_size, 32);
  EXPECT_TRUE(q.ue8m0_scales);
  // DeepSeek-V3.2's and V4's configs: 128-blocks with UE8M0 scales stay fp8b128.
  q = parse_quant({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"scale_fmt", "ue8m0"}});
  EXPECT_EQ(q.block_k, 128);
  EXPECT_TRUE(q.ue8m0_scales);
  EXPECT_FALSE(parse_quant({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}).ue8m0_scales);

  json j = qwen3_8b_json();
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {32, 32}}, {"scale_fmt", "ue8m0"}};
  const auto plan = plan_model(parse(j), 1);
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=6144,k=4096,fmt=fp8b32,group=32,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=4096,k=12288,fmt=fp8b32,group=32,out=f16,epi=none,act_order=0");
  // A rank's slice must hold whole 32-row blocks: 12288 / 8 = 1536 does, 11000 / 8 = 1375 does not.
  EXPECT_NO_THROW(plan_model(parse(j), 8));
  j["intermediate_size"] = 11000;
  expect_throw<InputError>([&] { plan_model(parse(j), 8); }, {"intermediate/tp=1375", "fp8 block 32", "tp=8"});
}

// FBGEMM FP8: one scale per output row, planned as fp8b128 with group=0 (no block constraint on TP).
TEST(ModelQuant, FbgemmFp8IsPerChannel) {
  QuantConfig q = parse_quant({{"quant_method", "fbgemm_fp8"}, {"activation_scale_ub", 1200.0}});
  EXPECT_EQ(q.method, QuantConfig::kFp8Block);
  EXPECT_EQ(q.bits, 8);
  EXPECT_EQ(q.block_n, 0);
  EXPECT_EQ(q.group_size, 0);
  ModelConfig m = builtin_model("qwen3-8b");
  m.quant = q;
  const auto plan = plan_model(m, 2);
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=4096,k=2048,fmt=fp8b128,group=0,out=f32,epi=none,act_order=0");
}

TEST(ModelQuant, ModelOptNvfp4) {
  QuantConfig q = parse_quant({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}});
  EXPECT_EQ(q.method, QuantConfig::kNvfp4);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 16);
}

TEST(ModelQuant, Mxfp4) {
  QuantConfig q = parse_quant({{"quant_method", "mxfp4"}});
  EXPECT_EQ(q.method, QuantConfig::kMxfp4);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 32);
}

TEST(ModelQuant, HfQuantConfig) {
  QuantConfig q = parse_hf_quant_config(
      R"({"producer": {"name": "modelopt", "version": "0.29.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16,
                           "exclude_modules": ["lm_head"]}})",
      "/ckpt/hf_quant_config.json");
  EXPECT_EQ(q.method, QuantConfig::kNvfp4);
  EXPECT_EQ(q.group_size, 16);
  expect_throw<InputError>([] { parse_hf_quant_config(R"({"producer": {}})", "/ckpt/hf_quant_config.json"); },
                           {"/ckpt/hf_quant_config.json", "\"quantization\"", "missing"});
  expect_throw<InputError>(
      [] { parse_hf_quant_config(R"({"quantization": {"quant_algo": "FP8"}})", "/ckpt/hf_quant_config.json"); },
      {"/ckpt/hf_quant_config.json", "\"quantization.quant_algo\"", "FP8"});
  expect_throw<InputError>(
      [] { parse_hf_quant_config(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})", "/h.json"); },
      {"/h.json", "\"quantization.group_size\"", "16"});
}

TEST(ModelQuant, RejectsMalformedQuantConfigs) {
  quant_error({{"quant_method", "bitsandbytes"}}, {"/ckpt/config.json", "\"quantization_config.quant_method\"", "bitsandbytes"});
  quant_error({{"bits", 4}}, {"\"quantization_config.quant_method\"", "missing"});
  quant_error({{"quant_method", "awq"}, {"bits", 8}, {"group_size", 128}}, {"/ckpt/config.json", "\"quantization_config.bits\"", "8"});
  quant_error({{"quant_method", "awq"}, {"group_size", 128}}, {"\"quantization_config.bits\"", "missing"});
  quant_error({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}}, {"\"quantization_config.version\"", "gemv"});
  quant_error({{"quant_method", "gptq"}, {"bits", 3}, {"group_size", 128}}, {"\"quantization_config.bits\"", "3"});
  quant_error({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}}, {"\"quantization_config.group_size\"", "-1", "32, 64 or 128"});
  quant_error({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", "yes"}}, {"\"quantization_config.desc_act\"", "true or false"});
  quant_error({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"checkpoint_format", "gptq_v2"}},
              {"\"quantization_config.checkpoint_format\"", "gptq_v2"});
  quant_error({{"quant_method", "fp8"}}, {"\"quantization_config.weight_block_size\"", "missing"});
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}}, {"\"quantization_config.weight_block_size\"", "[64, 64]"});
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", "128"}}, {"\"quantization_config.weight_block_size\"", "two integers"});
  // MXFP8-shaped blocks (one scale per row and 32 columns) have no onecat format.
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", {1, 32}}, {"scale_fmt", "ue8m0"}},
              {"\"quantization_config.weight_block_size\"", "[1, 32]", "[32, 32]"});
  // fp8b32 keeps exponents only: 32×32 blocks with arbitrary float scales are refused up front.
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", {32, 32}}},
              {"\"quantization_config.weight_block_size\"", "[32, 32]", "ue8m0"});
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", {32, 32}}, {"scale_fmt", "float"}},
              {"\"quantization_config.weight_block_size\"", "ue8m0"});
  quant_error({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"scale_fmt", "e4m3"}},
              {"\"quantization_config.scale_fmt\"", "e4m3", "ue8m0"});
  quant_error({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}}, {"\"quantization_config.quant_algo\"", "FP8"});
  quant_error({{"quant_method", "modelopt"}}, {"\"quantization_config.quant_algo\"", "missing"});
  json j = qwen3_8b_json();
  j["quantization_config"] = "awq";
  parse_error(j, {"\"quantization_config\"", "object"});
}

// ---------------------------------------------------------------------------------------------
// built-ins (values from each checkpoint's public config.json)

TEST(ModelBuiltin, Values) {
  ModelConfig q8 = builtin_model("qwen3-8b");
  EXPECT_EQ(q8.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(std::tuple(q8.hidden, q8.intermediate, q8.layers, q8.heads, q8.kv_heads, q8.head_dim, q8.vocab),
            std::tuple(4096, 12288, 36, 32, 8, 128, 151936));
  EXPECT_DOUBLE_EQ(q8.rms_norm_eps, 1e-6);
  EXPECT_TRUE(q8.qk_norm);
  EXPECT_FALSE(q8.tie_word_embeddings);
  EXPECT_EQ(q8.quant.method, QuantConfig::kNone);

  ModelConfig l8 = builtin_model("llama-3.1-8b");
  EXPECT_EQ(l8.architecture, "LlamaForCausalLM");
  EXPECT_EQ(std::tuple(l8.hidden, l8.intermediate, l8.layers, l8.heads, l8.kv_heads, l8.head_dim, l8.vocab),
            std::tuple(4096, 14336, 32, 32, 8, 128, 128256));
  EXPECT_DOUBLE_EQ(l8.rms_norm_eps, 1e-5);
  EXPECT_FALSE(l8.qk_norm);
  EXPECT_FALSE(l8.tie_word_embeddings);

  ModelConfig q32 = builtin_model("qwen3-32b");
  EXPECT_EQ(std::tuple(q32.hidden, q32.intermediate, q32.layers, q32.heads, q32.kv_heads, q32.head_dim, q32.vocab),
            std::tuple(5120, 25600, 64, 64, 8, 128, 151936));
  EXPECT_TRUE(q32.qk_norm);

  ModelConfig moe = builtin_model("qwen3-30b-a3b");
  EXPECT_EQ(moe.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(std::tuple(moe.hidden, moe.layers, moe.heads, moe.kv_heads, moe.head_dim, moe.vocab),
            std::tuple(2048, 48, 32, 4, 128, 151936));
  EXPECT_EQ(std::tuple(moe.experts, moe.experts_per_token, moe.moe_intermediate), std::tuple(128, 8, 768));
  EXPECT_TRUE(moe.qk_norm);
  EXPECT_TRUE(moe.is_moe());
}

TEST(ModelBuiltin, QuantisedForms) {
  EXPECT_EQ(builtin_model("qwen3-8b:awq4").quant, (QuantConfig{QuantConfig::kAwq, 4, 128, false, false, 0, 0}));
  EXPECT_EQ(builtin_model("qwen3-8b:gptq4").quant, (QuantConfig{QuantConfig::kGptq, 4, 128, false, true, 0, 0}));
  EXPECT_EQ(builtin_model("qwen3-8b:fp8").quant, (QuantConfig{QuantConfig::kFp8Block, 8, 128, false, true, 128, 128}));
  EXPECT_EQ(builtin_model("qwen3-8b:nvfp4").quant.method, QuantConfig::kNvfp4);
  EXPECT_EQ(builtin_model("qwen3-8b:mxfp4").quant.method, QuantConfig::kMxfp4);
  EXPECT_EQ(builtin_model("llama-3.1-8b:fp8").name, "llama-3.1-8b:fp8");
  const auto names = builtin_model_names();
  EXPECT_EQ(names.size(), 42u);
  EXPECT_NE(std::find(names.begin(), names.end(), "mixtral-8x7b:awq4"), names.end());
  const ModelConfig mixtral = builtin_model("mixtral-8x7b");
  const ModelConfig published = parse(mixtral_json());
  EXPECT_EQ(mixtral.experts, published.experts);
  EXPECT_EQ(mixtral.experts_per_token, published.experts_per_token);
  EXPECT_EQ(mixtral.moe_intermediate, published.moe_intermediate);
  EXPECT_EQ(mixtral.norm_topk_prob, published.norm_topk_prob);
  EXPECT_EQ(mixtral.vocab, published.vocab);
  EXPECT_EQ(mixtral.rope.theta, published.rope.theta);
  EXPECT_EQ(mixtral.rms_norm_eps, published.rms_norm_eps);
  for (const auto& n : names) EXPECT_EQ(builtin_model(n).name, n);
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen3-30b-a3b:mxfp4"), names.end());
  expect_throw<InputError>([] { builtin_model("qwen3-9b"); }, {"qwen3-9b", "qwen3-8b", "llama-3.1-8b:gptq4", "qwen3-30b-a3b:nvfp4"});
  expect_throw<InputError>([] { builtin_model("qwen3-8b:int8"); }, {"qwen3-8b:int8", "qwen3-8b:awq4"});
}

// ---------------------------------------------------------------------------------------------
// load_model

TEST(ModelLoad, DirectoryFileAndBuiltin) {
  test::TempDir dir;
  json j = qwen3_8b_json();
  test::write_file(dir / "config.json", j.dump(2));
  ModelConfig m = load_model(dir.path());
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.quant.method, QuantConfig::kNone);
  EXPECT_EQ(m.name, std::filesystem::path(dir.path()).filename().string());

  test::write_file(dir / "hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16}})");
  m = load_model(dir.path());
  EXPECT_EQ(m.quant.method, QuantConfig::kNvfp4);
  EXPECT_EQ(load_model(dir / "config.json").quant.method, QuantConfig::kNvfp4);

  // config.json saying modelopt too is consistent; a different method is a conflict.
  j["quantization_config"] = {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}};
  test::write_file(dir / "config.json", j.dump());
  EXPECT_EQ(load_model(dir.path()).quant.method, QuantConfig::kNvfp4);
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}};
  test::write_file(dir / "config.json", j.dump());
  expect_throw<InputError>([&] { load_model(dir.path()); }, {"hf_quant_config.json", "awq", "nvfp4"});

  // Errors name the file.
  test::write_file(dir / "hf_quant_config.json", R"({"quantization": {"quant_algo": "W4A8_AWQ"}})");
  expect_throw<InputError>([&] { load_model(dir.path()); }, {dir / "hf_quant_config.json", "quant_algo"});
  std::filesystem::remove(dir / "hf_quant_config.json");
  j.erase("vocab_size");
  test::write_file(dir / "config.json", j.dump());
  expect_throw<InputError>([&] { load_model(dir.path()); }, {dir / "config.json", "\"vocab_size\""});

  test::TempDir empty;
  expect_throw<InputError>([&] { load_model(empty.path()); }, {"config.json"});
  EXPECT_EQ(load_model("qwen3-32b:nvfp4").hidden, 5120);
  expect_throw<InputError>([] { load_model("/no/such/model"); }, {"/no/such/model", "qwen3-8b"});
}

// ---------------------------------------------------------------------------------------------
// plans

// The three attention ops of a head_dim-128 model with no sliding window (rope writes the K/V
// cache); heads: "heads=H,kv_heads=K".
void expect_attention_specs(const std::vector<PlannedOp>& plan, const std::string& heads) {
  const std::string tail = ",dim=128,page=16,kv=f16,kv_scale=none";
  EXPECT_EQ(spec_of(plan, "layers.attention_prefill"), "attention:op=prefill," + heads + tail + ",causal=1,window=0");
  EXPECT_EQ(spec_of(plan, "layers.attention_decode"), "attention:op=decode," + heads + tail + ",window=0");
  EXPECT_EQ(spec_of(plan, "layers.attention_verify"), "attention:op=verify," + heads + tail + ",q=8,window=0");
}

TEST(PlanModel, Qwen3_8bAwqTp1) {
  const auto plan = plan_model(builtin_model("qwen3-8b:awq4"), 1, KvCacheDtype::kF16, kFusedNormMaxTokens);
  std::vector<std::string> names;
  for (const auto& o : plan) names.push_back(o.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "embed_tokens", "layers.input_layernorm", "layers.qkv_proj", "layers.rope",
                       "layers.attention_prefill", "layers.attention_decode", "layers.attention_verify",
                       "layers.o_proj", "layers.post_attention_layernorm", "layers.gate_up_proj", "layers.down_proj",
                       "layers.qkv_proj_normed", "layers.o_proj_residual", "layers.gate_up_proj_normed",
                       "layers.down_proj_residual", "norm", "lm_head", "sampling"}));
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  // A decode step's fused gemms, tuned up to kFusedNormMaxTokens tokens only.
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj_normed"),
            "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0,norm=rms");
  EXPECT_EQ(spec_of(plan, "layers.o_proj_residual"),
            "gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=residual,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.gate_up_proj_normed"),
            "gemm:n=24576,k=4096,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0,norm=rms");
  EXPECT_EQ(spec_of(plan, "layers.down_proj_residual"),
            "gemm:n=4096,k=12288,fmt=awq4,group=128,out=f16,epi=residual,act_order=0");
  EXPECT_EQ(spec_max_tokens(plan, spec_of(plan, "layers.down_proj_residual")), kFusedNormMaxTokens);
  EXPECT_EQ(spec_max_tokens(plan, spec_of(plan, "layers.down_proj")), 0);
  // Fusing fewer tokens (sm_80+: the gemv's range ends sooner) tunes them at fewer buckets.
  EXPECT_EQ(spec_max_tokens(plan_model(builtin_model("qwen3-8b:awq4"), 1, KvCacheDtype::kF16, 2),
                            spec_of(plan, "layers.down_proj_residual")),
            2);
  EXPECT_EQ(gpu_fused_norm_max_tokens(Arch{70}), kGpuFusesNorms ? kFusedNormMaxTokens : 0);
  EXPECT_EQ(gpu_fused_norm_max_tokens(Arch{90}), kGpuFusesNorms ? 2 : 0);
  // Without them (where the GPU keeps its norms apart) the same ops less the four.
  EXPECT_EQ(plan_model(builtin_model("qwen3-8b:awq4"), 1, KvCacheDtype::kF16, 0).size(), plan.size() - 4);
  EXPECT_EQ(plan_model(builtin_model("qwen3-8b:awq4"), 1).size(), plan.size() - (kGpuFusesNorms ? 0 : 4));
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.gate_up_proj"), "gemm:n=24576,k=4096,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=4096,k=12288,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "lm_head"), "gemm:n=151936,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.input_layernorm"), "rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(spec_of(plan, "layers.post_attention_layernorm"), "rmsnorm:hidden=4096,dtype=f16,residual=1");
  EXPECT_EQ(spec_of(plan, "norm"), "rmsnorm:hidden=4096,dtype=f16,residual=1");
  // Qwen3's q/k norm, the rotation and the K/V cache write are one op.
  EXPECT_EQ(spec_of(plan, "layers.rope"),
            "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16,kv_scale=none");
  EXPECT_EQ(op(plan, "layers.rope").count_per_rank, 36);
  EXPECT_EQ(spec_of(plan, "embed_tokens"), "embedding:vocab=151936,hidden=4096");
  EXPECT_EQ(op(plan, "layers.qkv_proj").count_per_rank, 36);
  EXPECT_EQ(op(plan, "lm_head").count_per_rank, 1);
  EXPECT_EQ(op(plan, "norm").count_per_rank, 1);
  EXPECT_FALSE(op(plan, "sampling").spec.has_value());
  EXPECT_TRUE(test::contains(op(plan, "sampling").note, "no kernel family yet"));
  // 32 q heads, 8 KV heads, head_dim 128, 16-token pages of fp16, no sliding window.
  expect_attention_specs(plan, "heads=32,kv_heads=8");
  for (const char* name : {"layers.attention_prefill", "layers.attention_decode", "layers.attention_verify"}) {
    EXPECT_EQ(op(plan, name).family, "attention") << name;
    EXPECT_EQ(op(plan, name).count_per_rank, 36) << name;
  }
  EXPECT_EQ(op(plan, "layers.rope").family, "rope");
  EXPECT_EQ(op(plan, "embed_tokens").family, "embedding");
  EXPECT_EQ(op(plan, "sampling").family, "sampling");
  EXPECT_FALSE(has_op(plan, "layers.attn_allreduce"));
  // Every spec is canonical.
  for (const auto& o : plan) {
    if (o.spec) {
      EXPECT_EQ(family_of(*o.spec).canonical_spec(*o.spec), *o.spec);
    }
  }
  EXPECT_EQ(unique_specs(plan),
            (std::vector<std::string>{
                "embedding:vocab=151936,hidden=4096", "rmsnorm:hidden=4096,dtype=f16,residual=1",
                "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0",
                "rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16,kv_scale=none",
                "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,causal=1,window=0",
                "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,window=0",
                "attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,q=8,window=0",
                "gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0",
                "gemm:n=24576,k=4096,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0",
                "gemm:n=4096,k=12288,fmt=awq4,group=128,out=f16,epi=none,act_order=0",
                "gemm:n=6144,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0,norm=rms",
                "gemm:n=4096,k=4096,fmt=awq4,group=128,out=f16,epi=residual,act_order=0",
                "gemm:n=24576,k=4096,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0,norm=rms",
                "gemm:n=4096,k=12288,fmt=awq4,group=128,out=f16,epi=residual,act_order=0",
                "gemm:n=151936,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0"}));
}

// --kv-cache-dtype: every attention op reads (rope writes) an fp8 cache with one scale per
// tensor; the rest of the plan is the same; vLLM's names parse, others are refused.
TEST(PlanModel, Fp8KvCache) {
  const auto f16 = plan_model(builtin_model("qwen3-8b:awq4"), 1);
  for (auto [kv, text] : {std::pair{KvCacheDtype::kE4m3, "kv=e4m3,kv_scale=tensor"}, std::pair{KvCacheDtype::kE5m2, "kv=e5m2,kv_scale=tensor"}}) {
    const auto plan = plan_model(builtin_model("qwen3-8b:awq4"), 1, kv);
    ASSERT_EQ(plan.size(), f16.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      ASSERT_EQ(plan[i].name, f16[i].name);
      if (plan[i].family != "attention" && plan[i].family != "rope") {
        EXPECT_EQ(plan[i].spec, f16[i].spec) << plan[i].name;
        continue;
      }
      ASSERT_TRUE(plan[i].spec.has_value()) << plan[i].name;
      EXPECT_TRUE(test::contains(*plan[i].spec, text)) << *plan[i].spec;
      std::string want = *f16[i].spec;
      want.replace(want.find("kv=f16,kv_scale=none"), std::string("kv=f16,kv_scale=none").size(), text);
      EXPECT_EQ(*plan[i].spec, want);
    }
  }
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KvCacheDtype::kF16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KvCacheDtype::kE4m3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KvCacheDtype::kE4m3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e5m2"), KvCacheDtype::kE5m2);
  expect_throw<InputError>([] { parse_kv_cache_dtype("int8"); }, {"'int8' is not a KV cache type", "fp8_e5m2"});
}

TEST(PlanModel, Qwen3_8bTp2) {
  const auto plan = plan_model(builtin_model("qwen3-8b:awq4"), 2);
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=3072,k=4096,fmt=awq4,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=4096,k=2048,fmt=awq4,group=128,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.gate_up_proj"), "gemm:n=12288,k=4096,fmt=awq4,group=128,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=4096,k=6144,fmt=awq4,group=128,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "lm_head"), "gemm:n=75968,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(op(plan, "layers.attn_allreduce").family, "allreduce");
  EXPECT_FALSE(op(plan, "layers.mlp_allreduce").spec.has_value());
  // 16 q heads and 4 KV heads per rank.
  expect_attention_specs(plan, "heads=16,kv_heads=4");

  const auto f16 = plan_model(builtin_model("qwen3-8b"), 2);
  EXPECT_EQ(spec_of(f16, "layers.qkv_proj"), "gemm:n=3072,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(f16, "layers.o_proj"), "gemm:n=4096,k=2048,fmt=f16,group=0,out=f32,epi=none,act_order=0");
}

TEST(PlanModel, GptqActOrderAndQwen2Bias) {
  json j = qwen25_7b_json();
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", true}};
  const auto plan = plan_model(parse(j), 4);
  // 28 heads / 4 = 7 q heads, 4 kv heads / 4 = 1 per rank: (7 + 2) × 128.
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=1152,k=3584,fmt=gptq4,group=128,out=f16,epi=bias,act_order=1");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=3584,k=4736,fmt=gptq4,group=128,out=f32,epi=none,act_order=1");
  EXPECT_FALSE(has_op(plan, "layers.q_norm"));
  EXPECT_EQ(spec_of(plan_model(builtin_model("qwen3-8b:gptq4"), 1), "layers.qkv_proj"),
            "gemm:n=6144,k=4096,fmt=gptq4,group=128,out=f16,epi=none,act_order=0");
}

TEST(PlanModel, Llama31_8bFp8) {
  const auto plan = plan_model(builtin_model("llama-3.1-8b:fp8"), 1);
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=6144,k=4096,fmt=fp8b128,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=4096,k=4096,fmt=fp8b128,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.gate_up_proj"), "gemm:n=28672,k=4096,fmt=fp8b128,group=128,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=4096,k=14336,fmt=fp8b128,group=128,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "lm_head"), "gemm:n=128256,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_FALSE(has_op(plan, "layers.q_norm"));
  EXPECT_FALSE(has_op(plan, "layers.k_norm"));
  EXPECT_EQ(spec_of(plan, "layers.rope"),
            "rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=f16,kv_scale=none");
  EXPECT_EQ(op(plan, "layers.o_proj").count_per_rank, 32);
  // The weights' fp8 does not make the KV cache fp8: fp16 stays the default.
  EXPECT_EQ(spec_of(plan, "layers.attention_decode"),
            "attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,window=0");
  EXPECT_EQ(op(plan, "layers.attention_prefill").count_per_rank, 32);
  const auto tp8 = plan_model(builtin_model("llama-3.1-8b:fp8"), 8);
  // 8 KV heads over 8 ranks: one each, with 4 q heads.
  EXPECT_EQ(spec_of(tp8, "layers.attention_verify"),
            "attention:op=verify,heads=4,kv_heads=1,dim=128,page=16,kv=f16,kv_scale=none,q=8,window=0");
  EXPECT_EQ(spec_of(tp8, "layers.down_proj"), "gemm:n=4096,k=1792,fmt=fp8b128,group=128,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(tp8, "lm_head"), "gemm:n=16032,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
}

TEST(PlanModel, Qwen3_32bNvfp4Tp4) {
  const auto plan = plan_model(builtin_model("qwen3-32b:nvfp4"), 4);
  EXPECT_EQ(spec_of(plan, "layers.qkv_proj"), "gemm:n=2560,k=5120,fmt=nvfp4,group=16,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=5120,k=2048,fmt=nvfp4,group=16,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.gate_up_proj"), "gemm:n=12800,k=5120,fmt=nvfp4,group=16,out=f16,epi=silu_mul,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.down_proj"), "gemm:n=5120,k=6400,fmt=nvfp4,group=16,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "lm_head"), "gemm:n=37984,k=5120,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.input_layernorm"), "rmsnorm:hidden=5120,dtype=f16,residual=1");
  EXPECT_EQ(op(plan, "layers.down_proj").count_per_rank, 64);
}

TEST(PlanModel, Qwen3MoeListsTheMoeFamilysOps) {
  const auto plan = plan_model(builtin_model("qwen3-30b-a3b:mxfp4"), 8);
  EXPECT_TRUE(test::contains(op(plan, "lm_head").note, "column-parallel")) << op(plan, "lm_head").note;
  // 4 KV heads at tp=8: replicated, one per rank: (32/8 + 2×1) × 128.
  const PlannedOp& qkv = op(plan, "layers.qkv_proj");
  EXPECT_EQ(qkv.spec.value_or(""), "gemm:n=768,k=2048,fmt=mxfp4,group=32,out=f16,epi=none,act_order=0");
  EXPECT_TRUE(test::contains(qkv.note, "replicated")) << qkv.note;
  EXPECT_EQ(spec_of(plan, "layers.o_proj"), "gemm:n=2048,k=512,fmt=mxfp4,group=32,out=f32,epi=none,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_router"), "gemm:n=128,k=2048,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  // The moe family's four ops per layer, the experts' projections sharded (768 / 8 = 96).
  EXPECT_EQ(spec_of(plan, "layers.moe_route"), "moe:op=route,experts=128,topk=8,norm=1");
  EXPECT_EQ(spec_of(plan, "layers.moe_gate_up"),
            "moe:op=gate_up,experts=128,topk=8,hidden=2048,inter=96,fmt=mxfp4,group=32,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_down"),
            "moe:op=down,experts=128,topk=8,hidden=2048,inter=96,fmt=mxfp4,group=32,act_order=0");
  EXPECT_EQ(spec_of(plan, "layers.moe_combine"), "moe:op=combine,topk=8,hidden=2048");
  EXPECT_EQ(op(plan, "layers.moe_gate_up").family, "moe");
  EXPECT_EQ(op(plan, "layers.moe_gate_up").count_per_rank, 48);
  EXPECT_TRUE(test::contains(op(plan, "layers.moe_gate_up").note, "96 of 768")) << op(plan, "layers.moe_gate_up").note;
  EXPECT_FALSE(has_op(plan, "layers.gate_up_proj"));
  EXPECT_FALSE(has_op(plan, "layers.down_proj"));
  EXPECT_EQ(spec_of(plan, "layers.rope"),
            "rope:heads=4,kv_heads=1,dim=128,qk_norm=1,kv_out=pages,page=16,kv=f16,kv_scale=none");
  // Vocabulary-parallel embedding: a rank holds ceil(151936 / 8) rows.
  EXPECT_EQ(spec_of(plan, "embed_tokens"), "embedding:vocab=18992,hidden=2048");
  // Attention sees the replicated KV head too: 4 q heads on 1 KV head per rank.
  EXPECT_EQ(spec_of(plan, "layers.attention_decode"),
            "attention:op=decode,heads=4,kv_heads=1,dim=128,page=16,kv=f16,kv_scale=none,window=0");
  EXPECT_EQ(op(plan, "layers.attention_decode").count_per_rank, 48);
  // At tp 1 nothing is replicated.
  const auto tp1 = plan_model(builtin_model("qwen3-30b-a3b"), 1);
  EXPECT_EQ(spec_of(tp1, "layers.qkv_proj"), "gemm:n=5120,k=2048,fmt=f16,group=0,out=f16,epi=none,act_order=0");
  EXPECT_EQ(spec_of(tp1, "layers.moe_down"),
            "moe:op=down,experts=128,topk=8,hidden=2048,inter=768,fmt=f16,group=0,act_order=0");
  // At tp 1 one-token decode steps of 4-bit experts take the layer in one launch; f16 experts
  // and sharded ones, the four ops.
  const auto awq4 = plan_model(builtin_model("qwen3-30b-a3b:awq4"), 1);
  EXPECT_EQ(spec_of(awq4, "layers.moe_decode"),
            "moe:op=decode,experts=128,topk=8,norm=1,hidden=2048,inter=768,fmt=awq4,group=128,act_order=0");
  EXPECT_EQ(op(awq4, "layers.moe_decode").max_tokens, 1);
  EXPECT_EQ(op(awq4, "layers.moe_decode").count_per_rank, 48);
  EXPECT_FALSE(has_op(tp1, "layers.moe_decode"));
  EXPECT_FALSE(has_op(plan_model(builtin_model("qwen3-30b-a3b:awq4"), 2), "layers.moe_decode"));
  EXPECT_EQ(spec_of(tp1, "layers.attention_prefill"),
            "attention:op=prefill,heads=32,kv_heads=4,dim=128,page=16,kv=f16,kv_scale=none,causal=1,window=0");
}

TEST(PlanModel, AttentionTakesTheSlidingWindowOrListsAShapeWithoutAKernel) {
  // Every layer windowed (max_window_layers 0): the window is compiled into every attention op.
  json j = qwen3_8b_json();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 0;
  const auto plan = plan_model(parse(j), 1);
  EXPECT_EQ(spec_of(plan, "layers.attention_prefill"),
            "attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,causal=1,window=4096");
  EXPECT_EQ(spec_of(plan, "layers.attention_verify"),
            "attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,q=8,window=4096");
  // use_sliding_window false (Qwen3's released configs) or no windowed layer: full attention.
  j["use_sliding_window"] = false;
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 36;
  EXPECT_EQ(parse(j).sliding_window, 0);
  // Only some layers windowed: refused, naming the field.
  j["max_window_layers"] = 20;
  expect_throw<InputError>([&] { parse(j); }, {"max_window_layers", "20"});

  // head_dim 96 has no attention kernel: listed without a spec, the gemms still plan.
  json k = qwen3_8b_json();
  k["head_dim"] = 96;
  const auto odd = plan_model(parse(k), 1);
  for (const char* name : {"layers.attention_prefill", "layers.attention_decode", "layers.attention_verify"}) {
    EXPECT_FALSE(op(odd, name).spec.has_value()) << name;
    EXPECT_EQ(op(odd, name).family, "attention") << name;
    EXPECT_TRUE(test::contains(op(odd, name).note, "no kernel for this shape yet")) << op(odd, name).note;
  }
  EXPECT_EQ(spec_of(odd, "layers.qkv_proj"), "gemm:n=4608,k=4096,fmt=f16,group=0,out=f16,epi=none,act_order=0");
}

TEST(PlanModel, EveryBuiltinPlansAtEveryTp) {
  for (const auto& name : builtin_model_names()) {
    for (int tp : {1, 2, 4, 8}) {
      const bool group128 = name == "qwen3-30b-a3b:fp8" || name == "qwen3-30b-a3b:awq4" || name == "qwen3-30b-a3b:gptq4";
      if (group128 && tp >= 4) {
        // 768 / 4 = 192 expert columns per rank would split a 128-wide group or scale block.
        expect_throw<InputError>([&] { plan_model(builtin_model(name), tp); },
                                 {"moe_intermediate/tp=" + std::to_string(768 / tp), "group 128", "tp=" + std::to_string(tp)});
        continue;
      }
      if (name.starts_with("phi-4") && tp >= 4) {  // 10 KV heads split over neither 4 nor 8 ranks
        expect_throw<InputError>([&] { plan_model(builtin_model(name), tp); },
                                 {"kv_heads=10", "tp=" + std::to_string(tp)});
        continue;
      }
      if (name.starts_with("qwen2.5-7b") && tp == 8) {  // 28 heads do not split 8 ways
        expect_throw<InputError>([&] { plan_model(builtin_model(name), tp); }, {"heads=28", "tp=8"});
        continue;
      }
      std::vector<PlannedOp> plan;
      EXPECT_NO_THROW(plan = plan_model(builtin_model(name), tp)) << name << " tp=" << tp;
      EXPECT_FALSE(unique_specs(plan).empty()) << name;
    }
  }
}

TEST(PlanModel, Errors) {
  // 28 heads do not split 8 ways.
  expect_throw<InputError>([] { json j = qwen25_7b_json(); plan_model(parse(j), 8); }, {"heads=28", "tp=8"});
  expect_throw<InputError>([] { plan_model(builtin_model("qwen3-8b"), 3); }, {"tp=3", "1, 2, 4 or 8"});
  expect_throw<InputError>([] { plan_model(builtin_model("qwen3-8b"), 0); }, {"tp=0"});
  // intermediate 12290 does not split 4 ways.
  expect_throw<InputError>([] { json j = qwen3_8b_json(); j["intermediate_size"] = 12290; plan_model(parse(j), 4); },
                           {"intermediate=12290", "tp=4"});
  // 3 KV heads at tp 2: neither divides the other.
  expect_throw<InputError>(
      [] { json j = qwen3_8b_json(); j["num_attention_heads"] = 6; j["num_key_value_heads"] = 3; j["head_dim"] = 128; plan_model(parse(j), 2); },
      {"kv_heads=3", "tp=2"});
  // Llama-2-7B's intermediate 11008 / 4 = 2752 is not a multiple of the awq group 128: the gemm
  // family's message, with the op's name.
  expect_throw<InputError>(
      [] {
        json j = qwen3_8b_json();
        j["intermediate_size"] = 11008;
        j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}};
        plan_model(parse(j), 4);
      },
      {"layers.down_proj", "k=2752", "group=128"});
  // fp8 128×128 blocks must not straddle ranks.
  expect_throw<InputError>(
      [] {
        json j = qwen3_8b_json();
        j["intermediate_size"] = 11008;
        j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
        plan_model(parse(j), 4);
      },
      {"intermediate/tp=2752", "tp=4", "128"});
}

}  // namespace
}  // namespace onecat::models
