#include "runtime/engine/store_resolver.h"

#include <cstdio>
#include <memory>
#include <set>

#include "codegen/family.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/session.h"
#include "runtime/jit/module_table.h"

namespace onecat {

Dispatcher::Resolver store_resolver(Store& store, JitService& jit, const DeviceFingerprint& device) {
  auto warned = std::make_shared<std::set<std::string>>();
  return [&store, &jit, device, warned](const std::string& spec, int64_t bucket) {
    const Family& family = family_of(spec);
    DispatchEntry entry;
    const auto record = store.find_tuning(tuning_key(device, family, spec, bucket));
    std::string unusable;
    if (record) unusable = gemm::unavailable_reason(record->family, spec, record->config, device.sm);
    if (record && unusable.empty()) {
      entry.config = record->config;
      entry.tuned = true;
    } else if (record) {
      // A record made where cuBLAS ran (an imported cache, another environment): the default
      // runs instead, said once.
      entry.config = default_config_here(family, spec, bucket, device.sm);
      if (warned->insert(spec).second) {
        std::fprintf(stderr, "onecat: %s is tuned to %s, which cannot run here (%s); using the default config\n",
                     spec.c_str(), record->config.c_str(), unusable.c_str());
      }
    } else {
      entry.config = default_config_here(family, spec, bucket, device.sm);
      if (warned->insert(spec).second) {
        std::fprintf(stderr,
                     "onecat: %s is not tuned for %s; using the default config (tune with `onecat tune`, or import a "
                     "tuned cache with `onecat cache import`)\n",
                     spec.c_str(), device.name.c_str());
      }
    }
    const CompileResult compiled = jit.get(CompileRequest::make(family, spec, entry.config, Arch{device.sm}));
    entry.kernel = &ModuleTable::get().load(compiled.binary);
    return entry;
  };
}

}  // namespace onecat
