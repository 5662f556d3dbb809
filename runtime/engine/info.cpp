#include "runtime/engine/info.h"

#include "base/error.h"
#include "cache/paths.h"
#include "cache/store.h"
#include "codegen/family.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/module_table.h"

namespace onecat {

nlohmann::json machine_info() {
  nlohmann::json j;
  Driver* d = Driver::find();
  j["driver"] = d ? nlohmann::json{{"path", d->path()}, {"version", d->version_string()}} : nlohmann::json(nullptr);
  j["gpus"] = nlohmann::json::array();
  if (d) {
    for (int i = 0; i < d->device_count(); ++i) {
      DeviceInfo g = d->device_info(i);
      j["gpus"].push_back(
          {{"ordinal", i},
           {"name", g.name},
           {"arch", Arch{g.sm}.name()},
           {"multiprocessors", g.multiprocessors},
           {"memory_bytes", g.total_memory},
           {"shared_per_block_optin", g.max_shared_per_block_optin},
           {"l2_bytes", g.l2_bytes},
           // docs/jit.md: sm_90+ kernels may start before the one they follow ends.
           {"programmatic_launch", Arch{g.sm}.has_programmatic_launch() && programmatic_launch_enabled()}});
    }
  }
  j["gpu_unavailable_reason"] = Driver::unavailable_reason();
  j["nvrtc"] = nlohmann::json::array();
  const NvrtcRegistry& reg = NvrtcRegistry::get();
  for (const auto& lib : reg.libraries()) {
    // The archs this library compiles for: those it targets that no library before it does
    // (NvrtcRegistry::for_arch takes the first that can).
    std::vector<int> compiles_for;
    for (int a : lib->archs()) {
      if (a >= kMinSm && &reg.for_arch(Arch{a}) == lib.get()) compiles_for.push_back(a);
    }
    j["nvrtc"].push_back({{"path", lib->path()}, {"version", lib->version()}, {"archs", lib->archs()},
                          {"compiles_for", compiles_for}, {"targets_sm_70", lib->supports(Arch{70})}});
  }
  for (auto& g : j["gpus"]) {  // the NVRTC a kernel for this GPU compiles with, null when none can
    const Arch arch = Arch::parse(g["arch"].get<std::string>());
    // Why gemm strategy=cublas cannot run on it (no cuBLAS, or CUDA 13's on a Volta), null when it can.
    const std::string cublas_gap = Cublas::unusable_reason(arch.sm);
    g["cublas_unusable"] = cublas_gap.empty() ? nlohmann::json(nullptr) : nlohmann::json(cublas_gap);
    g["nvrtc"] = nullptr;
    for (const auto& lib : reg.libraries()) {
      if (lib->supports(arch)) {
        g["nvrtc"] = lib->version();
        break;
      }
    }
  }
  j["nvrtc_searched"] = nlohmann::json::array();
  for (const auto& [path, why] : reg.searched()) j["nvrtc_searched"].push_back({{"path", path}, {"error", why}});
  Cublas* cb = Cublas::find();
  j["cublas"] = cb ? nlohmann::json{{"path", cb->path()}, {"version", cb->version()}} : nlohmann::json(nullptr);
  j["families"] = nlohmann::json::array();
  for (const Family* f : all_families()) j["families"].push_back({{"name", f->name()}, {"generator_version", f->generator_version()}});
  const std::string path = cache_file();
  j["cache"] = {{"path", path}};
  try {
    Store store(path);
    Store::Stats st = store.stats();
    j["cache"]["binaries"] = st.binaries;
    j["cache"]["cubin_bytes"] = st.cubin_bytes;
    j["cache"]["by_arch"] = st.by_arch;
  } catch (const Error& e) {
    j["cache"]["error"] = e.what();
  }
  return j;
}

}  // namespace onecat
