// embedding spec: what is fixed at compile time (docs/embedding.md).
//   embedding:vocab=151936,hidden=4096
// vocab is the rows this table holds (a rank's slice under vocabulary parallelism: the kernel
// takes the slice's first id at run time); rows are fp16.
#pragma once
#include <string>
#include <string_view>

namespace onecat::embedding {

inline constexpr int kMaxVocab = (1 << 30);
inline constexpr int kMaxHidden = 65536;

struct Spec {
  int vocab = 0;
  int hidden = 0;

  static Spec parse(std::string_view text);  // throws InputError
  std::string to_string() const;
  friend bool operator==(const Spec&, const Spec&) = default;
};

}  // namespace onecat::embedding
