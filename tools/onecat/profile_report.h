// What generate and throughput both report: --profile's GPU kernel time per step by op
// (GpuBackend::Profile, docs/models.md "Profiling") and the load's figures.
#pragma once
#include <nlohmann/json.hpp>

#include "models/model/gpu_backend.h"
#include "models/model/model.h"

namespace onecat::cli {

// InputError unless --profile (when asked) runs on a GPU.
void check_profile_device(bool profile, model::Device device);

// decode_step_us: the measured time of a decode step beside the kernels' (the difference is
// launch and host time), or < 0 where the caller has none (then left out).
nlohmann::json profile_json(const model::GpuBackend::Profile& p, double decode_step_us);
// The decode steps' ops on stderr, one line each with its share of the kernels' time.
void print_profile(const model::GpuBackend::Profile& p, double decode_step_us);

// Model::LoadStats as JSON: the checkpoint's bytes, reading them, the backend and its kernels.
nlohmann::json load_json(const model::Model::LoadStats& ls);

}  // namespace onecat::cli
