// One row of fp32 logits → the next token, its logprob and the top-n logprobs, one CTA per
// row, as runtime/cpu/sampling defines them (docs/sampling.md):
//   raw = sanitised logits; logprobs = log_softmax(raw) (fp32 online max/sum).
//   l = raw with the row's penalties. Counts come from its history (CSR, duplicates allowed)
//       through a hash table in the caller's history_table (2 slots per history entry) and a
//       bitmap of the seen ids in shared memory, so a pass over the row asks the table only
//       for tokens that were seen; nothing is [rows][vocab].
//   greedy rows: argmax l (lowest id among equal maxima).
//   else: x = (max l − l) / temperature, w = exp(−x), q = round(w · 2^40) (integer weights, so
//       every sum is exact and the same in any order). min_p keeps w ≥ min_p; top_k and top_p
//       keep a prefix of the order (l descending, id ascending); the token is the first kept
//       token in id order whose cumulative q reaches ceil(u · kept mass), u from Philox.
// Selecting a prefix without a sort: one pass makes a histogram (count and mass) over 256
// log-spaced bins of x, which cut the order into contiguous ranges. When the bins up to the
// one holding the prefix's end hold at most CAP tokens (the usual case), one more pass copies
// them into shared memory and a bitonic sort finishes there; otherwise radix passes over the
// key's four bytes narrow the boundary bin, and a last ordered pass splits ties by id. The top-n
// raw logprobs are selected the same way over raw values.
#pragma once
#include "common/grid.cuh"
#include "sampling/common.cuh"

namespace onecat {
namespace sampling {

inline constexpr int kBins = 256;

// ceil(a / b) for b > 0 and a quotient below 2^24 (a tie count), from a float estimate and
// exact corrections: a 64-bit division would call a subroutine (and spill around the call).
__device__ __forceinline__ u64 ceil_divide(u64 a, u64 b) {
  u64 j = u64(__fdividef(float(a), float(b)));
  while (j * b < a) ++j;
  while (j > 0 && (j - 1) * b >= a) --j;
  return j;
}

// x ≥ 0 → one of kBins bins, monotone in x: 0 below 2^-16, then 8 bins per octave, the last
// from about 2^15.6 (and +inf) on.
__device__ __forceinline__ int x_bin(float x) {
  const int e = int((__float_as_uint(x) & 0x7fffffffu) >> 20) - ((127 - 16) << 3);
  return e < 0 ? 0 : (e >= kBins - 2 ? kBins - 1 : e + 1);
}

// A histogram of masses (q ≤ 2^40) in shared memory, summed with 32-bit atomics: q split in
// kMassFields fields of kMassFieldBits bits, each field's sum exact in 32 bits for any vocabulary
// up to 2^20 tokens. A 64-bit shared atomicAdd compiles to a compare-and-swap spin loop
// (ATOMS.CAST.SPIN.64 on sm_90), which serialises a warp whose tokens fall in one bin — the
// usual case, since the log-spaced bins near the maximum hold most of the row.
inline constexpr int kMassFieldBits = 12;
inline constexpr int kMassFields = 4;
static_assert(kMassFields * kMassFieldBits >= 41, "a field for every bit of q ≤ 2^40");
struct MassHistogram {
  unsigned field[kMassFields][kBins];
  __device__ __forceinline__ void clear(int b) {
    ONECAT_SAMPLING_UNROLL
    for (int f = 0; f < kMassFields; ++f) field[f][b] = 0;
  }
  __device__ __forceinline__ void add(int b, u64 q) {
    ONECAT_SAMPLING_UNROLL
    for (int f = 0; f < kMassFields; ++f) {
      const unsigned v = unsigned(q >> (f * kMassFieldBits)) & ((1u << kMassFieldBits) - 1);
      if (v) atomicAdd(&field[f][b], v);
    }
  }
  __device__ __forceinline__ u64 operator[](int b) const {
    u64 m = 0;
    ONECAT_SAMPLING_UNROLL
    for (int f = 0; f < kMassFields; ++f) m += u64(field[f][b]) << (f * kMassFieldBits);
    return m;
  }
};

// The shared-memory layout; the bitmap of seen ids follows it.
template <int THREADS, int CAP>
struct SampleShared {
  u64 slots[THREADS];    // reductions and scans
  u64 list[CAP];         // compacted candidates, sorted
  MassHistogram mass1;   // the x-bin histogram
  MassHistogram mass2;   // the radix level's histogram
  unsigned count1[kBins];
  unsigned count2[kBins];
  u64 scalar[8];
  unsigned list_size;
  int token;
};
// codegen/sampling/config.h kSampleFixedShared bounds what is not slots or list.
template <int THREADS, int CAP>
struct SampleSharedSize {
  static_assert(sizeof(SampleShared<THREADS, CAP>) <= 8 * THREADS + 8 * CAP + 10368, "kSampleFixedShared");
  static constexpr int kBytes = int(sizeof(SampleShared<THREADS, CAP>));
};

// The end of a selected prefix of the order: the tokens whose pack_order is ≥ last.
struct Prefix {
  u64 last;   // 0: every token
  u64 count;  // tokens in it
  u64 mass;   // their q
};

template <int VOCAB, int LOGPROBS, int THREADS, int CAP>
struct SampleRow {
  static_assert((CAP & (CAP - 1)) == 0 && CAP >= 32, "CAP is a power of two ≥ 32");
  static_assert(u64(VOCAB) * ((1u << kMassFieldBits) - 1) <= 0xffffffffull, "a mass field's sum fits 32 bits");
  typedef SampleShared<THREADS, CAP> Shared;
  static constexpr int kWords = (VOCAB + 31) / 32;
  static constexpr int kSharedBytes = SampleSharedSize<THREADS, CAP>::kBytes;  // the bitmap follows
  // Contiguous segments for the ordered passes: thread t owns [t·kSegment, (t+1)·kSegment).
  static constexpr int kSegment = (VOCAB + THREADS - 1) / THREADS;

