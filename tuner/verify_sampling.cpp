// The sampling family's GPU check: random rows (tuner/sampling_batch) through the kernel
// twice — the outputs must be the same bits both times (ARCHITECTURE rule 8; argmax's
// counters must be back at 0) — then row by row against runtime/cpu/sampling. Outputs are
// poisoned and followed by guard rows that must stay poisoned.
#include <cstring>

#include "codegen/sampling/op.h"
#include "runtime/cuda/driver.h"
#include "runtime/jit/module_table.h"
#include "tuner/sampling_batch.h"
#include "tuner/verify.h"

namespace onecat {
namespace {

constexpr int64_t kGuardRows = 2;
constexpr unsigned char kPoison = 0xa5;  // 0xa5a5a5a5: neither a token nor a likely float

// A poisoned device buffer of `rows + kGuardRows` rows of `row_bytes`.
DeviceBuffer poisoned(int64_t rows, size_t row_bytes) {
  DeviceBuffer b(std::max<size_t>(size_t(rows + kGuardRows) * row_bytes, 16));
  b.fill_bytes(kPoison);
  return b;
}

template <class T>
std::vector<T> download(const DeviceBuffer& b, size_t count) {
  std::vector<T> v(count);
  if (count) b.download(v.data(), count * sizeof(T));
  return v;
}

void synchronize(const std::string& what) {
  Driver& d = *Driver::find();
  d.check(d.cuCtxSynchronize(), "cuCtxSynchronize", what);
}

// The guard rows behind `rows` rows of `row_bytes` are still poisoned.
bool guards_intact(const DeviceBuffer& b, int64_t rows, size_t row_bytes) {
  const std::vector<unsigned char> all = download<unsigned char>(b, size_t(rows + kGuardRows) * row_bytes);
  for (size_t i = size_t(rows) * row_bytes; i < all.size(); ++i) {
    if (all[i] != kPoison) return false;
  }
  return true;
}

CheckResult check_sample(const sampling::Spec& spec, const std::string& spec_text, const std::string& config_text,
                         const LoadedKernel& kernel, int64_t rows, uint64_t seed) {
  const sampling::Config config = sampling::Config::parse(spec, config_text);
  const SamplingBatch b = make_sampling_batch(spec.vocab, rows, spec.logprobs, seed);
  const std::vector<sampling::RowParams> rp = b.row_params();
  DeviceBuffer logits = DeviceBuffer::from_host(b.logits.data(), b.logits.size() * 4);
  DeviceBuffer params = DeviceBuffer::from_host(rp.data(), rp.size() * sizeof(sampling::RowParams));
  DeviceBuffer offsets = DeviceBuffer::from_host(b.offsets.data(), b.offsets.size() * 4);
  DeviceBuffer ids = DeviceBuffer::from_host(b.ids.data(), b.ids.size() * 4);
  DeviceBuffer table(size_t(std::max<int64_t>(sampling::history_table_bytes(int64_t(b.ids.size())), 16)));
  table.fill_bytes(kPoison);  // the kernel initialises what it uses
  const size_t width = size_t(spec.logprobs);
  DeviceBuffer tokens = poisoned(rows, 4), token_lp = poisoned(rows, 4);
  DeviceBuffer top_ids = poisoned(rows, std::max<size_t>(width, 1) * 4);
  DeviceBuffer top_lp = poisoned(rows, std::max<size_t>(width, 1) * 4);
  sampling::Args a;
  a.tokens = tokens.ptr();
  a.token_logprobs = token_lp.ptr();
  a.top_ids = width ? top_ids.ptr() : 0;
  a.top_logprobs = width ? top_lp.ptr() : 0;
  a.logits = logits.ptr();
  a.params = params.ptr();
  a.history_offsets = offsets.ptr();
  a.history_ids = ids.ptr();
  a.history_table = table.ptr();
  a.rows = rows;

  CheckResult r;
  r.rows = rows;
  r.seed = seed;
  r.metric = "largest |logprob − reference|; tokens exact, or within 1e-4 of a sampling boundary";
  r.tolerance = kSamplingLogprobTolerance;
  SamplingOutput out[2];
  for (int run = 0; run < 2; ++run) {
    launch(kernel, sampling::make_call(spec, config, a), nullptr);
    synchronize("running " + spec_text + " [" + config_text + "]");
    out[run].width = int(width);
    out[run].tokens = download<int>(tokens, size_t(rows));
    out[run].token_logprobs = download<float>(token_lp, size_t(rows));
    out[run].top_ids = download<int>(top_ids, size_t(rows) * width);
    out[run].top_logprobs = download<float>(top_lp, size_t(rows) * width);
  }
  const SamplingVerdict v = compare_sampling(b, out[0]);
  r.error = v.logprob_error;
  r.detail = v.detail;
  const bool same = out[0].tokens == out[1].tokens &&
                    std::memcmp(out[0].token_logprobs.data(), out[1].token_logprobs.data(), size_t(rows) * 4) == 0 &&
                    out[0].top_ids == out[1].top_ids &&
                    std::memcmp(out[0].top_logprobs.data(), out[1].top_logprobs.data(), size_t(rows) * width * 4) == 0;
  if (r.detail.empty() && !same) r.detail = "two launches on the same inputs gave different outputs";
  if (r.detail.empty() &&
      !(guards_intact(tokens, rows, 4) && guards_intact(token_lp, rows, 4) &&
        (width == 0 || (guards_intact(top_ids, rows, width * 4) && guards_intact(top_lp, rows, width * 4))))) {
    r.detail = "wrote past the last row";
  }
  if (r.detail.empty() && v.near_boundary > rows / 50 + 1) {
    r.detail = std::to_string(v.near_boundary) + " of " + std::to_string(rows) +
               " tokens differ near a boundary: more than rounding explains";
  }
  r.passed = r.detail.empty() && r.error <= r.tolerance;
  return r;
}

CheckResult check_argmax(const sampling::Spec& spec, const std::string& spec_text, const std::string& config_text,
                         const LoadedKernel& kernel, int64_t rows, uint64_t seed) {
  const sampling::Config config = sampling::Config::parse(spec, config_text);
  const std::vector<float> host = make_argmax_logits(spec.vocab, rows, seed);
  DeviceBuffer logits = DeviceBuffer::from_host(host.data(), host.size() * 4);
  DeviceBuffer tokens = poisoned(rows, 4);
  DeviceBuffer workspace(size_t(std::max<int64_t>(sampling::workspace_bytes(spec, config, rows), 16)));
  workspace.fill_bytes(0);
  CheckResult r;
  r.rows = rows;
  r.seed = seed;
  r.metric = "rows whose token differs from the reference (exact)";
  r.tolerance = 0;
  for (int run = 0; run < 2 && r.detail.empty(); ++run) {  // the second run needs the counters back at 0
    tokens.fill_bytes(kPoison);
    launch(kernel,
           sampling::make_call(spec, config, sampling::ArgmaxArgs{tokens.ptr(), logits.ptr(), workspace.ptr(), rows}),
           nullptr);
    synchronize("running " + spec_text + " [" + config_text + "]");
    r.detail = compare_argmax(host, spec.vocab, download<int>(tokens, size_t(rows)));
    if (!r.detail.empty()) r.detail = "launch " + std::to_string(run + 1) + ": " + r.detail;
    if (r.detail.empty() && !guards_intact(tokens, rows, 4)) r.detail = "wrote past the last row";
  }
  r.error = r.detail.empty() ? 0 : 1;
  r.passed = r.detail.empty();
  return r;
}

}  // namespace

CheckResult check_sampling(const std::string& spec_text, const std::string& config, const LoadedKernel& kernel,
                           int64_t rows, uint64_t seed) {
  const sampling::Spec spec = sampling::Spec::parse(spec_text);
  return spec.op == sampling::Op::kSample ? check_sample(spec, spec_text, config, kernel, rows, seed)
                                          : check_argmax(spec, spec_text, config, kernel, rows, seed);
}

}  // namespace onecat
