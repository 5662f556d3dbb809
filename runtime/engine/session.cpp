#include "runtime/engine/session.h"

#include "base/error.h"
#include "cache/paths.h"
#include "codegen/family.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/store_resolver.h"

namespace onecat {

DeviceFingerprint device_fingerprint(int ordinal) {
  Driver& d = Driver::require_gpu();
  const DeviceInfo info = d.device_info(ordinal);
  DeviceFingerprint f;
  f.name = info.name;
  f.sm = info.sm;
  f.multiprocessors = info.multiprocessors;
  f.driver = d.version_string();
  f.nvrtc_version = NvrtcRegistry::get().for_arch(Arch{info.sm}).version();
  return f;
}

std::string tuning_key(const DeviceFingerprint& device, const Family& family, const std::string& spec, int64_t bucket) {
  return tuning_key(device, std::string(family.name()), family.generator_version(), spec, bucket);
}

Session& Session::get() {
  static Session* session = new Session();  // never destroyed: modules outlive interpreter exit order
  return *session;
}

void Session::use_gpu(int ordinal) {
  Driver& d = Driver::require_gpu();
  if (ordinal < 0) ordinal = ordinal_ < 0 ? 0 : ordinal_;
  if (ordinal_ < 0) {
    if (ordinal >= d.device_count()) {
      throw InputError("GPU " + std::to_string(ordinal) + " does not exist (" + std::to_string(d.device_count()) + " found)");
    }
    use_device(ordinal);
    device_ = device_fingerprint(ordinal);
    ordinal_ = ordinal;
    return;
  }
  if (ordinal != ordinal_) {
    throw InputError("onecat runs kernels on one GPU per process and this one uses cuda:" + std::to_string(ordinal_) +
                     "; got an array on cuda:" + std::to_string(ordinal) + " (select the GPU with CUDA_VISIBLE_DEVICES)");
  }
  use_device(ordinal);
}

Store& Session::store() {
  if (!store_) store_ = std::make_unique<Store>(cache_file());
  return *store_;
}

JitService& Session::jit() {
  if (!jit_) jit_ = std::make_unique<JitService>(&store());
  return *jit_;
}

Dispatcher& Session::dispatcher() {
  if (!dispatcher_) dispatcher_ = std::make_unique<Dispatcher>(store_resolver(store(), jit(), device_));
  return *dispatcher_;
}

int Session::spec_handle(const std::string& spec) {
  auto it = handles_.find(spec);
  if (it == handles_.end()) it = handles_.emplace(spec, dispatcher().add_spec(spec)).first;
  return it->second;
}

const DispatchEntry& Session::kernel_for(const std::string& spec, int64_t m) {
  return dispatcher().kernel_for(spec_handle(spec), m);
}

const LoadedKernel& Session::kernel_with_config(const std::string& spec, const std::string& config) {
  auto key = std::make_pair(spec, config);
  if (auto it = configured_.find(key); it != configured_.end()) return *it->second;
  const CompileResult r = jit().get(CompileRequest::make(family_of(spec), spec, config, arch()));
  const LoadedKernel& k = ModuleTable::get().load(r.binary);
  configured_.emplace(key, &k);
  return k;
}

std::vector<DispatchEntry> Session::prepare(const std::vector<std::string>& specs, const std::vector<int64_t>& buckets,
                                            int jobs, PrepareStats* stats, const std::function<void()>& each) {
  // Compile every entry's config at once; the dispatcher then finds each in the store.
  std::vector<CompileRequest> requests;
  PrepareStats here;
  for (const auto& spec : specs) {
    const Family& family = family_of(spec);
    for (int64_t b : buckets) {
      const auto record = find_tuning(spec, b);
      requests.push_back(CompileRequest::make(
          family, spec, record ? record->config : default_config_here(family, spec, b, arch().sm), arch()));
      ++here.kernels;
      here.tuned += record ? 1 : 0;
    }
  }
  std::function<void(size_t)> done;
  if (each) done = [&](size_t) { each(); };
  for (const CompileResult& r : jit().get_all(requests, jobs, Parallelism::kThreads, done)) {
    if (!r.error.empty()) throw Error(r.error);
    here.compiled += r.cache_hit ? 0 : 1;
  }
  if (stats) stats->kernels += here.kernels, stats->tuned += here.tuned, stats->compiled += here.compiled;
  std::vector<DispatchEntry> entries;
  for (const auto& spec : specs) {
    for (int64_t b : buckets) entries.push_back(kernel_for(spec, b));
  }
  return entries;
}

std::string Session::tuning_key(const std::string& spec, int64_t bucket) const {
  return onecat::tuning_key(device_, family_of(spec), spec, bucket);
}

std::optional<TuningRecord> Session::find_tuning(const std::string& spec, int64_t bucket) {
  return store().find_tuning(tuning_key(spec, bucket));
}

TuningRecord Session::tune_and_record(const std::string& spec, int64_t bucket, bool retune, const Tuner& tune,
                                      bool* tuned) {
  if (!is_bucket(bucket)) {
    throw InputError("bucket " + std::to_string(bucket) + " is not a bucket (powers of two from 1 to " +
                     std::to_string(kMaxTuningBucket) + ")");
  }
  use_gpu(0);  // the tuner measures on GPU 0
  const std::string key = tuning_key(spec, bucket);
  if (tuned) *tuned = false;
  if (!retune) {
    if (std::optional<TuningRecord> stored = store().find_tuning(key)) return *stored;
  }
  TuningRecord record = tune(family_of(spec), spec, bucket);
  record.key = key;
  store().put_tuning(record);
  forget_dispatch();  // the next call dispatches the new record
  if (tuned) *tuned = true;
  return record;
}

void Session::forget_dispatch() {
  dispatcher_.reset();
  handles_.clear();
  ++generation_;
}

void Session::reset() {
  forget_dispatch();
  configured_.clear();
  jit_.reset();
  store_.reset();
}

}  // namespace onecat
