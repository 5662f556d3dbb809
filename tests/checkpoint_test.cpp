// Checkpoint loading (models/checkpoint/) on tiny checkpoints that tools/make_tiny_checkpoint.py
// writes at test time: every architecture × weight format loads, its fused weights have the
// documented layout and dequantise exactly to the weights the script quantised; every bad
// checkpoint is one InputError sentence naming the file and the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/e4m3.h"
#include "base/error.h"
#include "base/half.h"
#include "models/checkpoint/linear.h"
#include "models/checkpoint/loaded_model.h"
#include "models/checkpoint/locate.h"
#include "models/checkpoint/safetensors.h"
#include "models/checkpoint/tensor_values.h"
#include "runtime/cpu/gemm.h"
#include "test_util.h"

namespace onecat {
namespace {

using models::LoadedModel;
using quant::PackedWeight;
using quant::WeightFormat;

std::string python() {
  if (const char* p = std::getenv("ONECAT_PYTHON"); p && *p) return p;
  const std::string venv = std::string(ONECAT_SOURCE_DIR) + "/.venv/bin/python";
  return std::filesystem::exists(venv) ? venv : "python3";
}

// All tiny checkpoints, written once for the whole suite.
class Checkpoints {
 public:
  static const std::string& root() {
    static Checkpoints instance;
    return instance.dir_.path();
  }

 private:
  Checkpoints() {
    const std::string cmd = python() + " " + ONECAT_SOURCE_DIR + "/tools/make_tiny_checkpoint.py --all " + dir_.path();
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  test::TempDir dir_;
};

// The script's exact fp32 reference of every tensor before fusion.
class Reference {
 public:
  explicit Reference(const std::string& dir) : file_(dir + "/reference.safetensors") {}
  std::vector<float> get(const std::string& name) const {
    const models::Tensor* t = file_.find(name);
    if (!t) throw std::runtime_error("reference lacks " + name);
    return models::read_f32(*t);
  }
  std::vector<float> stacked(const std::vector<std::string>& names) const {
    std::vector<float> out;
    for (const auto& n : names) {
      const auto part = get(n);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }

 private:
  models::SafetensorsFile file_;
};

std::vector<float> halves(const std::vector<uint16_t>& h) {
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = cpu::half_to_float(h[i]);
  return out;
}

// W in original column order (act-order weights are stored with their columns permuted).
std::vector<float> weight_of(const PackedWeight& w) {
  std::vector<float> packed = cpu::dequantize(w);
  if (w.perm.empty()) return packed;
  std::vector<float> out(packed.size());
  for (int64_t n = 0; n < w.n; ++n) {
    for (int64_t kp = 0; kp < w.k; ++kp) out[size_t(n * w.k + w.perm[size_t(kp)])] = packed[size_t(n * w.k + kp)];
  }
  return out;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << what << " differs first at element " << i;
  }
}

struct Case {
  std::string arch, format;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.arch << "-" << c.format; }

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string s = info.param.arch + "_" + info.param.format;
  for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "phi3"}) {
    for (const char* fmt : {"f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "fp8-b32", "fp8-b32-f32",
                            "nvfp4", "mxfp4"})
      cases.push_back({arch, fmt});
  }
  // llm-compressor's compressed-tensors checkpoints of the same quantisations.
  for (const char* arch : {"llama", "qwen3"}) {
    for (const char* fmt : {"ct-w4a16", "ct-w4a16-asym", "ct-w4a16-act", "ct-fp8", "ct-fp8-tensor", "ct-fp8-block",
                            "ct-nvfp4", "ct-mxfp4"})
      cases.push_back({arch, fmt});
  }
  return cases;
}

WeightFormat expected_format(const std::string& fmt) {
  if (fmt.starts_with("ct-w4a16")) return WeightFormat::kGptq4;
  if (fmt.starts_with("ct-fp8")) return WeightFormat::kFp8B128;
  if (fmt == "ct-nvfp4") return WeightFormat::kNvfp4;
  if (fmt == "ct-mxfp4") return WeightFormat::kMxfp4;
  if (fmt == "awq4") return WeightFormat::kAwq4;
  if (fmt == "gptq4" || fmt == "gptq4-act") return WeightFormat::kGptq4;
  if (fmt == "fp8" || fmt == "fp8-channel") return WeightFormat::kFp8B128;
  if (fmt == "fp8-b32" || fmt == "fp8-b32-f32") return WeightFormat::kFp8B32;
  if (fmt == "nvfp4") return WeightFormat::kNvfp4;
  if (fmt == "mxfp4") return WeightFormat::kMxfp4;
  return WeightFormat::kF16;
}

class LoadTiny : public testing::TestWithParam<Case> {};