  Shared& sh;
  unsigned* seen_bits;  // kWords words, meaningful when `penalised`
  const float* x;       // this row's logits
  KernelRowParams p;
  // seed and step are read where they are used: copied at the start they would live in
  // registers through every pass, and ptxas spills them.
  const KernelRowParams* row_params;
  bool penalised = false;
  int* table = nullptr;  // (id, seen) pairs, table_slots of them
  unsigned table_slots = 0;
  // Filled by the first pass.
  float raw_max = 0, lse = 0, l_max = 0;
  int argmax_id = 0;
  float inverse_temperature = 1;

  // ---- per token ----

  __device__ __forceinline__ float raw_at(int i) const { return sanitize_logit(__ldg(x + i)); }

  // The id's first slot: a multiplicative hash mapped onto [0, table_slots) by a multiply-high
  // ("fastrange"), not a remainder.
  __device__ __forceinline__ unsigned home_slot(int id) const { return __umulhi(unsigned(id) * 2654435761u, table_slots); }
  __device__ __forceinline__ unsigned seen_of(int id) const {
    unsigned slot = home_slot(id);
    // Through L2 (ld.global.cg): the table was filled by atomics, which L1 does not see.
    while (__ldcg(table + 2 * slot) != id) slot = slot + 1 == table_slots ? 0 : slot + 1;
    return unsigned(__ldcg(table + 2 * slot + 1));
  }
  __device__ __forceinline__ float penalised_value(int i, float raw) const {
    if (penalised && ((seen_bits[i >> 5] >> (i & 31)) & 1u)) return penalize(raw, seen_of(i), p);
    return raw;
  }
  // Δl / T as Δl · (1/T): no exactness is needed here (the check allows fp32 rounding of the
  // weights), and a division would call its slow path from every pass.
  __device__ __forceinline__ float x_of(float l) const { return __fmul_rn(__fsub_rn(l_max, l), inverse_temperature); }
  __device__ __forceinline__ u64 weight_of(float l) const {
    const float w = expf(-x_of(l));
    return __float2ull_rn(__fmul_rn(w, 1099511627776.0f));  // · 2^40, exact
  }
  // In the sampling candidates: finite and not cut by min_p.
  __device__ __forceinline__ bool candidate(float l) const {
    return l != negative_infinity() && !(p.min_p > 0.0f && expf(-x_of(l)) < p.min_p);
  }

