// The model's forward pass on the CPU backend (models/model/), on the tiny checkpoints of
// tools/make_tiny_checkpoint.py written at test time:
//  - one prefill, chunked prefills, prefill + decode steps and mixed batches of several
//    sequences give the same logits, bit for bit (every op of the CPU backend computes a row
//    from that row and the cached keys alone, so nothing may differ);
//  - the logits match transformers' (fp32, eager attention) committed in tests/data/golden/ by
//    tools/golden_logits.py, under the metric below, for every architecture × weight format;
//  - the metric has power: RoPE theta off by 1 %, a wrong GQA mapping or two layers swapped
//    fail it;
//  - generate, KV page accounting and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "model_test_util.h"
#include "models/checkpoint/loaded_model.h"
#include "models/checkpoint/safetensors.h"
#include "models/checkpoint/tensor_values.h"
#include "models/model/generate.h"
#include "models/model/generation_config.h"
#include "models/model/model.h"
#include "models/quant/pack.h"
#include "runtime/cpu/sampling.h"
#include "runtime/cuda/driver.h"
#include "test_util.h"

namespace onecat {
namespace {

using nlohmann::json;

void expect_bits_equal(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << what << ": row " << i / size_t(vocab) << ", token " << i % size_t(vocab) << ": " << got[i] << " vs "
        << want[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Consistency: the batch's shape never changes a row's logits.

using Case = ModelCase;

class Consistency : public testing::TestWithParam<Case> {};

TEST_P(Consistency, ChunkedPrefillAndDecodeEqualOnePrefill) {
  const LoadedModel loaded = load(Checkpoints::get(GetParam().args()));
  const int64_t vocab = loaded.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(150, vocab, 7);
  Model whole(loaded, options(256));
  const std::vector<float> one = logits_by_steps(whole, prompt, {prompt.size()}, 0);
  ASSERT_EQ(one.size(), prompt.size() * size_t(vocab));
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
  // Chunks that end inside and on page boundaries (pages of 16), a one-token prefill chunk,
  // and a chunk limit (max_batch_tokens 64) that splits the longest.
  Model chunked(loaded, options(64));
  expect_bits_equal(logits_by_steps(chunked, prompt, {1, 15, 16, 33, 100}, 0), one, vocab, "chunked prefill");
  expect_bits_equal(logits_by_steps(chunked, prompt, {37}, 50), one, vocab, "prefill + 50 decode steps");
  // Pages of 1 and 7 tokens: the block table, not the page size, decides where keys live.
  Model odd_pages(loaded, options(256, 512, 7));
  expect_bits_equal(logits_by_steps(odd_pages, prompt, {64}, 20), one, vocab, "pages of 7");
  Model single_pages(loaded, options(256, 512, 1));
  expect_bits_equal(logits_by_steps(single_pages, prompt, {prompt.size()}, 0), one, vocab, "pages of 1");
}

INSTANTIATE_TEST_SUITE_P(Tiny, Consistency, testing::ValuesIn(all_model_cases()), model_case_name);
// The MoE layer routes each token alone and sums its experts in a fixed order: bit-equal too.
INSTANTIATE_TEST_SUITE_P(TinyMoe, Consistency, testing::ValuesIn(moe_model_cases()), model_case_name);

// An fp8 KV cache (--kv-cache-dtype): every step reads the same codes, so chunked prefill and
// decode give one prefill's logits bit for bit, and the logits stay near the fp16 cache's (the
// codes round K and V to 3 or 2 mantissa bits), yet not equal to them: the cache really holds fp8.
TEST(ModelForward, Fp8KvCacheIsConsistentAndNearFp16) {
  for (const ModelCase& c : {ModelCase{"qwen3", "f16", ""}, ModelCase{"llama", "awq4", ""},
                             ModelCase{"mistral", "f16", "--sliding-window 48"}}) {
    const LoadedModel loaded = load(Checkpoints::get(c.args()));
    const int64_t vocab = loaded.config.vocab;
    const std::vector<int32_t> prompt = random_prompt(150, vocab, 5);
    Model f16(loaded, options(256));
    const std::vector<float> exact = logits_by_steps(f16, prompt, {prompt.size()}, 0);
    for (models::KvCacheDtype dtype : {models::KvCacheDtype::kE4m3, models::KvCacheDtype::kE5m2}) {
      const std::string what = c.args() + " " + models::kv_cache_dtype_name(dtype);
      ModelOptions o = options(256);
      o.kv_cache_dtype = dtype;
      Model whole(loaded, o);
      const std::vector<float> one = logits_by_steps(whole, prompt, {prompt.size()}, 0);
      o.max_batch_tokens = 64;
      Model chunked(loaded, o);
      expect_bits_equal(logits_by_steps(chunked, prompt, {1, 15, 16, 33}, 40), one, vocab, what + " chunked + decode");
      const Distance d = distance(one.data(), exact.data(), int64_t(prompt.size()), vocab);
      // Measured on these checkpoints: max |Δ|/spread 0.019–0.028 (e4m3), 0.041–0.048 (e5m2);
      // the bounds sit about 3× above.
      EXPECT_GT(d.relative_error, 1e-3) << what << ": " << d;
      EXPECT_LT(d.relative_error, dtype == models::KvCacheDtype::kE4m3 ? 0.08 : 0.15) << what << ": " << d;
    }
  }
}

// A checkpoint's calibrated KV scales (self_attn.k_scale / v_scale) are what an fp8 cache
// divides by and multiplies back: 2 keeps the logits as near the fp16 cache's as 1 does, 1000
// pushes K and V into E4M3's subnormals and moves them several times as far (measured: 0.019,
// 0.019 and 0.44 of the spread); an fp16 cache
// ignores them; a scale that is not positive is one sentence naming the tensor.
TEST(ModelForward, Fp8KvCacheTakesTheCheckpointsScales) {
  const LoadedModel plain = load(Checkpoints::get("--arch qwen3 --format f16"));
  const LoadedModel two = load(Checkpoints::get("--arch qwen3 --format f16 --kv-scales 2"));
  const LoadedModel big = load(Checkpoints::get("--arch qwen3 --format f16 --kv-scales 1000"));
  ASSERT_EQ(two.layers[1].k_scale, 2.f);
  ASSERT_EQ(big.layers[0].v_scale, 1000.f);
  const int64_t vocab = plain.config.vocab;
  const std::vector<int32_t> prompt = random_prompt(120, vocab, 9);
  const auto logits = [&](const LoadedModel& m, models::KvCacheDtype dtype) {
    ModelOptions o = options(256);
    o.kv_cache_dtype = dtype;
    Model model(m, o);
    return logits_by_steps(model, prompt, {50}, 20);
  };
  const std::vector<float> exact = logits(plain, models::KvCacheDtype::kF16);
  expect_bits_equal(logits(big, models::KvCacheDtype::kF16), exact, vocab, "fp16 cache, scales 1000");
  const int64_t rows = int64_t(prompt.size());
  const Distance one = distance(logits(plain, models::KvCacheDtype::kE4m3).data(), exact.data(), rows, vocab);
  const Distance at_two = distance(logits(two, models::KvCacheDtype::kE4m3).data(), exact.data(), rows, vocab);
  const Distance at_1000 = distance(logits(big, models::KvCacheDtype::kE4m3).data(), exact.data(), rows, vocab);
  EXPECT_LT(at_two.relative_error, 2 * one.relative_error) << at_two << " against " << one;
  EXPECT_GT(at_1000.relative_error, 3 * one.relative_error) << at_1000 << " against " << one;
  for (const char* bad : {"-1", "0"}) {
    try {
      load(Checkpoints::get(std::string("--arch qwen3 --format f16 --kv-scales ") + bad));
      ADD_FAILURE() << "kv scale " << bad << " loaded";
    } catch (const InputError& e) {
      EXPECT_TRUE(test::contains(e.what(), "self_attn.k_scale")) << e.what();
      EXPECT_TRUE(test::contains(e.what(), "must be positive")) << e.what();
    }
  }
}

// Several sequences in one step — decodes and prefill chunks mixed, in any order of the
// caller — give each the logits it gets alone.
TEST(ModelForward, MixedBatchesEqualSequencesAlone) {
  for (const char* arch : {"qwen3", "mistral"}) {
    SCOPED_TRACE(arch);
    const LoadedModel loaded = load(Checkpoints::of(arch, "awq4"));
    const int64_t vocab = loaded.config.vocab;
    const std::vector<int32_t> a = random_prompt(90, vocab, 1), b = random_prompt(70, vocab, 2),
                               c = random_prompt(40, vocab, 3);
    Model alone(loaded, options(256));
    const std::vector<float> la = logits_by_steps(alone, a, {90}, 0), lb = logits_by_steps(alone, b, {70}, 0),
                             lc = logits_by_steps(alone, c, {40}, 0);
    auto row = [&](const std::vector<float>& l, size_t r) {
      return std::vector<float>(l.begin() + std::ptrdiff_t(r * vocab), l.begin() + std::ptrdiff_t((r + 1) * vocab));
    };
    Model batched(loaded, options(128));
    Sequence sa, sb, sc;
    // Step 1: a's first 50 tokens and b's first 30; step 2: a decode, b's next 40, c's first
    // 39; then c decodes while a and b decode too, the callers' order shuffled.
    auto step = [&](std::vector<Model::Chunk> chunks) { return batched.step(chunks); };
    auto span = [](const std::vector<int32_t>& v, size_t at, size_t n) { return std::span(v).subspan(at, n); };
    auto out = step({{&sa, span(a, 0, 50)}, {&sb, span(b, 0, 30)}});
    expect_bits_equal(out[0], row(la, 49), vocab, "a after 50");
    expect_bits_equal(out[1], row(lb, 29), vocab, "b after 30");
    out = step({{&sb, span(b, 30, 40)}, {&sa, span(a, 50, 1)}, {&sc, span(c, 0, 39)}});
    expect_bits_equal(out[0], row(lb, 69), vocab, "b after 70");
    expect_bits_equal(out[1], row(la, 50), vocab, "a decode 51");
    expect_bits_equal(out[2], row(lc, 38), vocab, "c after 39");
    for (size_t t = 51; t < 90; ++t) {
      std::vector<Model::Chunk> chunks{{&sa, span(a, t, 1)}};
      if (t == 51) chunks.insert(chunks.begin(), Model::Chunk{&sc, span(c, 39, 1)});
      out = step(chunks);
      expect_bits_equal(out.back(), row(la, t), vocab, "a decode " + std::to_string(t + 1));
      if (t == 51) expect_bits_equal(out[0], row(lc, 39), vocab, "c decode 40");
    }
    batched.release(sa);
    batched.release(sb);
    batched.release(sc);
    EXPECT_EQ(batched.pages().free_pages(), batched.pages().pages());
  }
}

// A decode step, and a step verifying blocks of q tokens alone, padded to a CUDA graph's batch
// size (pad_uniform_batch, what the GPU model does before a graph replay): the real rows'
// logits are the unpadded steps' bits, and the padding's K and V land on the scratch page alone,
// so later steps are unchanged too.
TEST(ModelForward, PaddedUniformStepsChangeNoRealRow) {
  EXPECT_EQ(model::decode_graph_sizes(1), std::vector<int>({1}));
  EXPECT_EQ(model::decode_graph_sizes(6), std::vector<int>({1, 2, 4, 6}));
  EXPECT_EQ(model::decode_graph_sizes(24), std::vector<int>({1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(model::decode_graph_sizes(30), std::vector<int>({1, 2, 4, 8, 16, 24, 30}));
  EXPECT_EQ(model::decode_graph_size(3, 30), 4);
  EXPECT_EQ(model::decode_graph_size(17, 30), 24);
  EXPECT_EQ(model::decode_graph_size(25, 30), 30);
  test::expect_throw<Error>([] { model::decode_graph_size(31, 30); }, {"max_sequences 30"});

  const LoadedModel loaded = load(Checkpoints::of("qwen3moe", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  const int pending = 6;  // tokens each sequence runs through padded steps
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> want;
  Model alone(loaded, options(128));
  for (uint32_t i = 0; i < 3; ++i) {
    prompts.push_back(random_prompt(20 + 7 * i + pending, vocab, 40 + i));
    want.push_back(logits_by_steps(alone, prompts.back(), {64}, pending));
  }
  for (int q : {1, 3}) {
    SCOPED_TRACE("blocks of " + std::to_string(q));
    Model m(loaded, options(128));
    const int page = m.pages().page_size();
    const int32_t scratch = *m.pages().allocate();
    std::vector<Sequence> seqs(3);
    for (size_t i = 0; i < 3; ++i) {
      m.extend(seqs[i], std::span(prompts[i]).subspan(0, prompts[i].size() - pending));
    }
    for (int step = 0; step < pending / q; ++step) {
      std::vector<int32_t> ids, positions, slots, cu_q{0}, seq_lens, table, rows;
      int max_pages = 0;
      for (size_t i = 0; i < 3; ++i) {
        Sequence& s = seqs[i];
        while (int64_t(s.pages.size()) * page < s.length + q) s.pages.push_back(*m.pages().allocate());
        max_pages = std::max(max_pages, int(s.pages.size()));
      }
      for (size_t i = 0; i < 3; ++i) {
        const Sequence& s = seqs[i];
        for (int64_t t = s.length; t < s.length + q; ++t) {
          rows.push_back(int32_t(ids.size()));
          ids.push_back(prompts[i][size_t(t)]);
          positions.push_back(int32_t(t));
          slots.push_back(s.pages[size_t(t / page)] * page + int32_t(t % page));
        }
        cu_q.push_back(int32_t(ids.size()));
        seq_lens.push_back(int32_t(s.length + q));
        std::vector<int32_t> row(size_t(max_pages), 0);
        std::copy(s.pages.begin(), s.pages.end(), row.begin());
        table.insert(table.end(), row.begin(), row.end());
      }
      model::ForwardBatch b;
      b.token_ids = ids, b.positions = positions, b.slot_mapping = slots;
      (q == 1 ? b.decode_sequences : b.verify_sequences) = 3;
      b.cu_q = cu_q, b.seq_lens = seq_lens, b.block_table = table, b.max_pages = max_pages, b.logit_rows = rows;
      EXPECT_EQ(model::uniform_block(b), q);
      const model::PaddedBatch padded = model::pad_uniform_batch(b, 4, scratch, page);
      ASSERT_EQ(padded.batch.sequences(), 4);
      EXPECT_EQ(padded.batch.decode_sequences, q == 1 ? 4 : 0);
      EXPECT_EQ(padded.batch.verify_sequences, q == 1 ? 0 : 4);
      EXPECT_EQ(padded.slots.back(), scratch * page + q - 1);
      std::vector<float> got(size_t(4 * q * vocab));
      m.forward(padded.batch, got);  // the CPU backend returns every logit row, the padding's too
      for (size_t i = 0; i < 3; ++i) {
        for (int j = 0; j < q; ++j) {
          const size_t at = prompts[i].size() - size_t(pending) + size_t(step * q + j);
          const size_t r = i * size_t(q) + size_t(j);
          const std::vector<float> row(got.begin() + std::ptrdiff_t(r * size_t(vocab)),
                                       got.begin() + std::ptrdiff_t((r + 1) * size_t(vocab)));
          const std::vector<float> ref(want[i].begin() + std::ptrdiff_t(at * size_t(vocab)),
                                       want[i].begin() + std::ptrdiff_t((at + 1) * size_t(vocab)));
          expect_bits_equal(row, ref, vocab, "sequence " + std::to_string(i) + " token " + std::to_string(at));
        }
        seqs[i].length += q;
      }
    }
    for (Sequence& s : seqs) m.release(s);
    m.pages().release(scratch);
    EXPECT_EQ(m.pages().free_pages(), m.pages().pages());
  }
  test::expect_throw<Error>(
      [&] {
        model::ForwardBatch prefill;
        const std::vector<int32_t> two{1, 2}, at{0, 1}, cu{0, 2}, len{2}, tab{0}, last{1};
        prefill.token_ids = two, prefill.positions = at, prefill.slot_mapping = two;
        prefill.cu_q = cu, prefill.seq_lens = len, prefill.block_table = tab, prefill.max_pages = 1;
        prefill.logit_rows = last;
        EXPECT_EQ(model::uniform_block(prefill), 0);
        model::pad_uniform_batch(prefill, 2, 1, 16);
      },
      {"only a uniform batch"});
}

// Verify blocks (ForwardBatch::verify_sequences) mixed with a decode and a prefill chunk, then
// alone: every row's logits are those of the prompt's one prefill, bit for bit.
TEST(ModelForward, VerifyBlocksGiveThePrefillsLogits) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3", "awq4"));
  const int64_t vocab = loaded.config.vocab;
  std::vector<std::vector<int32_t>> prompts;
  Model alone(loaded, options(128));
  std::vector<std::vector<float>> want;
  for (uint32_t i = 0; i < 5; ++i) {
    prompts.push_back(random_prompt(48 + 5 * i, vocab, 70 + i));
    want.push_back(logits_by_steps(alone, prompts.back(), {prompts.back().size()}, 0));
  }
  ModelOptions o = options(64);
  o.max_sequences = 8;
  Model m(loaded, o);
  m.prepare_verify(4);
  const VerifyFlow f = verify_flow(m, prompts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    expect_bits_equal(f.logits[i], rows_at(want[i], f.positions[i], vocab), vocab, "sequence " + std::to_string(i));
  }
  EXPECT_EQ(m.pages().free_pages(), m.pages().pages());
  std::vector<Sequence> one(1);
  const std::vector<int32_t> ids{1, 2};
  test::expect_throw<InputError>(
      [&] {
        m.step(std::vector<Model::Chunk>{{&one[0], std::span(ids).subspan(0, 1), true}});
      },
      {"verify block has 2 to"});
}

// fp8b32 weights are e4m3 · 2^e with e in [−14, 7], every one exact in fp16: the fp16 model of
// make_tiny_checkpoint.py's own dequantisation (reference.safetensors) is the same model, so
// the CPU logits of the two must be the same bits (both gemms decode W exactly and sum in the
// same order). Both scale containers (F8_E8M0 bytes and F32 powers of two) are checked.
TEST(ModelForward, Fp8B32EqualsItsDequantisedFp16Model) {
  for (const char* format : {"fp8-b32", "fp8-b32-f32"}) {
    for (const char* arch : {"qwen3", "llama"}) {
      SCOPED_TRACE(std::string(arch) + " " + format);
      const std::string dir = Checkpoints::of(arch, format);
      const LoadedModel loaded = load(dir);
      const models::SafetensorsFile reference(dir + "/reference.safetensors");
      LoadedModel dense = loaded;
      dense.config.quant = {};
      // The reference rows of `names`, stacked, as the fp16 weight replacing `w`.
      auto dequantised = [&](quant::PackedWeight& w, const std::vector<std::string>& names) {
        ASSERT_EQ(w.format, quant::WeightFormat::kFp8B32);
        std::vector<uint16_t> halves;
        for (const std::string& name : names) {
          const models::Tensor* t = reference.find(name);
          ASSERT_NE(t, nullptr) << name;
          for (float v : models::read_f32(*t)) {
            halves.push_back(cpu::float_to_half(v));
            ASSERT_EQ(cpu::half_to_float(halves.back()), v) << name << " is not exact in fp16";
          }
        }
        w = quant::pack_f16(w.n, w.k, halves);
      };
      for (size_t i = 0; i < dense.layers.size(); ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        auto& l = dense.layers[i];
        dequantised(l.qkv,
                    {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"});
        dequantised(l.o, {p + "self_attn.o_proj.weight"});
        dequantised(l.gate_up, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
        dequantised(l.down, {p + "mlp.down_proj.weight"});
      }
      const std::vector<int32_t> prompt = random_prompt(96, loaded.config.vocab, 11);
      Model quantised(loaded, options(128)), reference_model(dense, options(128));
      expect_bits_equal(logits_by_steps(quantised, prompt, {40}, 56),
                        logits_by_steps(reference_model, prompt, {40}, 56), loaded.config.vocab,
                        "fp8b32 vs its fp16 dequantisation");
    }
  }
}

// tests/data/golden (ONECAT_GOLDEN_DIR overrides): manifest.json and a .npy per case.
std::string golden_dir() {
  if (const char* d = std::getenv("ONECAT_GOLDEN_DIR"); d && *d) return d;
  return std::string(ONECAT_SOURCE_DIR) + "/tests/data/golden";
}

std::optional<json> golden_manifest() {
  const std::string path = golden_dir() + "/manifest.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  return json::parse(test::read_file(path));
}

constexpr const char* kGoldenMissing =
    "golden logits absent: run `python tools/golden_logits.py --out tests/data/golden` where torch and "
    "transformers are installed (the device) and commit the files";

// A float32 C-order .npy of shape [rows][cols] (what golden_logits.py writes).
std::vector<float> read_npy(const std::string& path, int64_t rows, int64_t cols) {
  const std::string data = test::read_file(path);
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error(path + " is not a .npy file");
  const int major = data[6];
  const size_t header_len = major == 1 ? size_t(uint8_t(data[8]) | uint8_t(data[9]) << 8)
                                       : size_t(uint8_t(data[8]) | uint8_t(data[9]) << 8 | uint8_t(data[10]) << 16);
  const size_t start = (major == 1 ? 10 : 12) + header_len;
  const std::string header = data.substr(major == 1 ? 10 : 12, header_len);
  const std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos ||
      header.find(shape) == std::string::npos || data.size() != start + size_t(rows * cols) * 4) {
    throw std::runtime_error(path + " is not float32 " + shape + ": " + header);
  }
  std::vector<float> out(size_t(rows * cols));
  std::memcpy(out.data(), data.data() + start, out.size() * 4);
  return out;
}

std::string join_args(const json& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a.get<std::string>();
  return s;
}

// The CPU forward's logits of `rows` of `prompt`, from one prefill.
std::vector<float> forward_rows(const LoadedModel& loaded, const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& rows) {
  Model m(loaded, options(int64_t(prompt.size())));
  Sequence s;
  const std::vector<float> all = m.extend(s, prompt, true);
  const int64_t vocab = loaded.config.vocab;
  std::vector<float> out;
  for (int32_t r : rows) out.insert(out.end(), all.begin() + r * vocab, all.begin() + (r + 1) * vocab);
  return out;
}

TEST(ModelGolden, MatchesTransformers) {
  const std::optional<json> manifest = golden_manifest();
  if (!manifest) GTEST_SKIP() << kGoldenMissing;
  std::cout << "golden logits by " << manifest->value("engine", "?") << " "
            << manifest->value("versions", json::object()).dump() << "\n";
  size_t checked = 0;
  for (const json& c : (*manifest)["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const LoadedModel loaded = load(Checkpoints::get(join_args(c["args"])));
    const auto prompt = c["prompt"].get<std::vector<int32_t>>();
    const auto rows = c["rows"].get<std::vector<int32_t>>();
    const int64_t vocab = loaded.config.vocab;
    const std::vector<float> want =
        read_npy(golden_dir() + "/" + c["file"].get<std::string>(), int64_t(rows.size()), vocab);
    const Distance d = distance(forward_rows(loaded, prompt, rows).data(), want.data(), int64_t(rows.size()), vocab);
    std::cout << name << ": " << d << "\n";
    EXPECT_TRUE(d.passes()) << name << ": " << d;
    ++checked;
  }
  EXPECT_GE(checked, 111u)
      << "the manifest's cases: every architecture × format (Qwen3-MoE's, Qwen2-MoE's, Mixtral's and Phi-3's too), "
         "the RoPE scalings, windows, compressed-tensors checkpoints";
}

// Granite's residual_multiplier cannot fold into power-of-two scales: such a checkpoint is one
// sentence naming the layer and the format, not a wrong model.
TEST(ModelLoadGranite, PowerOfTwoScalesRefuseTheMultiplier) {
  for (const char* fmt : {"mxfp4", "fp8-b32"}) {
    SCOPED_TRACE(fmt);
    const std::string dir = Checkpoints::get(std::string("--arch granite --format ") + fmt);
    test::expect_throw<InputError>([&] { load(dir); }, {dir, "o_proj (residual_multiplier)", "power-of-two"});
  }
}

// ---------------------------------------------------------------------------------------------
// The metric's power: models that are wrong in the ways that matter fail it, against the
// goldens where they exist and always against the unperturbed CPU forward.

// f16 only: the perturbations rewrite fp16 weights in place.
uint16_t* f16_rows(quant::PackedWeight& w) {
  EXPECT_EQ(w.format, quant::WeightFormat::kF16);
  return reinterpret_cast<uint16_t*>(w.qweight.data());
}

// Query head h attends to KV head h % kv_heads instead of h / group: the same as moving head h
// (its q rows, q bias and o_proj columns) to place (h % kv_heads)·group + h / kv_heads under
// the right mapping.
void wrong_gqa_mapping(LoadedModel& m) {
  const auto& c = m.config;
  const int64_t group = c.heads / c.kv_heads, dim = c.head_dim, hidden = c.hidden, q_width = c.heads * dim;
  auto moved_to = [&](int64_t h) { return (h % c.kv_heads) * group + h / c.kv_heads; };
  for (auto& l : m.layers) {
    uint16_t* qkv = f16_rows(l.qkv);
    uint16_t* o = f16_rows(l.o);
    const std::vector<uint16_t> qkv_old(qkv, qkv + q_width * hidden), o_old(o, o + hidden * q_width);
    const std::vector<uint16_t> bias_old = l.qkv_bias;
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t to = moved_to(h);
      std::copy_n(&qkv_old[size_t(h * dim * hidden)], dim * hidden, qkv + to * dim * hidden);
      if (!bias_old.empty()) std::copy_n(&bias_old[size_t(h * dim)], dim, l.qkv_bias.begin() + to * dim);
      for (int64_t n = 0; n < hidden; ++n)
        std::copy_n(&o_old[size_t(n * q_width + h * dim)], dim, o + n * q_width + to * dim);
    }
  }
}

// A model's logits on its golden case's prompt and rows (golden_logits.py's shape — 1024
// tokens, every 64th row and the last four — where the manifest lacks the case), and the check
// that a perturbed model fails the metric against them and against the goldens.
class MetricPower {
 public:
  MetricPower(const LoadedModel& loaded, const std::optional<json>& manifest, const std::string& name)
      : name_(name), vocab_(loaded.config.vocab) {
    const json* golden = nullptr;
    if (manifest) {
      for (const json& c : (*manifest)["cases"]) {
        if (c["name"] == name) golden = &c;
      }
    }
    if (golden) {
      prompt_ = (*golden)["prompt"].get<std::vector<int32_t>>();
      rows_ = (*golden)["rows"].get<std::vector<int32_t>>();
      want_golden_ = read_npy(golden_dir() + "/" + (*golden)["file"].get<std::string>(), rows(), vocab_);
    } else {
      prompt_ = random_prompt(1024, vocab_, 11);
      for (int32_t r = 0; r < 1024; r += 64) rows_.push_back(r);
      for (int32_t r = 1020; r < 1024; ++r) rows_.push_back(r);
    }
    want_ = forward_rows(loaded, prompt_, rows_);
    // The unperturbed model passes against the goldens (if any).
    if (!want_golden_.empty()) {
      EXPECT_TRUE(distance(want_.data(), want_golden_.data(), rows(), vocab_).passes());
    }
  }

  void expect_fails(const LoadedModel& bad, const std::string& what) const {
    const std::vector<float> got = forward_rows(bad, prompt_, rows_);
    const Distance d = distance(got.data(), want_.data(), rows(), vocab_);
    std::cout << name_ << ", " << what << ": " << d << "\n";
    EXPECT_FALSE(d.passes()) << what << " passes the metric against the CPU forward: " << d;
    if (!want_golden_.empty()) {
      const Distance g = distance(got.data(), want_golden_.data(), rows(), vocab_);
      EXPECT_FALSE(g.passes()) << what << " passes the metric against the goldens: " << g;
    }
  }

 private:
  int64_t rows() const { return int64_t(rows_.size()); }

  std::string name_;
  int64_t vocab_;
  std::vector<int32_t> prompt_, rows_;
  std::vector<float> want_, want_golden_;
};

TEST(ModelGolden, MetricHasPower) {
  const std::optional<json> manifest = golden_manifest();
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3"}) {
    const std::string name = std::string(arch) + "-f16";
    SCOPED_TRACE(name);
    const LoadedModel loaded = load(Checkpoints::of(arch, "f16"));
    const MetricPower power(loaded, manifest, name);
    LoadedModel theta = loaded;
    theta.config.rope.theta *= 1.01;
    power.expect_fails(theta, "rope theta × 1.01");
    LoadedModel gqa = loaded;
    wrong_gqa_mapping(gqa);
    power.expect_fails(gqa, "query head h on KV head h % kv_heads");
    LoadedModel swapped = loaded;
    std::swap(swapped.layers[0], swapped.layers[1]);
    power.expect_fails(swapped, "layers 0 and 1 swapped");
  }
}

// The MoE metric's power: routing mistakes that matter fail it — renormalising or not the
// chosen experts' weights, two experts' router rows swapped, one expert fewer per token.
TEST(ModelGolden, MoeMetricHasPower) {
  const LoadedModel loaded = load(Checkpoints::of("qwen3moe", "f16"));
  const MetricPower power(loaded, golden_manifest(), "qwen3moe-f16");
  LoadedModel unnormalised = loaded;
  unnormalised.config.norm_topk_prob = false;
  power.expect_fails(unnormalised, "top-k weights not renormalised");
  LoadedModel fewer = loaded;
  fewer.config.experts_per_token -= 1;
  power.expect_fails(fewer, "one expert fewer per token");
  LoadedModel swapped = loaded;
  for (auto& l : swapped.layers) {
    uint16_t* router = f16_rows(l.router);
    std::swap_ranges(router, router + l.router.k, router + l.router.k);
  }
  power.expect_fails(swapped, "router rows of experts 0 and 1 swapped");
}

// Qwen2-MoE's shared expert matters: without it, or ungated, the metric fails.
TEST(ModelGolden, SharedExpertMetricHasPower) {
  const LoadedModel loaded = load(Checkpoints::get("--arch qwen2moe --format f16 --decisive-routing"));
  ASSERT_TRUE(loaded.config.has_shared_expert());
  const MetricPower power(loaded, golden_manifest(), "qwen2moe-f16");
  LoadedModel without = loaded;
  for (auto& l : without.layers) std::fill_n(f16_rows(l.down), l.down.n * l.down.k, uint16_t(0));
  power.expect_fails(without, "the shared expert left out");
  LoadedModel ungated = loaded;
  // A gate of 0 for every token: sigmoid gives 0.5 instead of the learned weight.
  for (auto& l : ungated.layers) std::fill_n(f16_rows(l.shared_gate), l.shared_gate.k, uint16_t(0));
  power.expect_fails(ungated, "the shared expert's gate ignored");
}

// ---------------------------------------------------------------------------------------------
// generate, pages, refusals

TEST(ModelGenerate, GreedyIsTheArgmaxOfEachStepsLogits) {
  const std::string dir = Checkpoints::get("--arch qwen2 --format gptq4-act");
  const LoadedModel loaded = load(dir);
  Model m(loaded, options(32, 256));
  const std::vector<int32_t> prompt = random_prompt(45, loaded.config.vocab, 5);
  model::GenerateOptions g;
  g.max_tokens = 20;
  std::vector<int32_t> seen;
  const model::GenerateResult r = model::generate(m, prompt, g, [&](int32_t t) { seen.push_back(t); });
  EXPECT_EQ(r.finish_reason, "length");
  ASSERT_EQ(r.tokens.size(), 20u);
  EXPECT_EQ(seen, r.tokens);
  EXPECT_EQ(r.decode_steps, 19);
  EXPECT_EQ(m.pages().free_pages(), m.pages().pages()) << "generate gives its pages back";
  // Replay: each token is the argmax of the logits after the prompt and the tokens before it.
  std::vector<int32_t> context = prompt;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    Sequence s;
    const std::vector<float> l = m.extend(s, context);
    m.release(s);
    EXPECT_EQ(r.tokens[i], int32_t(std::max_element(l.begin(), l.end()) - l.begin())) << "token " << i;
    context.push_back(r.tokens[i]);
  }
  // A stop id ends it, and is the last token.
  g.stop_ids = {r.tokens[3]};
  const model::GenerateResult stopped = model::generate(m, prompt, g);
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.tokens.back(), r.tokens[3]);
  EXPECT_LE(stopped.tokens.size(), 4u);
  // Sampling with a seed is repeatable.
  g.stop_ids.clear();
  g.sampling.temperature = 0.8f;
  g.sampling.seed = 42;
  EXPECT_EQ(model::generate(m, prompt, g).tokens, model::generate(m, prompt, g).tokens);
}

// step_greedy: each chunk's next token is the argmax of the logits step() gives for it, for
// mixed decodes and prefill chunks in one step, in the caller's order.
TEST(ModelGenerate, StepGreedyIsTheArgmaxOfStepsLogits) {
  const LoadedModel loaded = load(Checkpoints::of("mistral", "nvfp4"));
  const int64_t vocab = loaded.config.vocab;
  Model a(loaded, options(64)), b(loaded, options(64));
  const std::vector<int32_t> p = random_prompt(30, vocab, 8), q = random_prompt(20, vocab, 9);
  Sequence a1, a2, b1, b2;
  a.extend(a1, std::span(p).subspan(0, 10)), b.extend(b1, std::span(p).subspan(0, 10));
  for (size_t t = 10; t < 25; ++t) {
    const std::vector<Model::Chunk> ca{{&a2, std::span(q).subspan(t - 10, 1)}, {&a1, std::span(p).subspan(t, 1)}};
    const std::vector<Model::Chunk> cb{{&b2, std::span(q).subspan(t - 10, 1)}, {&b1, std::span(p).subspan(t, 1)}};
    const std::vector<std::vector<float>> l = a.step(ca);
    const std::vector<int32_t> ids = b.step_greedy(cb);
    ASSERT_EQ(ids.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(ids[i], cpu::argmax(l[i].data(), vocab)) << "step " << t << " chunk " << i;
  }
  EXPECT_EQ(b1.length, a1.length);
  EXPECT_EQ(b2.length, a2.length);
}

TEST(ModelGenerate, Refusals) {
  const LoadedModel loaded = load(Checkpoints::of("llama", "f16"));
  Model m(loaded, options(16, 64));
  model::GenerateOptions g;
  const std::vector<int32_t> prompt = {1, 2, 3};
  test::expect_throw<InputError>([&] { model::generate(m, std::vector<int32_t>{}, g); }, {"prompt"});
  g.max_tokens = 0;
  test::expect_throw<InputError>([&] { model::generate(m, prompt, g); }, {"max_tokens"});
  g.max_tokens = 63;
  test::expect_throw<InputError>([&] { model::generate(m, prompt, g); }, {"KV cache", "64"});
  g.max_tokens = 4;
  g.sampling.top_p = 1.5f;
  test::expect_throw<InputError>([&] { model::generate(m, prompt, g); }, {"top_p"});
  g.sampling.top_p = 1;
  test::expect_throw<InputError>([&] { model::generate(m, std::vector<int32_t>{1, 128}, g); }, {"128", "vocabulary"});
  EXPECT_EQ(m.pages().free_pages(), m.pages().pages());

  Sequence s;
  m.extend(s, random_prompt(60, 128, 1));
  test::expect_throw<InputError>([&] { m.extend(s, random_prompt(5, 128, 2)); }, {"KV cache is full"});
  m.release(s);
  EXPECT_EQ(m.pages().free_pages(), m.pages().pages());

  ModelOptions cuda = options(16);
  cuda.device = model::Device::kCuda;
  if (!Driver::find() || Driver::find()->device_count() == 0) {
    test::expect_throw<InputError>([&] { Model bad(loaded, cuda); }, {"device cuda", "use device cpu"});
  }
  test::expect_throw<InputError>([] { model::parse_device("tpu"); }, {"tpu", "auto, cpu, cuda"});
  // auto: the GPU where one is usable, else the CPU with a sentence saying why (never silent).
  const bool gpu = Driver::find() && Driver::find()->device_count() > 0;
  EXPECT_EQ(model::parse_device("auto"), gpu ? model::Device::kCuda : model::Device::kCpu);
  EXPECT_EQ(model::auto_device_note("auto").empty(), gpu);
  if (!gpu) {
    EXPECT_TRUE(test::contains(model::auto_device_note("auto"), "running on the CPU backend"))
        << model::auto_device_note("auto");
  }
  EXPECT_EQ(model::auto_device_note("cpu"), "");
  ModelOptions bad_pages = options(16);
  bad_pages.page_size = 0;
  test::expect_throw<InputError>([&] { Model bad(loaded, bad_pages); }, {"page_size"});
  bad_pages = options(0);
  test::expect_throw<InputError>([&] { Model bad(loaded, bad_pages); }, {"max_batch_tokens"});
  bad_pages = options(16);
  bad_pages.kv_cache_tokens = 0;  // sized from memory: a GPU's only
  test::expect_throw<InputError>([&] { Model bad(loaded, bad_pages); }, {"kv_cache_tokens", "device cuda"});
  bad_pages = options(16);
  bad_pages.gpu_memory_utilization = 1.5;
  test::expect_throw<InputError>([&] { Model bad(loaded, bad_pages); }, {"gpu_memory_utilization", "(0, 1]"});
  test::expect_throw<InputError>([] { Model::load("/no/such/checkpoint"); }, {"/no/such/checkpoint"});
}

// The KV pool sized from a GPU's memory: utilization × total, less what others and the model
// hold and the reserve, in whole pages; one clear sentence when not a page fits.
TEST(ModelKvPool, PagesForMemory) {
  constexpr size_t kGiB = size_t(1) << 30, kMiB = size_t(1) << 20;
  // 80 GiB, 1 GiB held by others, the model took 16 GiB, 0.9: 72 − 1 − 16 − 0.5 = 54.5 GiB.
  EXPECT_EQ(model::kv_pages_for_memory(80 * kGiB, 79 * kGiB, 63 * kGiB, 0.9, 4 * kMiB, 512 * kMiB),
            int64_t(54.5 * 1024 / 4));
  EXPECT_EQ(model::kv_pages_for_memory(80 * kGiB, 80 * kGiB, 80 * kGiB, 1.0, 3 * kMiB, 0), int64_t(80 * 1024 / 3));
  test::expect_throw<InputError>(
      [&] { model::kv_pages_for_memory(16 * kGiB, 16 * kGiB, 2 * kGiB, 0.9, 4 * kMiB, 512 * kMiB); },
      {"no room for the KV cache", "14.00 GiB", "Raise gpu_memory_utilization"});
  test::expect_throw<InputError>([&] { model::kv_pages_for_memory(kGiB, kGiB, kGiB, 0, kMiB, 0); },
                                 {"gpu_memory_utilization"});
}

TEST(ModelGenerate, EosIdsFromGenerationConfigOrConfig) {
  test::TempDir dir;
  EXPECT_TRUE(model::eos_token_ids(dir.path()).empty());
  test::write_file(dir / "config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(model::eos_token_ids(dir.path()), (std::vector<int32_t>{7}));
  test::write_file(dir / "generation_config.json", R"({"eos_token_id": [3, 9]})");
  EXPECT_EQ(model::eos_token_ids(dir.path()), (std::vector<int32_t>{3, 9}));
  test::write_file(dir / "generation_config.json", R"({"eos_token_id": "x"})");
  test::expect_throw<InputError>([&] { model::eos_token_ids(dir.path()); }, {"generation_config.json", "eos_token_id"});
}

// ---------------------------------------------------------------------------------------------
// onecat generate

test::CommandResult onecat_cli(const std::string& args) {
  static test::TempDir scratch;
  return test::run_command(std::string(ONECAT_BIN) + " " + args, scratch.path());
}

TEST(ModelCli, GeneratesWhatTheLibraryGenerates) {
  const std::string dir = Checkpoints::get("--arch qwen3 --format fp8 --tokenizer");
  test::CommandResult r = onecat_cli("generate --model " + dir + " --prompt-ids 5,17,3,99 --max-tokens 6 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  json j = test::parse_json(r);
  EXPECT_EQ(j["prompt_ids"], json({5, 17, 3, 99}));
  const LoadedModel loaded = load(dir);
  Model m(loaded, options(16, 64));
  model::GenerateOptions g;
  g.max_tokens = 6;
  g.stop_ids = {95};  // the tiny tokenizer's <eos>, from generation_config.json
  const model::GenerateResult want = model::generate(m, std::vector<int32_t>{5, 17, 3, 99}, g);
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), want.tokens);
  EXPECT_EQ(j["finish_reason"], want.finish_reason);
  EXPECT_TRUE(j["text"].is_string());
  // The load figures: every tensor byte of the checkpoint read, in a measured time.
  EXPECT_EQ(j["load"]["checkpoint_bytes"].get<size_t>(), loaded.checkpoint_bytes);
  EXPECT_GT(loaded.checkpoint_bytes, 0u);
  EXPECT_GT(j["load"]["read_seconds"].get<double>(), 0);
  EXPECT_GT(j["load"]["read_bytes_per_second"].get<double>(), 0);
  EXPECT_TRUE(test::contains(r.err, "tokens/s")) << r.err;

  // Text in: the tokenizer's ids; text out on stdout, the speed on stderr.
  r = onecat_cli("generate --model " + dir + " --prompt 'the cat' --max-tokens 3 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  j = test::parse_json(r);
  EXPECT_EQ(j["prompt_ids"], json({98, 0, 'c' - 32, 'a' - 32, 't' - 32}));  // "the" (merged), Ġ, c, a, t
  r = onecat_cli("generate --model " + dir + " --prompt-ids 1,2 --max-tokens 4 --temperature 0.7 --seed 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST(ModelCli, RefusalsAreOneSentenceAndStatus2) {
  const std::string dir = Checkpoints::of("llama", "f16");
  auto expect_refused = [&](const std::string& args, std::initializer_list<std::string_view> needles) {
    const test::CommandResult r = onecat_cli("generate " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    for (std::string_view n : needles) EXPECT_TRUE(test::contains(r.err, n)) << args << ": " << r.err;
    // One sentence, the last line of stderr (loading may have drawn progress lines before it).
    const size_t line = r.err.rfind('\n', r.err.size() - 2);
    const std::string last = r.err.substr(line == std::string::npos ? 0 : line + 1);
    EXPECT_TRUE(last.starts_with("onecat: error: ") && last.ends_with(".\n")) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("error"), r.err.rfind("error")) << args << ": " << r.err;
  };
  if (!Driver::find() || Driver::find()->device_count() == 0) {
    expect_refused("--model " + dir + " --prompt-ids 1,2 --device cuda", {"device cuda", "use device cpu"});
  }
  expect_refused("--model " + dir + " --prompt-ids 1,2 --device tpu", {"tpu"});
  expect_refused("--model " + dir + " --prompt-ids 1,2 --profile", {"--profile", "--device cuda"});
  expect_refused("--model " + dir + " --prompt-ids 1,x", {"--prompt-ids", "'x'"});
  expect_refused("--model " + dir + " --prompt-ids 1,200", {"200", "vocabulary"});
  expect_refused("--model " + dir + " --prompt hello", {"--prompt", "tokenizer.json"});
  expect_refused("--model " + dir + " --prompt-ids 1 --prompt hello", {"exactly one"});
  expect_refused("--model " + dir, {"exactly one"});
  expect_refused("--model " + dir + " --prompt-ids 1 --top-p 2", {"top_p"});
  expect_refused("--model " + dir + " --prompt-ids 1 --max-tokens 0", {"--max-tokens"});
  expect_refused("--model /no/such/dir --prompt-ids 1", {"/no/such/dir"});
  test::TempDir bad;
  make_checkpoint(bad.path(), "--bad missing-tensor");
  expect_refused("--model " + bad.path() + " --prompt-ids 1", {"model.layers.1.mlp.up_proj.weight"});
}

}  // namespace
}  // namespace onecat