TEST_P(LoadTiny, ShapesFusionAndExactWeights) {
  const Case& c = GetParam();
  const std::string dir = Checkpoints::root() + "/" + c.arch + "-" + c.format;
  const LoadedModel m = models::load_checkpoint(dir, {.progress = false});
  const Reference ref(dir);
  const auto& cfg = m.config;
  const int64_t q_rows = cfg.heads * cfg.head_dim, kv_rows = cfg.kv_heads * cfg.head_dim;
  EXPECT_EQ(cfg.architecture == "Qwen3ForCausalLM", c.arch == "qwen3");
  if (c.arch == "qwen3") {
    EXPECT_NE(cfg.head_dim, cfg.hidden / cfg.heads);
  }
  ASSERT_EQ(m.layers.size(), size_t(cfg.layers));
  EXPECT_GT(m.checkpoint_bytes, 0u);
  EXPECT_GT(m.load_bytes_per_second(), 0);

  expect_same(halves(m.embed_tokens), ref.get("model.embed_tokens.weight"), "embed_tokens");
  expect_same(halves(m.final_norm), ref.get("model.norm.weight"), "model.norm");
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    SCOPED_TRACE(p);
    expect_same(halves(l.input_norm), ref.get(p + "input_layernorm.weight"), "input_layernorm");
    expect_same(halves(l.post_attention_norm), ref.get(p + "post_attention_layernorm.weight"),
                "post_attention_layernorm");

    EXPECT_EQ(l.qkv.format, expected_format(c.format));
    EXPECT_EQ(l.qkv.group, c.format == "fp8-channel" || c.format == "ct-fp8" || c.format == "ct-fp8-tensor" ? 0
                           : c.format == "fp8" || c.format == "ct-fp8-block"                                ? 128
                           : c.format == "fp8-b32" || c.format == "fp8-b32-f32"                             ? 32
                                                                                : l.qkv.group);
    EXPECT_EQ(l.qkv.n, q_rows + 2 * kv_rows);
    EXPECT_EQ(l.qkv.k, cfg.hidden);
    // Phi-3 publishes q|k|v (and gate|up) as one tensor, quantised whole: the reference holds it so.
    const bool fused = c.arch == "phi3";
    expect_same(weight_of(l.qkv),
                fused ? ref.get(p + "self_attn.qkv_proj.weight")
                      : ref.stacked({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                     p + "self_attn.v_proj.weight"}),
                "q|k|v");
    if (c.arch == "qwen2") {
      expect_same(halves(l.qkv_bias),
                  ref.stacked({p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"}),
                  "q|k|v bias");
    } else {
      EXPECT_TRUE(l.qkv_bias.empty());
    }
    if (c.arch == "qwen3") {
      expect_same(halves(l.q_norm), ref.get(p + "self_attn.q_norm.weight"), "q_norm");
      expect_same(halves(l.k_norm), ref.get(p + "self_attn.k_norm.weight"), "k_norm");
    } else {
      EXPECT_TRUE(l.q_norm.empty() && l.k_norm.empty());
    }
    EXPECT_EQ(l.o.n, cfg.hidden);
    EXPECT_EQ(l.o.k, q_rows);
    expect_same(weight_of(l.o), ref.get(p + "self_attn.o_proj.weight"), "o_proj");
    EXPECT_EQ(l.gate_up.n, 2 * cfg.intermediate);
    expect_same(weight_of(l.gate_up),
                fused ? ref.get(p + "mlp.gate_up_proj.weight")
                      : ref.stacked({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}),
                "gate|up");
    expect_same(weight_of(l.down), ref.get(p + "mlp.down_proj.weight"), "down_proj");
    // make_tiny_checkpoint.py leaves this one AWQ layer in fp16 through modules_to_not_convert.
    const bool not_converted = c.format == "awq4" && i == 1;
    EXPECT_EQ(l.down.format, not_converted ? WeightFormat::kF16 : expected_format(c.format));
  }
  if (cfg.tie_word_embeddings) {
    EXPECT_FALSE(m.lm_head.has_value());
  } else {
    ASSERT_TRUE(m.lm_head.has_value());
    EXPECT_EQ(m.lm_head->format, WeightFormat::kF16);
    expect_same(weight_of(*m.lm_head), ref.get("lm_head.weight"), "lm_head");
  }
}

// The fused gate|up weight is what gemm's epi=silu_mul reads: y = silu(x·gateᵀ) · (x·upᵀ).
TEST_P(LoadTiny, GateUpFeedsSiluMulGemm) {
  const Case& c = GetParam();
  const std::string dir = Checkpoints::root() + "/" + c.arch + "-" + c.format;
  const LoadedModel m = models::load_checkpoint(dir, {.progress = false});
  const Reference ref(dir);
  const int64_t hidden = m.config.hidden, inter = m.config.intermediate, tokens = 3;
  const auto& gate_up = m.layers[0].gate_up;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> x(size_t(tokens * hidden));
  for (auto& v : x) v = cpu::float_to_half(normal(rng));
  // gptq act-order: the op reads x in original column order, as here.
  std::vector<float> y(size_t(tokens * inter));
  cpu::gemm(gate_up, x.data(), tokens, {.kind = cpu::GemmEpilogue::kSiluMul}, y.data());
  std::vector<float> gate, up;
  if (c.arch == "phi3") {  // gate_up_proj: [gate; up], as transformers' Phi3MLP chunks it
    const auto both = ref.get("model.layers.0.mlp.gate_up_proj.weight");
    gate.assign(both.begin(), both.begin() + inter * hidden);
    up.assign(both.begin() + inter * hidden, both.end());
  } else {
    gate = ref.get("model.layers.0.mlp.gate_proj.weight"), up = ref.get("model.layers.0.mlp.up_proj.weight");
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < inter; ++j) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < hidden; ++k) {
        const double xv = cpu::half_to_float(x[size_t(t * hidden + k)]);
        g += xv * gate[size_t(j * hidden + k)];
        u += xv * up[size_t(j * hidden + k)];
      }
      const double want = g / (1 + std::exp(-g)) * u;
      ASSERT_NEAR(y[size_t(t * inter + j)], want, 1e-4 * (1 + std::fabs(want))) << "token " << t << ", column " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryArchAndFormat, LoadTiny, testing::ValuesIn(all_cases()), case_name);

