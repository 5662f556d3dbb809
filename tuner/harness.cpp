#include "tuner/harness.h"

#include <map>

#include "base/error.h"
#include "tuner/workload.h"

namespace onecat {

std::unique_ptr<Workload> rmsnorm_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> gemm_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> attention_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> attention_workload_at_context(const std::string& spec, int64_t m, uint64_t seed,
                                                        int64_t context);
std::unique_ptr<Workload> embedding_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> rope_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> sampling_workload(const std::string& spec, int64_t m, uint64_t seed);
std::unique_ptr<Workload> moe_workload(const std::string& spec, int64_t m, uint64_t seed);

const FamilyHarness& harness_of(const Family& family) {
  // Keyed by the registered family objects themselves; names are read once, here.
  static const std::map<const Family*, FamilyHarness> table = [] {
    const std::map<std::string_view, FamilyHarness> by_name = {
        {"rmsnorm", {rmsnorm_workload, check_rmsnorm}},
        {"gemm", {gemm_workload, check_gemm}},
        {"attention", {attention_workload, check_attention, attention_workload_at_context}},
        {"embedding", {embedding_workload, check_embedding}},
        {"rope", {rope_workload, check_rope}},
        {"sampling", {sampling_workload, check_sampling}},
        {"moe", {moe_workload, check_moe}},
    };
    std::map<const Family*, FamilyHarness> out;
    for (const Family* f : all_families()) {
      if (auto it = by_name.find(f->name()); it != by_name.end()) out.emplace(f, it->second);
    }
    return out;
  }();
  auto it = table.find(&family);
  if (it == table.end()) throw Error("no tuning workload or GPU check is registered for family " + std::string(family.name()));
  return it->second;
}

}  // namespace onecat
