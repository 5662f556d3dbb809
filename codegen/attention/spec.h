// attention spec: what is fixed at compile time (docs/attention.md).
//   attention:op=decode,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,window=0
//   attention:op=verify,heads=32,kv_heads=8,dim=128,page=16,kv=e4m3,kv_scale=head,q=8,window=0
//   attention:op=prefill,heads=32,kv_heads=8,dim=128,page=16,kv=f16,kv_scale=none,causal=1,window=0
//   attention:op=kv_write,kv_heads=8,dim=128,page=16,kv=e5m2,kv_scale=tensor
// The canonical form prints the fields its op uses, in this order; kv_scale defaults to none
// for kv=f16 and tensor for fp8, window to 0, causal to 1.
#pragma once
#include <string>
#include <string_view>

namespace onecat::attention {

enum class Op { kPrefill, kDecode, kVerify, kKvWrite };
// Values match templates/attention/kv_format.cuh.
enum class KvType { kF16 = 0, kE4m3 = 1, kE5m2 = 2 };
enum class KvScale { kNone, kTensor, kHead };

inline constexpr int kMaxHeads = 256;
inline constexpr int kMaxGroup = 64;      // query heads per KV head
inline constexpr int kMaxPage = 1024;     // tokens per page
inline constexpr int kMaxVerifyTokens = 16;
inline constexpr int kMaxWindow = 1 << 24;

struct Spec {
  Op op = Op::kDecode;
  int heads = 0;     // query heads (0 for kv_write, which does not read queries)
  int kv_heads = 0;
  int dim = 0;       // head_dim: 64, 128 or 256
  int page = 0;      // tokens per KV page
  KvType kv = KvType::kF16;
  KvScale kv_scale = KvScale::kNone;
  bool causal = true;  // prefill only; decode and verify are causal by construction
  int window = 0;      // sliding window in tokens (0: none): key j is seen by query i iff i - window < j <= i
  int q = 1;           // query tokens per sequence: 1 for decode, 2..16 for verify

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  int group() const { return heads / kv_heads; }
  int kv_bytes() const { return kv == KvType::kF16 ? 2 : 1; }  // per cached element
  friend bool operator==(const Spec&, const Spec&) = default;
};

std::string_view op_name(Op op);
std::string_view kv_name(KvType kv);

}  // namespace onecat::attention