// Qwen3-MoE as Qwen publishes it: the router mlp.gate stays 16-bit, each expert's
// gate_proj|up_proj fuse like the dense MLP's, every expert dequantises exactly.
class LoadTinyMoe : public testing::TestWithParam<std::string> {};

TEST_P(LoadTinyMoe, RouterAndEveryExpertExact) {
  const std::string& fmt = GetParam();
  const std::string dir = Checkpoints::root() + "/qwen3moe-" + fmt;
  const LoadedModel m = models::load_checkpoint(dir, {.progress = false});
  const Reference ref(dir);
  const auto& cfg = m.config;
  EXPECT_EQ(cfg.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(cfg.experts, 8);
  EXPECT_EQ(cfg.experts_per_token, 3);
  EXPECT_EQ(cfg.moe_intermediate, 128);
  EXPECT_TRUE(cfg.norm_topk_prob);
  EXPECT_TRUE(cfg.qk_norm);
  ASSERT_EQ(m.layers.size(), size_t(cfg.layers));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    SCOPED_TRACE(p);
    EXPECT_EQ(l.gate_up.n, 0);  // no dense MLP
    EXPECT_EQ(l.down.n, 0);
    EXPECT_EQ(l.router.format, WeightFormat::kF16);
    EXPECT_EQ(l.router.n, cfg.experts);
    EXPECT_EQ(l.router.k, cfg.hidden);
    expect_same(weight_of(l.router), ref.get(p + "mlp.gate.weight"), "router");
    expect_same(halves(l.q_norm), ref.get(p + "self_attn.q_norm.weight"), "q_norm");
    ASSERT_EQ(l.experts.size(), size_t(cfg.experts));
    for (size_t e = 0; e < l.experts.size(); ++e) {
      const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
      SCOPED_TRACE(q);
      const auto& x = l.experts[e];
      EXPECT_EQ(x.gate_up.format, expected_format(fmt));
      EXPECT_EQ(x.gate_up.n, 2 * cfg.moe_intermediate);
      EXPECT_EQ(x.gate_up.k, cfg.hidden);
      EXPECT_EQ(x.down.n, cfg.hidden);
      EXPECT_EQ(x.down.k, cfg.moe_intermediate);
      // make_tiny_checkpoint.py leaves one expert's down_proj in fp16 (modules_to_not_convert).
      const bool not_converted = fmt == "awq4" && i == 1 && e == 2;
      EXPECT_EQ(x.down.format, not_converted ? WeightFormat::kF16 : expected_format(fmt));
      expect_same(weight_of(x.gate_up), ref.stacked({q + "gate_proj.weight", q + "up_proj.weight"}), "gate|up");
      expect_same(weight_of(x.down), ref.get(q + "down_proj.weight"), "down_proj");
    }
  }
  ASSERT_TRUE(m.lm_head.has_value());
  expect_same(weight_of(*m.lm_head), ref.get("lm_head.weight"), "lm_head");
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, LoadTinyMoe,
                         testing::Values("f16", "bf16", "awq4", "gptq4", "gptq4-act", "fp8", "fp8-channel", "fp8-b32",
                                         "fp8-b32-f32", "nvfp4", "mxfp4"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

// Qwen2-MoE: q/k/v biases, and the shared expert (gate_proj|up_proj fused, down_proj) with its
// 16-bit gate, each exact.
TEST_P(LoadTinyMoe, Qwen2MoeSharedExpertExact) {
  const std::string& fmt = GetParam();
  const std::string dir = Checkpoints::root() + "/qwen2moe-" + fmt;
  const LoadedModel m = models::load_checkpoint(dir, {.progress = false});
  const Reference ref(dir);
  const auto& cfg = m.config;
  EXPECT_EQ(cfg.architecture, "Qwen2MoeForCausalLM");
  EXPECT_EQ(cfg.experts_per_token, 2);
  EXPECT_FALSE(cfg.norm_topk_prob);
  EXPECT_TRUE(cfg.attention_bias);
  EXPECT_EQ(cfg.shared_intermediate, 256);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    SCOPED_TRACE(p);
    EXPECT_EQ(l.experts.size(), size_t(cfg.experts));
    EXPECT_FALSE(l.qkv_bias.empty());
    EXPECT_EQ(l.gate_up.format, expected_format(fmt));
    EXPECT_EQ(l.gate_up.n, 2 * cfg.shared_intermediate);
    EXPECT_EQ(l.down.k, cfg.shared_intermediate);
    const std::string q = p + "mlp.shared_expert.";
    expect_same(weight_of(l.gate_up), ref.stacked({q + "gate_proj.weight", q + "up_proj.weight"}), "shared gate|up");
    expect_same(weight_of(l.down), ref.get(q + "down_proj.weight"), "shared down_proj");
    EXPECT_EQ(l.shared_gate.format, WeightFormat::kF16);
    EXPECT_EQ(l.shared_gate.n, 1);
    expect_same(weight_of(l.shared_gate), ref.get(p + "mlp.shared_expert_gate.weight"), "shared_expert_gate");
  }
}

// Mixtral as Mistral publishes it: block_sparse_moe.gate (16-bit), each expert's w1 (gate) and w3
// (up) fused like the dense MLP's, w2 (down); renormalised top-2; every weight exact.
TEST_P(LoadTinyMoe, MixtralExpertsExact) {
  const std::string& fmt = GetParam();
  const std::string dir = Checkpoints::root() + "/mixtral-" + fmt;
  const LoadedModel m = models::load_checkpoint(dir, {.progress = false});
  const Reference ref(dir);
  const auto& cfg = m.config;
  EXPECT_EQ(cfg.architecture, "MixtralForCausalLM");
  EXPECT_EQ(cfg.experts, 8);
  EXPECT_EQ(cfg.experts_per_token, 2);
  EXPECT_EQ(cfg.moe_intermediate, 128);
  EXPECT_TRUE(cfg.norm_topk_prob);
  EXPECT_EQ(cfg.rope.theta, 1e6);  // MixtralConfig's default: the tiny config.json gives none
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".block_sparse_moe.";
    SCOPED_TRACE(p);
    EXPECT_EQ(l.gate_up.n, 0);  // no dense MLP
    EXPECT_EQ(l.router.format, WeightFormat::kF16);
    expect_same(weight_of(l.router), ref.get(p + "gate.weight"), "router");
    ASSERT_EQ(l.experts.size(), size_t(cfg.experts));
    for (size_t e = 0; e < l.experts.size(); ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      SCOPED_TRACE(q);
      const auto& x = l.experts[e];
      EXPECT_EQ(x.gate_up.format, expected_format(fmt));
      const bool not_converted = fmt == "awq4" && i == 1 && e == 2;  // modules_to_not_convert
      EXPECT_EQ(x.down.format, not_converted ? WeightFormat::kF16 : expected_format(fmt));
      expect_same(weight_of(x.gate_up), ref.stacked({q + "w1.weight", q + "w3.weight"}), "w1|w3");
      expect_same(weight_of(x.down), ref.get(q + "w2.weight"), "w2");
    }
  }
}

