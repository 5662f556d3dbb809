#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include "codegen/embedding/emit.h"
#include "codegen/embedding/op.h"
#include "runtime/cpu/embedding.h"
#include "base/error.h"
#include "tuner/attention_batch.h"
#include "tuner/random_weight.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

constexpr int64_t kGuardRows = 2;
constexpr unsigned char kPoisonByte = 0xff;
// Random rows up to this many bytes; a larger table repeats them (upload_tiled), which the
// reference follows. An odd row count, so a row read at a stride error is another row's data.
constexpr size_t kRandomTableBytes = size_t(32) << 20;
// The slice's first id: not 0, so ids below it and the slice offset are both exercised.
constexpr int kVocabStart = 7;

}  // namespace

CheckResult check_embedding(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel,
                            int64_t tokens, uint64_t seed) {
  const embedding::Spec spec = embedding::Spec::parse(spec_text);
  const embedding::Config config = embedding::Config::parse(spec, config_text);
  const size_t row_bytes = size_t(spec.hidden) * 2;
  int64_t content_rows = std::min<int64_t>(spec.vocab, std::max<size_t>(1, kRandomTableBytes / row_bytes));
  if (content_rows < spec.vocab && content_rows % 2 == 0) --content_rows;

  std::mt19937_64 rng(seed);
  const std::vector<uint16_t> content = random_half(rng, size_t(content_rows) * spec.hidden, -2.f, 2.f);
  // Every id kind: the slice's ends, ids just outside it, the int extremes, random ones.
  std::vector<int> ids(static_cast<size_t>(tokens));
  std::uniform_int_distribution<int> in_slice(kVocabStart, kVocabStart + spec.vocab - 1);
  const int edges[] = {
      kVocabStart, kVocabStart + spec.vocab - 1, kVocabStart - 1, kVocabStart + spec.vocab, 0, -1, INT_MAX, INT_MIN};
  for (int64_t t = 0; t < tokens; ++t)
    ids[size_t(t)] = t % 7 == 3 ? edges[size_t(t / 7) % std::size(edges)] : in_slice(rng);

  const size_t out_bytes = size_t(tokens + kGuardRows) * row_bytes;
  const DeviceBuffer d_table = upload_tiled(content.data(), content.size() * 2, size_t(spec.vocab) * row_bytes);
  const DeviceBuffer d_ids = upload_bytes(ids.data(), ids.size() * 4);
  DeviceBuffer d_out(out_bytes);
  d_out.fill_bytes(kPoisonByte);
  launch(kernel, embedding::make_call(spec, config, {d_out.ptr(), d_table.ptr(), d_ids.ptr(), kVocabStart, tokens}),
         nullptr);
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", "running " + spec_text + " [" + config_text + "]");
  std::vector<uint16_t> got(out_bytes / 2);
  d_out.download(got.data(), out_bytes);

  // The reference gathers from the table as the GPU holds it: row r is content row r % content_rows.
  std::vector<int> local(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t r = int64_t(ids[t]) - kVocabStart;
    local[t] = r < 0 || r >= spec.vocab ? -1 : int(r % content_rows);
  }
  std::vector<uint16_t> want(size_t(tokens) * spec.hidden);
  cpu::embedding(want.data(), content.data(), local.data(), tokens, spec.hidden, content_rows);

  CheckResult r;
  r.rows = tokens, r.seed = seed, r.tolerance = 0,
  r.metric = "output elements differing from the gathered rows (bit-exact)";
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && wrong++ == 0) {
      const size_t t = i / size_t(spec.hidden);
      r.detail = "token " + std::to_string(t) + " (id " + std::to_string(ids[t]) + ") element " +
                 std::to_string(i % size_t(spec.hidden)) + " differs from its row";
    }
  }
  for (size_t i = want.size(); i < got.size() && r.detail.empty(); ++i) {
    if (got[i] != 0xffff) r.detail = "wrote past the last token (element " + std::to_string(i) + ")";
  }
  r.error = double(wrong);
  r.passed = r.detail.empty();
  return r;
}

}  // namespace onecat
