// sampling's typed ops (docs/sampling.md): Args for op=sample, ArgmaxArgs for op=argmax.
#pragma once
#include <cstdint>

#include "codegen/kernel_call.h"
#include "codegen/sampling/config.h"
#include "codegen/sampling/row_params.h"
#include "codegen/sampling/spec.h"

namespace onecat::sampling {

// op=sample over `rows` rows of logits, each with its own RowParams and history.
struct Args {
  DevicePtr tokens = 0;          // int [rows], out
  DevicePtr token_logprobs = 0;  // float [rows], out: the chosen token's raw logprob; 0: not written
  DevicePtr top_ids = 0;         // int [rows][spec.logprobs], out (spec.logprobs > 0); −1 past a row's own count
  DevicePtr top_logprobs = 0;    // float [rows][spec.logprobs], out; −inf past a row's own count
  DevicePtr logits = 0;          // float [rows][spec.vocab], read only
  DevicePtr params = 0;          // RowParams [rows]
  // Token histories for the penalties, CSR: row r's are history_ids[offsets[r], offsets[r+1]),
  // its prompt's first (RowParams::prompt_length of them), then its output's; repeats count.
  // 0 (all three): no penalties for any row. history_table is scratch of
  // history_table_bytes(offsets[rows]) bytes; the kernel initialises what it uses.
  DevicePtr history_offsets = 0;  // int [rows + 1]
  DevicePtr history_ids = 0;      // int
  DevicePtr history_table = 0;
  int64_t rows = 0;
};

// op=argmax: tokens[r] = the lowest id among the maxima of logits[r] (NaN never wins).
struct ArgmaxArgs {
  DevicePtr tokens = 0;     // int [rows], out
  DevicePtr logits = 0;     // float [rows][spec.vocab], logits_alignment(config)-byte aligned (emit.h)
  DevicePtr workspace = 0;  // workspace_bytes(spec, config, rows), zeroed once when allocated
  int64_t rows = 0;
};

// Two hash slots of (id, count) per history entry.
inline int64_t history_table_bytes(int64_t history_entries) { return 16 * history_entries; }
// argmax with split > 1: a partial per (row, CTA), then a counter per row. The kernel leaves
// both at 0, so zero the workspace once, when it is allocated: one workspace of the largest
// launch's size then serves every launch of the spec, whatever its rows and config.
// sample: 0 (its history scratch is Args::history_table).
int64_t workspace_bytes(const Spec& spec, const Config& config, int64_t rows);
KernelCall make_call(const Spec& spec, const Config& config, const Args& args);
KernelCall make_call(const Spec& spec, const Config& config, const ArgmaxArgs& args);

}  // namespace onecat::sampling