TEST(LoadTinyMoe, AMissingExpertIsNamed) {
  const std::string dir = Checkpoints::root() + "/qwen3moe-f16";
  test::TempDir copy;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::filesystem::copy(f.path(), copy.path() + "/" + f.path().filename().string());
  }
  // The same checkpoint with one expert fewer than config.json's num_experts.
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  cfg["num_experts"] = 9;
  std::ofstream(copy.path() + "/config.json", std::ios::trunc) << cfg.dump();
  test::expect_throw<InputError>([&] { models::load_checkpoint(copy.path(), {.progress = false}); },
                                 {"mlp.gate.weight"});
}

TEST(LoadTiny, ShardedCheckpointReadsThroughItsIndex) {
  const std::string dir = Checkpoints::root() + "/llama-f16";
  ASSERT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  ASSERT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
  EXPECT_EQ(models::load_checkpoint(dir, {.progress = false}).layers.size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Bad checkpoints: one sentence, naming the file and the tensor (or config field).

struct BadCase {
  std::string name;
  std::vector<std::string> needles;  // "{dir}" is replaced by the checkpoint's directory
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

std::string bad_name(const testing::TestParamInfo<BadCase>& info) {
  std::string s = info.param.name;
  for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

const std::string kVictim = "model.layers.1.self_attn.k_proj.weight";

std::vector<BadCase> bad_cases() {
  return {
      {"missing-shard", {"{dir}/model-00002-of-00002.safetensors", "is missing"}},
      {"index-names-absent-tensor", {"{dir}/model.safetensors.index.json", "model.layers.0.mlp.extra.weight"}},
      {"missing-tensor", {"{dir}", "model.layers.1.mlp.up_proj.weight", "missing"}},
      {"wrong-shape", {"{dir}/model.safetensors", kVictim, "[128, 248]", "[128, 256]"}},
      {"wrong-dtype", {"{dir}/model.safetensors", "model.norm.weight", "I32"}},
      {"truncated", {"{dir}/model.safetensors", "truncated"}},
      {"lying-offsets", {"{dir}/model.safetensors", "lm_head.weight", "outside the data area"}},
      {"size-mismatch", {"{dir}/model.safetensors", kVictim, "data_offsets"}},
      {"header-too-long", {"{dir}/model.safetensors", "header claims"}},
      {"overlap", {"{dir}/model.safetensors", "overlaps", "model.layers.1.self_attn.q_proj.weight"}},
      {"unknown-dtype", {"{dir}/model.safetensors", kVictim, "\"F4\""}},
      {"unknown-quant", {"{dir}/config.json", "quant_method", "bitsandbytes"}},
      {"unknown-architecture", {"{dir}/config.json", "GPTNeoXForCausalLM"}},
      {"nan-scales", {"{dir}/model.safetensors", "model.layers.0.self_attn.v_proj.scales[1][3]", "nan"}},
      {"nan-fp8-scale", {"{dir}/model.safetensors", "model.layers.1.mlp.down_proj.weight_scale_inv[0][1]", "nan"}},
      {"nan-nvfp4-block-scale",
       {"{dir}/model.safetensors", "model.layers.0.mlp.gate_proj", "weight_scale[2][3]", "E4M3 NaN"}},
      {"bf16-overflow", {"{dir}/model.safetensors", "model.layers.1.mlp.up_proj.weight[0][5]", "beyond fp16's range"}},
      {"nan-fp8-b32-scale",
       {"{dir}/model.safetensors", "model.layers.0.self_attn.o_proj.weight_scale_inv[1][2]", "UE8M0 NaN byte 255"}},
      {"fp8-b32-scale-out-of-range",
       {"{dir}/model.safetensors", "model.layers.0.self_attn.o_proj.weight_scale_inv[1][2]", "2^-20", "[-14, 7]"}},
      {"fp8-b32-scale-not-power-of-two",
       {"{dir}/model.safetensors", "model.layers.1.mlp.gate_proj.weight_scale_inv[3][4]", "not a power of two"}},
      {"fp8-b32-wrong-scale-shape",
       {"{dir}/model.safetensors", "model.layers.0.mlp.down_proj.weight_scale_inv", "[2, 2]", "[8, 8]",
        "32×32 blocks"}},
      {"fp8-b32-without-ue8m0", {"{dir}/config.json", "quantization_config.weight_block_size", "[32, 32]", "ue8m0"}},
      {"too-many-layers", {"{dir}", "model.layers.16777215.input_layernorm.weight", "missing"}},
  };
}

class BadCheckpoint : public testing::TestWithParam<BadCase> {};

TEST_P(BadCheckpoint, IsOneSentenceNamingFileAndTensor) {
  const BadCase& c = GetParam();
  const std::string dir = Checkpoints::root() + "/bad-" + c.name;
  std::string what;
  try {
    models::load_checkpoint(dir, {.progress = false});
    FAIL() << "loaded without an error";
  } catch (const InputError& e) {
    what = e.what();
  }
  for (std::string needle : c.needles) {
    if (auto at = needle.find("{dir}"); at != std::string::npos) needle.replace(at, 5, dir);
    EXPECT_TRUE(test::contains(what, needle)) << "message lacks \"" << needle << "\": " << what;
  }
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  EXPECT_EQ(what.back(), '.') << what;
}

INSTANTIATE_TEST_SUITE_P(Each, BadCheckpoint, testing::ValuesIn(bad_cases()), bad_name);

TEST(BadCheckpoint, NoSafetensorsIsNamed) {
  test::TempDir dir;
  test::write_file(dir / "config.json", test::read_file(Checkpoints::root() + "/llama-f16/config.json"));
  test::expect_throw<InputError>([&] { models::load_checkpoint(dir.path(), {.progress = false}); },
                                 {dir.path(), "model.safetensors"});
}

// Headers written by hand: every malformed field is refused without reading outside the file.
TEST(Safetensors, MalformedHeadersAreRefused) {
  test::TempDir dir;
  auto file_with = [&](const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int b = 0; b < 8; ++b) bytes[size_t(b)] = char((header.size() >> (8 * b)) & 0xFF);
    bytes += header + std::string(data_bytes, '\0');
    const std::string path = dir / "x.safetensors";
    test::write_file(path, bytes);
    return path;
  };
  auto refused = [&](const std::string& header, size_t data_bytes, std::initializer_list<std::string_view> needles) {
    const std::string path = file_with(header, data_bytes);
    test::expect_throw<InputError>([&] { models::SafetensorsFile f(path); }, needles);
  };
  refused("[1, 2]", 0, {"JSON object"});
  refused("{\"a\": ", 0, {"not valid JSON"});
  refused(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 1e400]}})", 4, {"not valid JSON"});
  refused(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}, "__metadata__": 3})", 4, {"__metadata__"});
  refused(R"({"a": {"dtype": "F16", "shape": [-2], "data_offsets": [0, 4]}})", 4, {"tensor a", "shape"});
  refused(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [4, 0]}})", 4, {"tensor a", "outside"});
  refused(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0]}})", 4, {"tensor a", "data_offsets"});
  refused(R"({"a": {"dtype": "F16", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
          {"tensor a", "too large"});
  // 2^61 F64 or 2^62 I32 elements are 2^64 bytes, which wrapped to the 0 of data_offsets [0, 0].
  refused(R"({"a": {"dtype": "F64", "shape": [2305843009213693952], "data_offsets": [0, 0]}})", 0,
          {"tensor a", "shape"});
  refused(R"({"a": {"dtype": "I32", "shape": [2147483648, 2147483648], "data_offsets": [0, 0]}})", 0,
          {"tensor a", "too large"});
  refused(R"({"a": {"dtype": "F16", "shape": [2]}})", 4, {"tensor a", "data_offsets"});
  refused(R"({"a": {"dtype": 5, "shape": [2], "data_offsets": [0, 4]}})", 4, {"tensor a", "dtype 5"});
  test::write_file(dir / "short.safetensors", "abc");
  test::expect_throw<InputError>([&] { models::SafetensorsFile f(dir / "short.safetensors"); }, {"truncated"});
  test::expect_throw<InputError>([&] { models::SafetensorsFile f(dir / "absent.safetensors"); }, {"cannot open"});

  const std::string ok = file_with(
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "BF16", "shape": [2, 1], "data_offsets": [0, 4]},
          "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
      4);
  models::SafetensorsFile f(ok);
  ASSERT_NE(f.find("a"), nullptr);
  EXPECT_EQ(f.find("a")->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(f.find("a")->dtype, models::Dtype::kBF16);
  EXPECT_EQ(f.find("e")->elements(), 0);
  EXPECT_EQ(f.find("b"), nullptr);
}

