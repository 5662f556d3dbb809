// CPU reference of the embedding family (docs/embedding.md), the oracle for GPU checks and
// the tuner: a row gather from an fp16 table.
#pragma once
#include <cstdint>

namespace onecat::cpu {

// out[t] = table[ids[t]] (fp16 rows of `hidden`); an id outside [0, vocab) gives a zero row.
void embedding(uint16_t* out, const uint16_t* table, const int* ids, int64_t tokens, int64_t hidden, int64_t vocab);

}  // namespace onecat::cpu
