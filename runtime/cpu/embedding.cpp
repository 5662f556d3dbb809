#include "runtime/cpu/embedding.h"

#include <cstring>

namespace onecat::cpu {

void embedding(uint16_t* out, const uint16_t* table, const int* ids, int64_t tokens, int64_t hidden, int64_t vocab) {
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(uint16_t);
  for (int64_t t = 0; t < tokens; ++t) {
    uint16_t* dst = out + t * hidden;
    const int64_t id = ids[t];
    if (id < 0 || id >= vocab) {
      std::memset(dst, 0, row_bytes);
    } else {
      std::memcpy(dst, table + id * hidden, row_bytes);
    }
  }
}

}  // namespace onecat::cpu