// Random damage to a real file's header and random truncations: each open either succeeds with
// every tensor inside the file or is an InputError; nothing else (run under ASan/UBSan too).
TEST(Safetensors, DamagedFilesNeverCrash) {
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "a.qweight": {"dtype": "I32", "shape": [4, 2], "data_offsets": [0, 32]},)"
      R"( "a.scales": {"dtype": "F16", "shape": [2, 8], "data_offsets": [32, 64]},)"
      R"( "b.weight": {"dtype": "BF16", "shape": [3, 4], "data_offsets": [64, 88]},)"
      R"( "b.weight_scale_inv": {"dtype": "F32", "shape": [1, 1], "data_offsets": [88, 92]},)"
      R"( "c.weight": {"dtype": "F8_E4M3", "shape": [2, 18], "data_offsets": [92, 128]}})";
  std::string good(8, '\0');
  for (int b = 0; b < 8; ++b) good[size_t(b)] = char((header.size() >> (8 * b)) & 0xFF);
  good += header + std::string(128, '\x11');
  const size_t header_end = 8 + header.size();
  test::TempDir dir;
  const std::string path = dir / "damaged.safetensors";
  std::mt19937 rng(1);
  auto open_or_refuse = [&](const std::string& bytes) {
    test::write_file(path, bytes);
    try {
      models::SafetensorsFile f(path);
      for (const auto& [name, t] : f.tensors()) {
        EXPECT_EQ(t.bytes.size(), size_t(t.elements()) * models::dtype_size(t.dtype)) << name;
      }
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  const std::string chars = "0123456789[]{},:\"- eE.x";
  test::write_file(path, good);
  EXPECT_EQ(models::SafetensorsFile(path).tensors().size(), 5u);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % header_end;
      bytes[at] = at < 8 ? char(rng()) : chars[rng() % chars.size()];
    }
    open_or_refuse(bytes);
  }
  for (size_t length = 0; length < good.size(); ++length) open_or_refuse(good.substr(0, length));
}

