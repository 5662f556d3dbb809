#include "tools/onecat/profile_report.h"

#include <cstdio>
#include <string>

#include "base/error.h"

namespace onecat::cli {

void check_profile_device(bool profile, model::Device device) {
  if (profile && device != model::Device::kCuda)
    throw InputError("--profile times GPU kernels; it needs --device cuda.");
}

nlohmann::json profile_json(const model::GpuBackend::Profile& p, double decode_step_us) {
  nlohmann::json ops = nlohmann::json::array();
  double decode_ms = 0;
  for (const auto& o : p.ops) {
    const int64_t steps = o.decode ? p.decode_steps : p.prefill_steps;
    if (o.decode) decode_ms += o.ms;
    ops.push_back({{"op", o.op},
                   {"step", o.decode ? "decode" : "prefill"},
                   {"launches_per_step", steps ? double(o.launches) / double(steps) : 0.0},
                   {"us_per_step", steps ? o.ms * 1e3 / double(steps) : 0.0}});
  }
  nlohmann::json j{{"decode_steps", p.decode_steps},
                   {"prefill_steps", p.prefill_steps},
                   {"decode_kernel_us_per_step", p.decode_steps ? decode_ms * 1e3 / double(p.decode_steps) : 0.0},
                   {"ops", ops}};
  if (decode_step_us >= 0) j["decode_step_us"] = decode_step_us;
  return j;
}

void print_profile(const model::GpuBackend::Profile& p, double decode_step_us) {
  const nlohmann::json j = profile_json(p, decode_step_us);
  std::fprintf(stderr, "onecat: kernel time per decode step (%lld steps, op by op):\n",
               static_cast<long long>(p.decode_steps));
  const double sum = j["decode_kernel_us_per_step"].get<double>();
  for (const auto& o : j["ops"]) {
    if (o["step"] != "decode") continue;
    const double us = o["us_per_step"].get<double>();
    std::fprintf(stderr, "  %-22s %6.1f launches %9.1f us %5.1f %%\n", o["op"].get<std::string>().c_str(),
                 o["launches_per_step"].get<double>(), us, sum > 0 ? 100 * us / sum : 0.0);
  }
  if (decode_step_us >= 0) {
    std::fprintf(stderr, "  kernels %.1f us of a %.1f us step (the rest: launches, copies, sampling on the host)\n",
                 sum, decode_step_us);
  } else {
    std::fprintf(stderr, "  kernels %.1f us per decode step\n", sum);
  }
}

nlohmann::json load_json(const model::Model::LoadStats& ls) {
  return {{"checkpoint_bytes", ls.checkpoint_bytes},
          {"read_seconds", ls.read_seconds},
          {"read_bytes_per_second", ls.read_seconds > 0 ? double(ls.checkpoint_bytes) / ls.read_seconds : 0.0},
          {"backend_seconds", ls.backend_seconds},
          {"kernel_seconds", ls.kernel_seconds},
          {"kernels", ls.kernels},
          {"tuned_kernels", ls.tuned_kernels},
          {"compiled_kernels", ls.compiled_kernels}};
}

}  // namespace onecat::cli