  // The two views of a token the selections work on: the penalised sampling order over the
  // candidates, and the raw order over every token.
  struct Token {
    bool in;
    unsigned key;
    int bin;
    u64 q;
  };
  __device__ __forceinline__ Token sample_view(int i) const {
    const float l = penalised_value(i, raw_at(i));
    Token t;
    t.in = candidate(l);
    t.key = order_key(l);
    t.bin = t.in ? x_bin(x_of(l)) : kBins - 1;
    t.q = t.in ? weight_of(l) : 0ull;
    return t;
  }
  __device__ __forceinline__ Token raw_view(int i) const {
    const float r = raw_at(i);
    Token t;
    t.in = true;
    t.key = order_key(r);
    t.bin = x_bin(__fsub_rn(raw_max, r));
    t.q = 0;
    return t;
  }

  // ---- setup and the first pass ----

  __device__ __forceinline__ void build_history(const int* offsets, const int* ids, int* history_table, int row) {
    const bool any = p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
    if (!any || offsets == nullptr) return;
    const int begin = offsets[row], end = offsets[row + 1];
    if (end <= begin) return;
    penalised = true;
    table = history_table + 4ll * begin;
    table_slots = 2u * unsigned(end - begin);
    ONECAT_SAMPLING_NO_UNROLL
    for (int w = threadIdx.x; w < kWords; w += THREADS) seen_bits[w] = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (unsigned s = threadIdx.x; s < table_slots; s += THREADS) table[2 * s] = -1, table[2 * s + 1] = 0;
    __syncthreads();
    const int prompt_end = begin + (p.prompt_length > 0 ? p.prompt_length : 0);
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = begin + int(threadIdx.x); j < end; j += THREADS) {
      const int id = ids[j];
      if (unsigned(id) >= unsigned(VOCAB)) continue;  // out of range: ignored (the host checks)
      unsigned slot = home_slot(id);
      for (;;) {
        const int was = atomicCAS(table + 2 * slot, -1, id);
        if (was == -1 || was == id) break;
        slot = slot + 1 == table_slots ? 0 : slot + 1;
      }
      // Prompt: bit 0; output: +2 per occurrence. Or and add commute, so the result is exact.
      if (j < prompt_end) {
        atomicOr(reinterpret_cast<unsigned*>(table) + 2 * slot + 1, 1u);
      } else {
        atomicAdd(reinterpret_cast<unsigned*>(table) + 2 * slot + 1, 2u);
      }
      atomicOr(seen_bits + (id >> 5), 1u << (id & 31));
    }
    __syncthreads();
  }

  // lse of the raw row (fp32 online max and sum) and max/argmax of the penalised row.
  __device__ __forceinline__ void first_pass() {
    float m = negative_infinity(), s = 0.0f;
    u64 best = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = threadIdx.x; i < VOCAB; i += THREADS) {
      const float r = raw_at(i);
      if (r > m) {
        s = s * expf(m - r) + 1.0f;  // m = −inf: s is 0
        m = r;
      } else if (r != negative_infinity()) {
        s += expf(r - m);
      }
      const u64 packed = pack_order(order_key(penalised_value(i, r)), i);
      best = packed > best ? packed : best;
    }
    // (m, s) pairs merge as max and rescaled sum: order-independent up to rounding, and the
    // tree is fixed, so the result is deterministic.
    struct LseOp {
      __device__ __forceinline__ u64 operator()(u64 a, u64 b) const {
        const float ma = __uint_as_float(unsigned(a >> 32)), sa = __uint_as_float(unsigned(a));
        const float mb = __uint_as_float(unsigned(b >> 32)), sb = __uint_as_float(unsigned(b));
        const float mm = ma > mb ? ma : mb;
        if (mm == __int_as_float(0xff800000)) return a;
        const float ss = (ma == mm ? sa : sa * expf(ma - mm)) + (mb == mm ? sb : sb * expf(mb - mm));
        return (u64(__float_as_uint(mm)) << 32) | __float_as_uint(ss);
      }
    };
    const u64 ms = block_reduce<THREADS>((u64(__float_as_uint(m)) << 32) | __float_as_uint(s), sh.slots, LseOp());
    raw_max = __uint_as_float(unsigned(ms >> 32));
    lse = raw_max == negative_infinity() ? raw_max : raw_max + logf(__uint_as_float(unsigned(ms)));
    best = block_reduce<THREADS>(best, sh.slots, MaxOp());
    argmax_id = packed_id(best);
    l_max = key_value(packed_key(best));
  }

