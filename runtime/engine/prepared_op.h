// What hot paths hold: one op of a family with its spec parsed once and, per M bucket, the
// dispatched config (parsed) and loaded kernel, resolved on the bucket's first use through
// the Session's dispatcher. A launch after that is a bucket index, a table read, the family's
// make_call (arithmetic and argument packing) and cuLaunchKernel: no text, no map lookup by
// text, no allocation, so it can be captured in a CUDA graph (ARCHITECTURE.md rule 4). When
// the session's dispatch changes (a new tuning record, a reset) the op notices by a counter and
// resolves its buckets again on their next use. A gemm config of strategy=cublas launches
// cuBLAS around its kernel (gemm_launch.h): the same table read, then a library call.
//   PreparedOp<gemm::Spec, gemm::Config, gemm::Args> op(session, spec_text);
//   op.launch(args, m, stream);
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "codegen/kernel_call.h"
#include "runtime/engine/dispatch.h"
#include "runtime/engine/gemm_launch.h"
#include "runtime/engine/session.h"
#include "runtime/jit/module_table.h"

namespace onecat {
namespace prepared_op_detail {
// Outside the class, so that argument-dependent lookup finds the family's workspace_bytes.
template <class Spec, class Config>
int64_t family_workspace_bytes(const Spec& spec, const Config& config, int64_t m) {
  return workspace_bytes(spec, config, m);
}
}  // namespace prepared_op_detail

// One launch of a family whose every config is one kernel; a family with configs that launch
// more (gemm's strategy=cublas) overloads launch_op in its namespace (runtime/engine/gemm_launch.h).
template <class Spec, class Config, class Args>
void launch_op(const Spec& spec, const Config& config, const LoadedKernel& kernel, const Args& args, CUstream stream) {
  launch(kernel, make_call(spec, config, args), stream);
}

template <class Spec, class Config, class Args>
class PreparedOp {
 public:
  PreparedOp(Session& session, std::string_view spec)
      : session_(&session),
        spec_(Spec::parse(spec)),
        handle_(session.spec_handle(spec_.to_string())),
        generation_(session.generation()) {}

  const Spec& spec() const { return spec_; }
  // The dispatched config and kernel for m (gemm: tokens; rmsnorm: rows; attention:
  // sequences, or tokens for prefill and kv_write), resolved on the bucket's first use.
  const Config& config(int64_t m) { return slot(m).config; }
  const LoadedKernel& kernel(int64_t m) { return *slot(m).kernel; }
  // The workspace a launch for m needs, in bytes (codegen/<family>/op.h).
  int64_t workspace_bytes(int64_t m) { return prepared_op_detail::family_workspace_bytes(spec_, slot(m).config, m); }

  void launch(const Args& args, int64_t m, CUstream stream) {
    Slot& s = slot(m);
    launch_op(spec_, s.config, *s.kernel, args, stream);
  }

 private:
  struct Slot {
    const LoadedKernel* kernel = nullptr;
    Config config{};
  };
  Slot& slot(int64_t m) {
    if (generation_ != session_->generation()) refresh();
    Slot& s = slots_[size_t(Dispatcher::bucket_index(m))];
    if (!s.kernel) {
      const DispatchEntry& e = session_->dispatcher().kernel_for(handle_, m);
      s.config = Config::parse(spec_, e.config);
      s.kernel = e.kernel;
    }
    return s;
  }
  // The session's dispatch was reset or a bucket retuned: register again, resolve afresh.
  void refresh() {
    handle_ = session_->spec_handle(spec_.to_string());
    generation_ = session_->generation();
    slots_ = {};
  }
  Session* session_;
  Spec spec_;
  int handle_;
  uint64_t generation_;
  std::array<Slot, Dispatcher::kBuckets> slots_{};
};

}  // namespace onecat
