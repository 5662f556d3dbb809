// rope spec: what is fixed at compile time (docs/rope.md).
//   rope:heads=32,kv_heads=8,dim=128,qk_norm=1,kv_out=dense
//   rope:heads=32,kv_heads=8,dim=128,qk_norm=0,kv_out=pages,page=16,kv=e4m3,kv_scale=tensor
// heads and kv_heads are a rank's query and KV heads, dim the head dim (all rotated); qk_norm
// RMSNorms q and k per head first (Qwen3). kv_out=dense writes K and V as [tokens][kv_heads][dim]
// fp16; kv_out=pages writes them straight into attention's paged cache, the page size, element
// type and scale as in attention's specs (kv_scale defaults to none for f16, tensor for fp8).
// The scaling (default, linear, llama3, yarn) is not part of the spec: it is the frequency
// table, data the kernel reads.
#pragma once
#include <string>
#include <string_view>

#include "codegen/attention/spec.h"

namespace onecat::rope {

inline constexpr int kMaxHeads = 256;
// A head is one group of at most 32 lanes of up to 8 pairs each (Config::invalid_reason).
inline constexpr int kMaxDim = 512;

struct Spec {
  int heads = 0;
  int kv_heads = 0;
  int dim = 0;
  bool qk_norm = false;
  bool paged = false;  // kv_out=pages
  int page = 0;        // paged only
  attention::KvType kv = attention::KvType::kF16;
  attention::KvScale kv_scale = attention::KvScale::kNone;

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  int slots() const { return heads + 2 * kv_heads; }  // head vectors per token in qkv
  friend bool operator==(const Spec&, const Spec&) = default;
};

}  // namespace onecat::rope
