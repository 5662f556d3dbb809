#include "tuner/gemm_rig.h"
#include "tuner/verify.h"

namespace onecat {

CheckResult check_gemm(const std::string& spec_text, const std::string& config_text, const LoadedKernel& kernel, int64_t m,
                       uint64_t seed) {
  const gemm::Spec spec = gemm::Spec::parse(spec_text);
  const gemm::Config config = gemm::Config::parse(spec, config_text);
  GemmRig rig(spec, seed, 1);
  rig.prepare(m);
  CheckResult res = rig.check(kernel, config);
  res.seed = seed;
  return res;
}

}  // namespace onecat