// bf16 → fp16: rounds to nearest even; values at fp16's edge are kept, beyond it refused.
TEST(TensorValues, Bf16ToF16RoundsAndRefusesOverflow) {
  auto bf16_tensor = [](std::vector<uint16_t>& bits) {
    models::Tensor t;
    t.name = "w";
    t.dtype = models::Dtype::kBF16;
    t.shape = {int64_t(bits.size())};
    t.bytes = {reinterpret_cast<const uint8_t*>(bits.data()), bits.size() * 2};
    static const std::string file = "f.safetensors";
    t.file = &file;
    return t;
  };
  // 1.0, -2.5, 65280 (the largest bf16 below fp16's max), 2^-20 (an fp16 subnormal).
  std::vector<uint16_t> ok = {0x3F80, 0xC020, 0x477F, 0x3580};
  const auto h = models::read_f16(bf16_tensor(ok));
  EXPECT_EQ(cpu::half_to_float(h[0]), 1.f);
  EXPECT_EQ(cpu::half_to_float(h[1]), -2.5f);
  EXPECT_EQ(cpu::half_to_float(h[2]), 65280.f);
  EXPECT_EQ(cpu::half_to_float(h[3]), std::ldexp(1.f, -20));
  std::vector<uint16_t> big = {0x3F80, 0x4780};  // 65536
  test::expect_throw<InputError>([&] { models::read_f16(bf16_tensor(big)); },
                                 {"f.safetensors: tensor w[1]", "65536", "fp16"});
  std::vector<uint16_t> inf = {0x7F80};
  test::expect_throw<InputError>([&] { models::read_f16(bf16_tensor(inf)); }, {"tensor w[0]", "not a finite number"});
}

// F16 is copied block by block (16384 values) with each block checked: every bit pattern comes
// through, and a NaN or infinity in a later block, or the last element, is named exactly.
TEST(TensorValues, F16IsCopiedAndEveryBlockChecked) {
  std::mt19937 rng(7);
  std::vector<uint16_t> bits(40000);
  for (auto& b : bits) b = uint16_t(rng() % 0x7C00) | uint16_t(rng() % 2 ? 0x8000 : 0);  // finite, both signs
  static const std::string file = "f.safetensors";
  auto tensor = [](const std::vector<uint16_t>& v) {
    models::Tensor t;
    t.name = "w";
    t.dtype = models::Dtype::kF16;
    t.shape = {int64_t(v.size())};
    t.bytes = {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 2};
    t.file = &file;
    return t;
  };
  EXPECT_EQ(models::read_f16(tensor(bits)), bits);
  std::vector<uint8_t> into(bits.size() * 2);
  models::read_f16_into(tensor(bits), into.data());
  EXPECT_EQ(std::memcmp(into.data(), bits.data(), into.size()), 0);
  for (size_t at : {size_t(0), size_t(16383), size_t(16384), size_t(20001), bits.size() - 1}) {
    for (uint16_t bad : {uint16_t(0x7C00), uint16_t(0xFC00), uint16_t(0x7E01)}) {
      std::vector<uint16_t> v = bits;
      v[at] = bad;
      test::expect_throw<InputError>([&] { models::read_f16(tensor(v)); },
                                     {"tensor w[" + std::to_string(at) + "]", "not a finite number"});
    }
  }
}