  // ---- selecting a prefix of an order ----

  // The histogram over x bins of a view (counts, and masses when `masses`) into count1/mass1.
  template <class View>
  __device__ __forceinline__ void bin_histogram(View view, bool masses) {
    ONECAT_SAMPLING_NO_UNROLL
    for (int b = threadIdx.x; b < kBins; b += THREADS) sh.count1[b] = 0, sh.mass1.clear(b);
    __syncthreads();
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = threadIdx.x; i < VOCAB; i += THREADS) {
      const Token t = view(i);
      if (!t.in) continue;
      atomicAdd(sh.count1 + t.bin, 1u);
      if (masses && t.q) sh.mass1.add(t.bin, t.q);
    }
    __syncthreads();
  }

  // The first bin whose cumulative count (by_mass: mass) reaches target, and the totals of the
  // bins before it. Every thread computes it from the shared histogram.
  struct BinBoundary {
    int bin;
    u64 count_before, mass_before;
  };
  __device__ __forceinline__ BinBoundary boundary_bin(bool by_mass, u64 target) const {
    u64 c = 0, m = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int b = 0; b < kBins; ++b) {
      const u64 nc = c + sh.count1[b], nm = m + sh.mass1[b];
      if ((by_mass ? nm : nc) >= target) return BinBoundary{b, c, m};
      c = nc;
      m = nm;
    }
    return BinBoundary{kBins - 1, c, m};
  }

  // Copies the view's tokens in bins ≤ last_bin (there are `count`, at most CAP) into
  // list[0, count) sorted by the order; returns the sorted length (a power of two, padded
  // with 0).
  template <class View>
  __device__ __forceinline__ int compact_sorted(View view, int last_bin, int count) {
    if (threadIdx.x == 0) sh.list_size = 0;
    __syncthreads();
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = threadIdx.x; i < VOCAB; i += THREADS) {
      const Token t = view(i);
      if (t.in && t.bin <= last_bin) {
        const unsigned at = atomicAdd(&sh.list_size, 1u);
        if (at < unsigned(CAP)) sh.list[at] = pack_order(t.key, i);
      }
    }
    __syncthreads();
    int n = 32;
    while (n < count) n *= 2;
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = count + int(threadIdx.x); j < n; j += THREADS) sh.list[j] = 0;
    __syncthreads();
    block_sort_descending<THREADS>(sh.list, n);
    return n;
  }

  // In the sorted list of `count` tokens: the shortest prefix whose mass (by_mass) or count
  // reaches target. Thread t scans a contiguous share of the list.
  // With `masses` false (the raw view) the prefix's mass is left 0.
  __device__ __forceinline__ Prefix list_prefix(bool by_mass, bool masses, u64 target, int count) {
    if (!by_mass) {
      const int n = int(target < u64(count) ? target : u64(count));
      u64 m = 0;
      if (masses) {
        ONECAT_SAMPLING_NO_UNROLL
        for (int j = threadIdx.x; j < n; j += THREADS) m += weight_of(key_value(packed_key(sh.list[j])));
        m = block_reduce<THREADS>(m, sh.slots, SumOp());
      }
      return Prefix{sh.list[n - 1], u64(n), m};
    }
    constexpr int kShare = (CAP + THREADS - 1) / THREADS;
    const int first = int(threadIdx.x) * kShare;
    u64 own = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = first; j < first + kShare && j < count; ++j) own += weight_of(key_value(packed_key(sh.list[j])));
    const Scan scan = block_exclusive_scan<THREADS>(own, sh.slots);
    const u64 before = scan.before;
    if (threadIdx.x == 0) sh.scalar[0] = u64(count), sh.scalar[1] = scan.total;  // not reached: all
    __syncthreads();
    if (before < target && before + own >= target) {
      u64 m = before;
      ONECAT_SAMPLING_NO_UNROLL
      for (int j = first; j < first + kShare && j < count; ++j) {
        m += weight_of(key_value(packed_key(sh.list[j])));
        if (m >= target) {
          sh.scalar[0] = u64(j + 1);
          sh.scalar[1] = m;
          break;
        }
      }
    }
    __syncthreads();
    const int n = int(sh.scalar[0]);
    const Prefix r{sh.list[n - 1], u64(n), sh.scalar[1]};
    __syncthreads();
    return r;
  }

  // Among the view's tokens with this key, the id of the j-th (1-based) in id order: an
  // ordered pass over contiguous segments.
  template <class View>
  __device__ __forceinline__ int nth_tie(View view, unsigned key, u64 j) {
    const int first = int(threadIdx.x) * kSegment;
    const int end = first + kSegment < VOCAB ? first + kSegment : VOCAB;
    u64 own = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = first; i < end; ++i) {
      const Token t = view(i);
      own += (t.in && t.key == key) ? 1u : 0u;
    }
    const u64 before = block_exclusive_scan<THREADS>(own, sh.slots).before;
    if (before < j && before + own >= j) {
      u64 seen = before;
      ONECAT_SAMPLING_NO_UNROLL
      for (int i = first; i < end; ++i) {
        const Token t = view(i);
        if (t.in && t.key == key && ++seen == j) {
          sh.scalar[2] = u64(i);
          break;
        }
      }
    }
    __syncthreads();
    const int id = int(sh.scalar[2]);
    __syncthreads();
    return id;
  }

  // The shortest prefix of the view's order whose count (or mass) reaches target, exactly.
  // The x-bin histogram (count1/mass1) must hold the view's. Fast path: the bins up to the
  // boundary hold ≤ CAP tokens → compact and sort. Otherwise radix passes over the boundary
  // bin's keys, a byte at a time, then the ties by id.
  template <class View>
  __device__ __forceinline__ Prefix select(View view, bool by_mass, bool masses, u64 target) {
    const BinBoundary bb = boundary_bin(by_mass, target);
    const int bin = bb.bin;
    u64 count_before = bb.count_before, mass_before = bb.mass_before;
    const u64 through = count_before + sh.count1[bin];
    if (through <= u64(CAP)) {
      const int count = int(through);
      compact_sorted(view, bin, count);
      return list_prefix(by_mass, masses, target, count);
    }
    unsigned prefix = 0;
    u64 eq_count = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int level = 0; level < 4; ++level) {
      const int shift = 24 - 8 * level;
      ONECAT_SAMPLING_NO_UNROLL
      for (int b = threadIdx.x; b < kBins; b += THREADS) sh.count2[b] = 0, sh.mass2.clear(b);
      __syncthreads();
      ONECAT_SAMPLING_NO_UNROLL
      for (int i = threadIdx.x; i < VOCAB; i += THREADS) {
        const Token t = view(i);
        if (!t.in || t.bin != bin) continue;
        if (level > 0 && (t.key >> (shift + 8)) != prefix) continue;
        const int digit = (t.key >> shift) & 255;
        atomicAdd(sh.count2 + digit, 1u);
        if (masses && t.q) sh.mass2.add(digit, t.q);
      }
      __syncthreads();
      // Larger digits come first in the order.
      int digit = 0;
      ONECAT_SAMPLING_NO_UNROLL
      for (int d = kBins - 1; d >= 0; --d) {
        const u64 nc = count_before + sh.count2[d], nm = mass_before + sh.mass2[d];
        if ((by_mass ? nm : nc) >= target || d == 0) {
          digit = d;
          break;
        }
        count_before = nc;
        mass_before = nm;
      }
      eq_count = sh.count2[digit];
      prefix = (prefix << 8) | unsigned(digit);
      __syncthreads();
    }
    // prefix is now the boundary's whole key; ties at it are taken in id order.
    const unsigned key = prefix;
    const u64 q = masses ? weight_of(key_value(key)) : 0ull;
    u64 j = by_mass ? (q ? ceil_divide(target - mass_before, q) : eq_count) : target - count_before;
    j = j < 1 ? 1 : (j > eq_count ? eq_count : j);
    const int id = nth_tie(view, key, j);
    return Prefix{pack_order(key, id), count_before + j, mass_before + j * q};
  }

  // ---- the sampled token ----

  // The first token in id order, among the candidates in `kept`, whose cumulative mass
  // reaches target (1 ≤ target ≤ their mass): an ordered pass over contiguous segments.
  __device__ __forceinline__ int inverse_cdf(const Prefix& kept, u64 target) {
    const int first = int(threadIdx.x) * kSegment;
    const int end = first + kSegment < VOCAB ? first + kSegment : VOCAB;
    u64 own = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = first; i < end; ++i) {
      const Token t = sample_view(i);
      if (t.in && pack_order(t.key, i) >= kept.last) own += t.q;
    }
    if (threadIdx.x == 0) sh.token = argmax_id;  // only if the sums disagreed (never)
    const u64 before = block_exclusive_scan<THREADS>(own, sh.slots).before;
    if (before < target && before + own >= target) {
      u64 m = before;
      ONECAT_SAMPLING_NO_UNROLL
      for (int i = first; i < end; ++i) {
        const Token t = sample_view(i);
        if (t.in && pack_order(t.key, i) >= kept.last) {
          m += t.q;
          if (m >= target) {
            sh.token = i;
            break;
          }
        }
      }
    }
    __syncthreads();
    const int token = sh.token;
    __syncthreads();
    return token;
  }

  __device__ __forceinline__ int sample_token() {
    const bool greedy = !(p.temperature >= Limits::kGreedyTemperature);
    if (greedy || l_max == negative_infinity()) return argmax_id;
    inverse_temperature = __fdividef(1.0f, p.temperature);  // ≤ 2 ulp: only weights use it
    auto view = [this](int i) { return sample_view(i); };
    // Candidates (finite, min_p) and their mass; the x-bin histogram for the selections.
    bin_histogram(view, true);
    u64 n0 = 0, mass0 = 0;
    ONECAT_SAMPLING_NO_UNROLL
    for (int b = 0; b < kBins; ++b) n0 += sh.count1[b], mass0 += sh.mass1[b];
    const bool by_k = p.top_k > 0 && u64(p.top_k) < n0;
    const bool by_p = p.top_p < 1.0f;
    Prefix kept{0, n0, mass0};
    if (by_k) kept = select(view, false, true, u64(p.top_k));
    if (by_p) {
      double want = ceil(double(p.top_p) * double(kept.mass));
      const u64 target = want < 1.0 ? 1ull : (want > double(kept.mass) ? kept.mass : u64(want));
      // The top_p prefix ends inside the top_k one, and prefix masses do not depend on
      // where the larger prefix ends, so the same histogram serves.
      kept = select(view, true, true, target);
    }
    const double want = ceil(double(philox_uniform(__ldg(&row_params->seed), __ldg(&row_params->step))) * double(kept.mass));
    const u64 target = want < 1.0 ? 1ull : (want > double(kept.mass) ? kept.mass : u64(want));
    return inverse_cdf(kept, target);
  }

  // ---- top-n logprobs of the raw distribution ----

  // The n best raw tokens, best first, into list[0, n).
  __device__ __forceinline__ void top_raw(int n) {
    if (raw_max == negative_infinity()) {  // every token ties at −inf: the lowest ids
      ONECAT_SAMPLING_NO_UNROLL
      for (int j = threadIdx.x; j < n; j += THREADS) sh.list[j] = pack_order(order_key(negative_infinity()), j);
      __syncthreads();
      return;
    }
    auto view = [this](int i) { return raw_view(i); };
    bin_histogram(view, false);
    const Prefix top = select(view, false, false, u64(n));
    // select leaves the list sorted when it took the fast path; otherwise collect the n.
    const BinBoundary bb = boundary_bin(false, u64(n));
    if (bb.count_before + sh.count1[bb.bin] <= u64(CAP)) return;
    if (threadIdx.x == 0) sh.list_size = 0;
    __syncthreads();
    ONECAT_SAMPLING_NO_UNROLL
    for (int i = threadIdx.x; i < VOCAB; i += THREADS) {
      const u64 packed = pack_order(order_key(raw_at(i)), i);
      if (packed >= top.last) {
        const unsigned at = atomicAdd(&sh.list_size, 1u);
        if (at < 32u) sh.list[at] = packed;
      }
    }
    __syncthreads();
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = n + int(threadIdx.x); j < 32; j += THREADS) sh.list[j] = 0;
    __syncthreads();
    block_sort_descending<THREADS>(sh.list, 32);
  }
};

