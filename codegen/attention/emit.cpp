#include "codegen/attention/emit.h"

#include "base/error.h"

namespace onecat::attention {
namespace {

std::string b(bool v) { return v ? "true" : "false"; }
std::string n(int64_t v) { return std::to_string(v); }

// The kernels' last template argument, MINKEYS, is written out even at its default: the
// lowered name always carries it, and `cache import --verify` checks that name against this
// expression.
std::string min_keys(const Config& c) { return ", " + n(c.mk); }

int64_t row_blocks(const Spec& s, const Config& c, int64_t max_q) { return (max_q * s.group() + c.bm - 1) / c.bm; }

}  // namespace

Emitted emit(const Spec& s, const Config& c, Arch arch) {
  Emitted e;
  const bool per_head = s.kv_scale == KvScale::kHead;
  std::string header;
  if (s.op == Op::kKvWrite) {
    e.kernel_expression = "onecat::kv_write_kernel<" + n(s.kv_heads) + ", " + n(s.dim) + ", " + n(s.page) + ", " +
                          n(int(s.kv)) + ", " + b(per_head) + ", " + n(c.threads) + ">";
    header = "attention/kv_write.cuh";
  } else if (c.atom == Atom::kM16n8k16) {
    if (!arch.has_mma_m16n8k16()) {
      throw InputError("config " + c.to_string() + " uses the m16n8k16 atom, which needs sm_80 or newer (not " +
                       arch.name() + "); use an atom=wmma config");
    }
    if (c.shared_bytes(s) > arch.max_shared_bytes_per_cta()) {
      throw InputError("config " + c.to_string() + " needs " + n(c.shared_bytes(s)) +
                       " bytes of shared memory per CTA; " + arch.name() + " grants " +
                       n(arch.max_shared_bytes_per_cta()));
    }
    const int qlen = s.op == Op::kPrefill ? 0 : s.q;
    e.kernel_expression = "onecat::attention_sm80_kernel<" + n(s.heads) + ", " + n(s.kv_heads) + ", " + n(s.dim) +
                          ", " + n(s.page) + ", " + n(int(s.kv)) + ", " + b(per_head) + ", " + b(s.causal) + ", " +
                          n(s.window) + ", " + n(qlen) + ", " + n(c.bm) + ", " + n(c.bn) + ", " + n(c.wn) + ", " +
                          n(c.wr / 16) + ", " + n(c.stages) + ", " + n(c.split) + ", " + n(c.shared_bytes(s)) +
                          min_keys(c) + ">";
    header = "attention/attention_sm80.cuh";
  } else {
    const int qlen = s.op == Op::kPrefill ? 0 : s.q;
    e.kernel_expression = "onecat::attention_kernel<" + n(s.heads) + ", " + n(s.kv_heads) + ", " + n(s.dim) + ", " +
                          n(s.page) + ", " + n(int(s.kv)) + ", " + b(per_head) + ", " + b(s.causal) + ", " +
                          n(s.window) + ", " + n(qlen) + ", " + n(c.bm) + ", " + n(c.bn) + ", " + n(c.wn) + ", " +
                          n(c.split) + ", " + n(c.shared_bytes(s)) + min_keys(c) + ">";
    header = "attention/attention.cuh";
  }
  e.source = "// onecat attention generator v" + n(kGeneratorVersion) + "\n// spec:   " + s.to_string() +
             "\n// config: " + c.to_string() + "\n// arch:   " + arch.name() + "\n#include \"" + header + "\"\n";
  return e;
}

LaunchGeometry geometry(const Spec& s, const Config& c, int64_t batch, int64_t max_q) {
  LaunchGeometry g;
  if (s.op == Op::kKvWrite) {
    if (batch < 0) throw InputError("kv_write: negative token count");
    const int64_t chunks = batch * s.kv_heads * (s.dim / 8);
    const int64_t ctas = std::max<int64_t>(1, (chunks + c.threads - 1) / c.threads);
    if (ctas > 0x7fffffff) throw InputError("kv_write: " + n(batch) + " tokens exceed the grid limit");
    g.grid[0] = unsigned(ctas);
    g.block[0] = unsigned(c.threads);
    return g;
  }
  if (batch < 1) throw InputError("attention needs at least one sequence (batch=" + n(batch) + ")");
  if (s.op != Op::kPrefill) max_q = s.q;
  if (max_q < 1)
    throw InputError("attention prefill needs the longest query count of the batch (max_q=" + n(max_q) + ")");
  const int64_t z = batch * c.split;
  if (z > 65535)
    throw InputError("attention: batch " + n(batch) + " × split " + n(c.split) + " exceeds the grid's 65535");
  const int64_t x = row_blocks(s, c, max_q);
  if (x > 0x7fffffff) throw InputError("attention: " + n(max_q) + " query tokens exceed the grid limit");
  g.grid[0] = unsigned(x);
  g.grid[1] = unsigned(s.kv_heads);
  g.grid[2] = unsigned(z);
  g.block[0] = unsigned(c.cta_threads());
  g.dynamic_shared_bytes = unsigned(c.shared_bytes(s));
  return g;
}

int64_t workspace_floats(const Spec& s, const Config& c, int64_t batch) {
  if (s.op == Op::kKvWrite || s.op == Op::kPrefill || c.split == 1) return 0;
  return batch * s.kv_heads * row_blocks(s, c, s.q) * c.split * c.bm * (s.dim + 2);
}

int64_t workspace_counters(const Spec& s, const Config& c, int64_t batch) {
  if (s.op == Op::kKvWrite || s.op == Op::kPrefill || c.split == 1) return 0;
  return batch * s.kv_heads * row_blocks(s, c, s.q);
}

}  // namespace onecat::attention