// fp8 blocks whose weight_scale_inv ships as UE8M0 bytes (scale_fmt "ue8m0": F8_E8M0, as
// torch.float8_e8m0fnu saves it, or U8): each block's multiplier is 2^(b − 127), for 128×128
// blocks (fp8b128, partial blocks at the edges) and 32×32 blocks (fp8b32) alike, on random
// codes and exponents against that formula.
TEST(LoadLinear, Ue8m0ScaleBytesDecodeExactly) {
  const int64_t n = 40, k = 160;
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(size_t(n * k));
  for (auto& c : codes) {
    c = uint8_t(rng());
    if ((c & 0x7F) == 0x7F) c ^= 1;  // no E4M3 NaN codes
  }
  for (const int block : {128, 32}) {
    const int64_t rows = (n + block - 1) / block, cols = (k + block - 1) / block;
    std::vector<uint8_t> scale(size_t(rows * cols));
    for (auto& b : scale) b = uint8_t(127 - 14 + int(rng() % 22));  // 2^-14 … 2^7
    for (const char* dtype : {"F8_E8M0", "U8"}) {
      SCOPED_TRACE(std::to_string(block) + " " + dtype);
      test::TempDir dir;
      const std::string header =
          std::string(R"({"l.weight": {"dtype": "F8_E4M3", "shape": [40, 160], "data_offsets": [0, 6400]}, )") +
          R"("l.weight_scale_inv": {"dtype": ")" + dtype + R"(", "shape": [)" + std::to_string(rows) + ", " +
          std::to_string(cols) + R"(], "data_offsets": [6400, )" + std::to_string(6400 + scale.size()) + "]}}";
      std::string bytes(8, '\0');
      for (int b = 0; b < 8; ++b) bytes[size_t(b)] = char((header.size() >> (8 * b)) & 0xFF);
      bytes += header + std::string(codes.begin(), codes.end()) + std::string(scale.begin(), scale.end());
      test::write_file(dir / "model.safetensors", bytes);
      const models::CheckpointFiles files(dir.path());
      models::QuantConfig quant{models::QuantConfig::kFp8Block, 8, block, false, true, block, block, true};
      const PackedWeight w = models::load_linear(files, "l", n, k, quant);
      EXPECT_EQ(w.format, block == 32 ? WeightFormat::kFp8B32 : WeightFormat::kFp8B128);
      const std::vector<float> got = cpu::dequantize(w);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const int e = int(scale[size_t((r / block) * cols + c / block)]) - 127;
          const float want = std::ldexp(quant::e4m3_to_float(codes[size_t(r * k + c)]), e);
          ASSERT_EQ(got[size_t(r * k + c)], want) << "W[" << r << "][" << c << "]";
        }
      }
      // Without scale_fmt "ue8m0" the bytes are not scales: a 128-block config wants floats.
      if (block == 128) {
        quant.ue8m0_scales = false;
        test::expect_throw<InputError>([&] { models::load_linear(files, "l", n, k, quant); },
                                       {"l.weight_scale_inv", dtype, "F32"});
      }
    }
  }
}

