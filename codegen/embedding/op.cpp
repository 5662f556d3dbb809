#include "codegen/embedding/op.h"

#include "codegen/embedding/emit.h"

namespace onecat::embedding {

KernelCall make_call(const Spec& spec, const Config& config, const Args& a) {
  KernelCall call;
  call.geometry = geometry(spec, config, a.tokens);
  call.arg(a.out).arg(a.table).arg(a.ids).arg(int(a.vocab_start)).arg(int(a.tokens));
  return call;
}

}  // namespace onecat::embedding