template <int VOCAB, int LOGPROBS, int THREADS, int CAP>
__device__ __forceinline__ void sample_body(int* __restrict__ tokens, float* __restrict__ token_logprobs,
                                            int* __restrict__ top_ids, float* __restrict__ top_logprobs,
                                            const float* __restrict__ logits, const KernelRowParams* __restrict__ params,
                                            const int* __restrict__ history_offsets,
                                            const int* __restrict__ history_ids, int* __restrict__ history_table,
                                            unsigned char* shared_bytes) {
  typedef SampleRow<VOCAB, LOGPROBS, THREADS, CAP> Row;
  static_assert(LOGPROBS >= 0 && LOGPROBS <= 32, "at most 32 top logprobs");
  const int row = blockIdx.x;
  Row r{*reinterpret_cast<typename Row::Shared*>(shared_bytes),
        reinterpret_cast<unsigned*>(shared_bytes + Row::kSharedBytes), logits + (long long)row * VOCAB,
        params[row], params + row};
  r.build_history(history_offsets, history_ids, history_table, row);
  r.first_pass();
  const int token = r.sample_token();
  auto logprob = [&](float raw) { return r.lse == negative_infinity() ? r.lse : __fsub_rn(raw, r.lse); };
  if (threadIdx.x == 0) {
    tokens[row] = token;
    if (token_logprobs) token_logprobs[row] = logprob(r.raw_at(token));
  }
  if constexpr (LOGPROBS > 0) {
    const int n = r.p.logprobs < 0 ? 0 : (r.p.logprobs > LOGPROBS ? LOGPROBS : r.p.logprobs);
    if (n > 0) r.top_raw(n < VOCAB ? n : VOCAB);
    ONECAT_SAMPLING_NO_UNROLL
    for (int j = threadIdx.x; j < LOGPROBS; j += THREADS) {
      const bool have = j < n && j < VOCAB;
      const u64 packed = have ? r.sh.list[j] : 0ull;
      top_ids[(long long)row * LOGPROBS + j] = have ? packed_id(packed) : -1;
      top_logprobs[(long long)row * LOGPROBS + j] = have ? logprob(key_value(packed_key(packed))) : negative_infinity();
    }
  }
}

#ifndef ONECAT_EMULATED_CTA
template <int VOCAB, int LOGPROBS, int THREADS, int CAP>
// At least one CTA per SM: without it ptxas (12.8) aims at more CTAs per SM and spills
// long-lived values of this long kernel at ~40 registers.
__global__ void __launch_bounds__(THREADS, 1)
    sample_kernel(int* __restrict__ tokens, float* __restrict__ token_logprobs, int* __restrict__ top_ids,
                  float* __restrict__ top_logprobs, const float* __restrict__ logits,
                  const KernelRowParams* __restrict__ params, const int* __restrict__ history_offsets,
                  const int* __restrict__ history_ids, int* __restrict__ history_table) {
  grid_dependency_sync();
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  sample_body<VOCAB, LOGPROBS, THREADS, CAP>(tokens, token_logprobs, top_ids, top_logprobs, logits, params,
                                                     history_offsets, history_ids, history_table, shared_bytes);
}
#endif

}  // namespace sampling
}  // namespace onecat