// load_stacked: float parts (F16, BF16, F32) are read straight into one weight, the same bytes as
// stacking each part's load_linear; a float part beside a quantised one is refused as stack_rows
// refuses it.
TEST(LoadStacked, FloatPartsReadIntoOneWeightAndMixedPartsRefused) {
  struct Part {
    std::string name, dtype;
    int64_t rows, cols;
    std::string data;
  };
  std::mt19937 rng(11);
  auto values = [&](size_t count, size_t width) {
    std::string d(count * width, '\0');
    for (size_t i = 0; i < count; ++i) {
      const float f = float(int(rng() % 2001) - 1000) / 256.f;
      if (width == 4) {
        std::memcpy(&d[i * 4], &f, 4);
      } else {
        const uint16_t h = cpu::float_to_half(f);
        std::memcpy(&d[i * 2], &h, 2);
      }
    }
    return d;
  };
  const int64_t k = 24;
  std::vector<Part> parts = {{"a.weight", "F16", 5, k, values(5 * k, 2)},
                             {"b.weight", "F32", 3, k, values(3 * k, 4)},
                             {"c.weight", "F16", 7, k, values(7 * k, 2)}};
  std::string codes(size_t(16 * k), '\0');
  for (auto& c : codes) c = char(rng() % 0x70);  // finite E4M3 codes
  parts.push_back({"q.weight", "F8_E4M3", 16, k, codes});
  parts.push_back({"q.weight_scale_inv", "F32", 1, 1, values(1, 4)});
  std::string header = "{", data;
  for (const Part& t : parts) {
    header += (header.size() > 1 ? ", \"" : "\"") + t.name + R"(": {"dtype": ")" + t.dtype + R"(", "shape": [)" +
              std::to_string(t.rows) + ", " + std::to_string(t.cols) + R"(], "data_offsets": [)" +
              std::to_string(data.size()) + ", " + std::to_string(data.size() + t.data.size()) + "]}";
    data += t.data;
  }
  header += "}";
  std::string bytes(8, '\0');
  for (int b = 0; b < 8; ++b) bytes[size_t(b)] = char((header.size() >> (8 * b)) & 0xFF);
  test::TempDir dir;
  test::write_file(dir / "model.safetensors", bytes + header + data);
  const models::CheckpointFiles files(dir.path());
  const models::QuantConfig none{};
  const PackedWeight got = models::load_stacked(files, {"a", "b", "c"}, {5, 3, 7}, k, none, "layer 0 a|b|c");
  const PackedWeight want =
      models::stack_rows({models::load_linear(files, "a", 5, k, none), models::load_linear(files, "b", 3, k, none),
                          models::load_linear(files, "c", 7, k, none)},
                         "layer 0 a|b|c");
  EXPECT_EQ(got.format, WeightFormat::kF16);
  EXPECT_EQ(got.n, 15);
  EXPECT_EQ(got.k, k);
  EXPECT_EQ(got.qweight, want.qweight);
  // A wrong shape is named as load_linear names it.
  test::expect_throw<InputError>(
      [&] {
        models::load_stacked(files, {"a", "b"}, {5, 4}, k, none, "x");
      },
      {"b.weight", "4 out × 24 in features"});
  // fp8 (128×128 blocks) beside a float part: refused as stack_rows refuses it.
  const models::QuantConfig fp8{models::QuantConfig::kFp8Block, 8, 128, false, true, 128, 128, false};
  test::expect_throw<InputError>(
      [&] {
        models::load_stacked(files, {"q", "a"}, {16, 5}, k, fp8, "layer 0 q|a");
      },
      {"layer 0 q|a", "f16"});
  test::expect_throw<InputError>(
      [&] {
        models::load_stacked(files, {"a", "q"}, {5, 16}, k, fp8, "layer 0 a|q");
      },
      {"layer 0 a|q", "f16"});
}

// Fusing parts that cannot share one packed weight is refused with the layer named.
TEST(StackRows, RefusesPartsThatCannotShareOneWeight) {
  PackedWeight a, b;
  a.format = WeightFormat::kNvfp4;
  b.format = WeightFormat::kNvfp4;
  a.n = b.n = 16;
  a.k = b.k = 32;
  a.group = b.group = 16;
  a.global_scale = 1.f;
  b.global_scale = 2.f;
  test::expect_throw<InputError>(
      [&] {
        models::stack_rows({a, b}, "layer 3 q|k|v");
      },
      {"layer 3 q|k|v", "weight_scale_2"});
  b.format = WeightFormat::kF16;
  test::expect_throw<InputError>([&] { models::stack_rows({a, b}, "layer 3 q|k|v"); }, {"layer 3 q|k|v", "f16"});
  a.format = b.format = WeightFormat::kGptq4;
  a.perm = {1, 0};
  b.perm = {0, 1};
  test::expect_throw<InputError>([&] { models::stack_rows({a, b}, "layer 3 q|k|v"); }, {"act-order", "g_idx"});
  a.perm = b.perm = {};
  a.format = b.format = WeightFormat::kFp8B128;
  a.group = b.group = 128;
  test::expect_throw<InputError>([&] { models::stack_rows({a, b}, "layer 3 q|k|v"); }, {"straddle"});
  // fp8b32: 16 rows end inside a 32-row block; 32 rows do not.
  a.format = b.format = WeightFormat::kFp8B32;
  a.group = b.group = 32;
  test::expect_throw<InputError>([&] { models::stack_rows({a, b}, "layer 3 q|k|v"); }, {"32 rows", "row 16"});
  a.n = 32;
  EXPECT_EQ(models::stack_rows({a, b}, "layer 3 q|k|v").n, 48);
}

}  // namespace
}  // namespace onecat

// A hub id ("org/name") is found in the Hugging Face cache as huggingface-cli leaves it:
// models--org--name/snapshots/<commit>, refs/main naming the commit; directories and other
// names pass through to the loader unchanged.
TEST(LocateCheckpoint, HubIdsComeFromTheHuggingFaceCache) {
  using onecat::models::locate_checkpoint;
  onecat::test::TempDir cache;
  const std::string repo = cache / "models--org--tiny-1.5B";
  std::filesystem::create_directories(repo + "/snapshots/aaa");
  std::filesystem::create_directories(repo + "/snapshots/bbb");
  std::filesystem::create_directories(repo + "/refs");
  onecat::test::write_file(repo + "/refs/main", "bbb\n");
  onecat::test::ScopedEnv hub("HF_HUB_CACHE", cache.path());
  EXPECT_EQ(locate_checkpoint("org/tiny-1.5B"), repo + "/snapshots/bbb");
  EXPECT_EQ(locate_checkpoint(cache.path()), cache.path());        // a directory as given
  EXPECT_EQ(locate_checkpoint("qwen3-8b:awq4"), "qwen3-8b:awq4");  // not a hub id: the loader's to judge
  EXPECT_EQ(locate_checkpoint("/no/such/dir"), "/no/such/dir");
  // Two snapshots and no refs/main: ambiguous; one snapshot: that one.
  std::filesystem::remove(repo + "/refs/main");
  onecat::test::expect_throw<onecat::InputError>([&] { locate_checkpoint("org/tiny-1.5B"); },
                                                 {"org/tiny-1.5B", "ambiguous"});
  std::filesystem::remove_all(repo + "/snapshots/aaa");
  EXPECT_EQ(locate_checkpoint("org/tiny-1.5B"), repo + "/snapshots/bbb");
  onecat::test::expect_throw<onecat::InputError>([&] { locate_checkpoint("org/other"); },
                                                 {"org/other", cache.path(), "huggingface-cli download org/other"});
  // Without HF_HUB_CACHE: HF_HOME/hub.
  onecat::test::ScopedEnv no_hub("HF_HUB_CACHE", std::nullopt);
  onecat::test::TempDir home;
  std::filesystem::create_directories(home / "hub/models--org--x/snapshots/c1");
  onecat::test::ScopedEnv hf_home("HF_HOME", home.path());
  EXPECT_EQ(locate_checkpoint("org/x"), home / "hub/models--org--x/snapshots/c1");
}
