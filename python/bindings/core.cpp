// Family-independent bindings: machine info, emit/compile, the tuner, ahead-of-time
// preparation of dispatched kernels, and the kernel cache.
#include <pybind11/stl.h>

#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "cache/paths.h"
#include "codegen/family.h"
#include "python/bindings/array.h"
#include "python/bindings/families.h"
#include "python/bindings/runtime.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/info.h"
#include "runtime/jit/import.h"
#include "tuner/tuner.h"

namespace onecat::python {
namespace {

struct CompiledKernel {
  std::string family;
  KernelBinary binary;
  Emitted emitted;
  bool cache_hit = false;
  double elapsed_ms = 0;
};

Arch arch_or_gpu(const std::string& arch) {
  if (!arch.empty()) return Arch::parse(arch);
  return Arch{Driver::require_gpu().device_info(0).sm};
}

int default_jobs(int jobs) { return jobs > 0 ? jobs : int(std::max(1u, std::thread::hardware_concurrency())); }

py::dict record_dict(const TuningRecord& r) {
  py::list candidates;
  for (const auto& c : r.candidates) {
    py::dict d;
    d["config"] = c.config;
    d["status"] = c.status;
    d["median_us"] = c.median_us;
    d["min_us"] = c.min_us;
    d["max_us"] = c.max_us;
    d["detail"] = c.detail;
    candidates.append(d);
  }
  py::dict device;
  device["name"] = r.device.name;
  device["sm"] = r.device.sm;
  device["multiprocessors"] = r.device.multiprocessors;
  device["driver"] = r.device.driver;
  device["nvrtc_version"] = r.device.nvrtc_version;
  py::dict d;
  d["key"] = r.key;
  d["family"] = r.family;
  d["generator_version"] = r.generator_version;
  d["spec"] = r.spec;
  d["bucket"] = r.bucket;
  d["config"] = r.config;
  d["default_config"] = r.default_config;
  d["best_us"] = r.best_us;
  d["default_us"] = r.default_us;
  d["device"] = device;
  d["candidates"] = candidates;
  return d;
}

py::list tune(const std::string& spec_text, const std::vector<int64_t>& buckets, int jobs, bool retune) {
  const Family& family = family_of(spec_text);
  const std::string spec = family.canonical_spec(spec_text);
  for (int64_t b : buckets) {
    if (!is_bucket(b)) {
      throw InputError("bucket " + std::to_string(b) + " is not a bucket (powers of two from 1 to " + std::to_string(kMaxBucket) + ")");
    }
  }
  Runtime& rt = Runtime::get();
  py::list out;
  for (int64_t b : buckets) {
    const TuningRecord rec = rt.tune_and_record(spec, b, retune, [&](const Family& f, const std::string& s, int64_t bucket) {
      return tune_spec(f, s, bucket, rt.jit(), default_jobs(jobs));
    });
    out.append(record_dict(rec));
  }
  return out;
}

py::dict import_dict(const ImportReport& r) {
  py::list verification;
  for (const auto& v : r.verification) {
    py::dict d;
    d["key"] = v.key;
    d["spec"] = v.spec;
    d["config"] = v.config;
    d["arch"] = v.arch;
    d["ok"] = v.ok;
    d["detail"] = v.detail;
    verification.append(d);
  }
  py::dict d;
  d["file"] = r.file;
  d["binaries_added"] = r.binaries_added;
  d["binaries_present"] = r.binaries_present;
  d["tunings_added"] = r.tunings_added;
  d["tunings_present"] = r.tunings_present;
  d["verified"] = r.verified;
  d["verification"] = verification;
  d["imported"] = r.imported;
  return d;
}

}  // namespace

void bind_core(py::module_& m) {
  m.def("info_json", [] { return machine_info().dump(); }, "onecat info --json, as a JSON string");
  m.def(
      "shape_of",
      [](py::handle obj, const std::string& op, const std::string& arg) {
        return view_of(obj, Arg{op.c_str(), arg.c_str()}).shape.vec();
      },
      py::arg("array"), py::arg("op"), py::arg("arg"), "The shape of any array onecat reads (TypeError otherwise)");
  m.def("gpu_unavailable_reason", &Driver::unavailable_reason, "Why no GPU can run kernels; empty when one can");
  m.def("family_names", [] {
    std::vector<std::string> names;
    for (const Family* f : all_families()) names.emplace_back(f->name());
    return names;
  });
  m.def("family_of", [](const std::string& spec) { return std::string(family_of(spec).name()); }, py::arg("spec"));
  m.def("canonical_spec", [](const std::string& spec) { return family_of(spec).canonical_spec(spec); }, py::arg("spec"));
  m.def("canonical_config",
        [](const std::string& spec, const std::string& config) { return family_of(spec).canonical_config(spec, config); },
        py::arg("spec"), py::arg("config"));
  m.def(
      "default_config",
      [](const std::string& spec, int64_t m, const std::string& arch) {
        // This GPU's: what runs here untuned (cuBLAS's where it can run); a named arch's: the family's own.
        if (arch.empty()) return default_config_here(family_of(spec), spec, m, arch_or_gpu(arch).sm);
        return family_of(spec).default_config(spec, m, Arch::parse(arch));
      },
      py::arg("spec"), py::arg("m") = 1, py::arg("arch") = "");
  m.def(
      "candidate_configs",
      [](const std::string& spec, const std::string& arch) { return family_of(spec).candidate_configs(spec, arch_or_gpu(arch)); },
      py::arg("spec"), py::arg("arch") = "");

  m.def(
      "emit",
      [](const std::string& spec, const std::string& config, const std::string& arch, int64_t m) {
        const Family& f = family_of(spec);
        const Arch target = Arch::parse(arch);
        const CompileRequest r = CompileRequest::make(f, spec, config.empty() ? f.default_config(spec, m, target) : config, target);
        py::dict d;
        d["spec"] = r.spec;
        d["config"] = r.config;
        d["arch"] = r.arch.name();
        d["source"] = r.emitted.source;
        d["kernel_expression"] = r.emitted.kernel_expression;
        return d;
      },
      py::arg("spec"), py::arg("config") = "", py::arg("arch") = "sm_70", py::arg("m") = 1);

  py::class_<CompiledKernel>(m, "CompiledKernel")
      .def_readonly("family", &CompiledKernel::family)
      .def_property_readonly("spec", [](const CompiledKernel& k) { return k.binary.spec; })
      .def_property_readonly("config", [](const CompiledKernel& k) { return k.binary.config; })
      .def_property_readonly("arch", [](const CompiledKernel& k) { return k.binary.arch; })
      .def_property_readonly("key", [](const CompiledKernel& k) { return k.binary.key; })
      .def_property_readonly("nvrtc_version", [](const CompiledKernel& k) { return k.binary.nvrtc_version; })
      .def_property_readonly("lowered_name", [](const CompiledKernel& k) { return k.binary.lowered_name; })
      .def_property_readonly("source", [](const CompiledKernel& k) { return k.emitted.source; })
      .def_property_readonly("kernel_expression", [](const CompiledKernel& k) { return k.emitted.kernel_expression; })
      .def_property_readonly("cubin", [](const CompiledKernel& k) { return py::bytes(k.binary.cubin); })
      .def_property_readonly("registers", [](const CompiledKernel& k) { return k.binary.usage.registers; })
      .def_property_readonly("shared_bytes", [](const CompiledKernel& k) { return k.binary.usage.shared_bytes; })
      .def_property_readonly("spill_store_bytes", [](const CompiledKernel& k) { return k.binary.usage.spill_store_bytes; })
      .def_property_readonly("spill_load_bytes", [](const CompiledKernel& k) { return k.binary.usage.spill_load_bytes; })
      .def_property_readonly("stack_bytes", [](const CompiledKernel& k) { return k.binary.usage.stack_bytes; })
      .def_property_readonly("barriers", [](const CompiledKernel& k) { return k.binary.usage.barriers; })
      .def_property_readonly("compile_ms", [](const CompiledKernel& k) { return k.binary.compile_ms; })
      .def_readonly("cache_hit", &CompiledKernel::cache_hit)
      .def_readonly("elapsed_ms", &CompiledKernel::elapsed_ms);

  m.def(
      "compile",
      [](const std::string& spec, const std::string& config, const std::string& arch, int64_t m) {
        const Family& f = family_of(spec);
        const std::string canonical = f.canonical_spec(spec);
        const Arch target = arch_or_gpu(arch);
        const std::string def =
            arch.empty() ? default_config_here(f, canonical, m, target.sm) : f.default_config(canonical, m, target);
        CompileRequest req = CompileRequest::make(f, canonical, config.empty() ? def : config, target);
        CompiledKernel k;
        k.family = std::string(f.name());
        k.emitted = req.emitted;
        CompileResult r = Runtime::get().jit().get(req);
        k.binary = std::move(r.binary);
        k.cache_hit = r.cache_hit;
        k.elapsed_ms = r.elapsed_ms;
        return k;
      },
      py::arg("spec"), py::arg("config") = "", py::arg("arch") = "", py::arg("m") = 1);

  m.def("gpu_arch", [](int device) {
    Runtime::get().use_gpu(device);
    return Runtime::get().arch().name();
  }, py::arg("device") = -1, "The arch of the GPU onecat runs on (RuntimeError without one)");

  m.def("tune", &tune, py::arg("spec"), py::arg("buckets"), py::arg("jobs") = 0, py::arg("retune") = false);

  m.def(
      "prepare",
      [](const std::vector<std::string>& specs, const std::vector<int64_t>& buckets, int jobs, int device) {
        std::vector<std::string> canonical;
        for (const auto& s : specs) canonical.push_back(family_of(s).canonical_spec(s));
        Runtime& rt = Runtime::get();
        rt.use_gpu(device);
        const std::vector<DispatchEntry> entries = rt.prepare(canonical, buckets, default_jobs(jobs));
        py::list out;
        size_t i = 0;
        for (const auto& s : canonical) {
          for (int64_t b : buckets) {
            py::dict d;
            d["spec"] = s;
            d["bucket"] = bucket_for(b);
            d["config"] = entries[i].config;
            d["tuned"] = entries[i].tuned;
            out.append(d);
            ++i;
          }
        }
        return out;
      },
      py::arg("specs"), py::arg("buckets"), py::arg("jobs") = 0, py::arg("device") = -1);

  m.def("cache_dir", &cache_dir);
  m.def("cache_file", &cache_file);
  m.def(
      "set_cache_dir",
      [](const std::string& dir) {
        if (dir.empty()) {
          unsetenv("ONECAT_CACHE_DIR");
        } else {
          setenv("ONECAT_CACHE_DIR", dir.c_str(), 1);
        }
        Runtime::get().reset();
      },
      py::arg("path"));
  m.def("cache_stats", [] {
    const Store::Stats s = Runtime::get().store().stats();
    py::dict d;
    d["path"] = Runtime::get().store().path();
    d["binaries"] = s.binaries;
    d["tunings"] = s.tunings;
    d["cubin_bytes"] = s.cubin_bytes;
    d["file_bytes"] = s.file_bytes;
    d["by_arch"] = s.by_arch;
    d["by_family"] = s.by_family;
    return d;
  });
  m.def(
      "cache_export",
      [](const std::string& file, const std::string& arch, const std::string& device) {
        const ExportReport r = export_cache(Runtime::get().store(), file, ExportFilter{arch, device});
        py::dict d;
        d["file"] = r.file;
        d["binaries"] = r.binaries;
        d["tunings"] = r.tunings;
        return d;
      },
      py::arg("file"), py::arg("arch") = "", py::arg("device") = "");
  m.def(
      "cache_import",
      [](const std::string& file, bool verify) {
        py::dict d = import_dict(import_cache(Runtime::get().store(), file, verify));
        Runtime::get().reset();  // imported tuning records take effect
        return d;
      },
      py::arg("file"), py::arg("verify") = false);
}

}  // namespace onecat::python
