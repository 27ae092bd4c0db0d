#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "impl/compress_math.hpp"
#include "impl/compress_plan.hpp"
#include "impl/cuda/compress.hpp"
#include "impl/cuda/launch.cuh"

namespace aether::cuda {

namespace {
namespace ce = compress_error;
using impl::Step;

constexpr unsigned long long kNoError = kNoRefusal;
constexpr unsigned long long kRingBit = 1ull << 63;  // a verdict naming a ring index
constexpr unsigned long long kRingCode = 1ull
                                         << (kRefusalCodeBits - 1);  // the same in a refusal code
constexpr unsigned kWarpsPerBlock = 8;  // the row kernels: a warp per output row
// Prefill at r = 2 streams its (row, chunk) items through shared memory, this many
// stages deep (48 KiB a block: 3 x 4 loads of 16 bytes x 256 threads)
constexpr bool kStreamPairs = true;
constexpr unsigned kStreamStages = 3;
// Where rows are read into registers (decode; prefill at r = 1), a row's next 128
// channels load while the current ones are computed: one chunk's loads in flight
// per warp cannot cover DRAM latency (docs/performance.md, tried and dropped).
constexpr bool kPrefetchNextChunk = true;
constexpr int kRowBlocksPerSm = kPrefetchNextChunk ? 4 : 5;  // 64 registers for the second chunk

// One request as the kernels see it; rows and tokens of request i start at its
// offsets (the host's plan), so a warp finds its request by searching them.
struct RequestMeta {
  std::int64_t start, token_offset, row_offset;
  std::int32_t slot, tokens;
};

// A call's requests as its kernels take them: in their parameters when the table
// is short, so a queued call needs no operation before its first kernel (see
// RefusalWord for what that saves), else in device memory.
constexpr std::size_t kRequestsInParameters = 64;
struct Requests {
  RequestMeta in_parameters[kRequestsInParameters];
  const RequestMeta* in_memory;  // nullptr: the table is in_parameters
  std::size_t count;
  __device__ const RequestMeta* table() const {
    return in_memory != nullptr ? in_memory : in_parameters;
  }
};

// The caller's verdict from the call's refusal word, read where every refusal has
// been recorded.
__device__ inline unsigned long long verdict_of(const RefusalWord& refusals,
                                                unsigned long long word) {
  if (!refusals.refused(word)) return kNoError;
  return (word & kRingCode ? kRingBit : 0) | (word & (kRingCode - 1));
}

struct Geometry {
  std::int64_t ratio, ring;  // r, S
  unsigned dim, width;       // D, 2 D
};

// The last request whose `offset` is <= x (requests with nothing at x come first),
// searched by the whole warp (every lane, the same x): each step its lanes test 32
// evenly spaced entries of [lo, hi), so n requests take log32 n dependent loads
// where a binary search takes log2 n (a decode of 1024 requests: 2, not 10).
template <class Offset>
__device__ std::size_t find_request(const RequestMeta* requests, std::size_t n, std::size_t x,
                                    Offset offset) {
  const unsigned lane = threadIdx.x % 32;
  std::size_t lo = 0, hi = n;  // invariant: answer in [lo, hi)
  while (hi - lo > 1) {
    const auto probe = [&](unsigned k) { return lo + (hi - lo) * k / 32; };  // probe(0) = lo
    const bool not_after = lane == 0 || std::size_t(offset(requests[probe(lane)])) <= x;
    // offsets ascend, so the lanes that hold are a prefix: the answer is in
    // [probe(last), probe(last + 1))
    const unsigned last = 31 - __clz(__ballot_sync(~0u, not_after));
    const std::size_t next_lo = probe(last);
    if (last < 31) hi = probe(last + 1);
    lo = next_lo;
  }
  return lo;
}

// This warp's share of `count` consecutive items (rows or tokens) in order,
// body(request, item): a contiguous range, so the owning request is found once by
// find_request and then followed forward (a search per row kept each short-lived
// warp waiting on a chain of dependent loads). The grid is what fits on the device.
template <class Offset, class Body>
__device__ void for_each_item(const RequestMeta* requests, std::size_t n, std::size_t count,
                              Offset offset, Body body) {
  const std::size_t warps = std::size_t(gridDim.x) * (blockDim.x / 32);
  const std::size_t warp = (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::size_t share = (count + warps - 1) / warps, first = warp * share;
  const std::size_t last = first + share < count ? first + share : count;
  if (first >= last) return;
  std::size_t i = find_request(requests, n, first, offset);
  for (std::size_t x = first; x < last; ++x) {
    while (i + 1 < n && std::size_t(offset(requests[i + 1])) <= x) ++i;
    body(requests[i], x);
  }
}

__device__ inline std::size_t warp_id() {
  return (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ inline std::size_t warp_count() { return std::size_t(gridDim.x) * (blockDim.x / 32); }

// Ring entry p mod S of request q's slot, as a float index. Positions are below
// 2^31 (the plan refuses more), so the remainder is taken in 32 bits where S
// allows: a 64-bit remainder is a hundred-odd instructions a use.
__device__ inline std::size_t entry_of(const RequestMeta& q, std::int64_t p, const Geometry& g) {
  const std::size_t within =
      g.ring > INT32_MAX ? std::size_t(p) : std::size_t(unsigned(p) % unsigned(g.ring));
  return (std::size_t(q.slot) * std::size_t(g.ring) + within) * g.width;
}

// Where position p of request q is read from: positions before the step's start
// from the ring (entry p mod S of its slot), the step's own from `projected` (for
// decode the same bytes the ring is about to hold: S >= r + qmax - 1 keeps those
// entries apart from every old one read). `index`: the flat index a refusal names.
struct Input {
  const float* at;
  unsigned long long index;
};
__device__ inline Input input_of(const RequestMeta& q, std::int64_t p, const float* projected,
                                 const float* ring, const Geometry& g) {
  if (p < q.start) {
    const std::size_t at = entry_of(q, p, g);
    return {ring + at, kRingCode | at};
  }
  const std::size_t at = std::size_t(q.token_offset + p - q.start) * g.width;
  return {projected + at, at};
}

__device__ inline void report(const RefusalWord& error, unsigned long long code) {
  if (error.at != nullptr) atomicMin(error.at, error.tag | code);
}

// `&`, not `&&`: four comparisons into one predicate, where the short circuit
// compiled to a branch per value (16 a quad in the rows kernels)
__device__ inline bool all_finite(const float4& x) {
  return isfinite(x.x) & isfinite(x.y) & isfinite(x.z) & isfinite(x.w);
}

// Reports every non-finite value among the n floats at `at` (`index`: the code of
// the first), the warp's lanes loading 16 bytes each where aligned, kLoads loads
// in flight before any test. Tested one by one, each lane would wait out its 32
// loads of a 4 KiB position in turn (the report's atomic keeps the compiler from
// moving a load above the previous test).
// The prefill rows kernel takes one load (more spill its registers).
template <unsigned kLoads>
__device__ inline void check_run(const float* at, std::size_t n, unsigned long long index,
                                 const RefusalWord& error, unsigned lane) {
  const std::size_t vectors = reinterpret_cast<std::uintptr_t>(at) % 16 == 0 ? n / 4 : 0;
  for (std::size_t base = lane; base < vectors; base += 32 * kLoads) {
    float4 x[kLoads];
#pragma unroll
    for (unsigned k = 0; k < kLoads; ++k)
      if (base + 32 * k < vectors) x[k] = reinterpret_cast<const float4*>(at)[base + 32 * k];
#pragma unroll
    for (unsigned k = 0; k < kLoads; ++k)
      if (base + 32 * k < vectors && !all_finite(x[k]))
        for (std::size_t i = 4 * (base + 32 * k); i < 4 * (base + 32 * k) + 4; ++i)
          if (!isfinite(at[i])) report(error, index + i);
  }
  for (std::size_t base = 4 * vectors + lane; base < n; base += 32 * kLoads) {
    float x[kLoads];
#pragma unroll
    for (unsigned k = 0; k < kLoads; ++k)
      if (base + 32 * k < n) x[k] = at[base + 32 * k];
#pragma unroll
    for (unsigned k = 0; k < kLoads; ++k)
      if (base + 32 * k < n && !isfinite(x[k])) report(error, index + base + 32 * k);
  }
}

__device__ inline float component(const float4& x, int k) {
  return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}

// L2 priorities for a prefill: its inputs are read once, so their lines go first;
// its staged rows are read back by the commit kernel right after, so theirs stay
// (without the hints a 64 x 512 call's 16 MiB of staged rows come back from DRAM).
__device__ inline std::uint64_t l2_policy_evict_first() {
  std::uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ inline std::uint64_t l2_policy_evict_last() {
  std::uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ inline float4 load_evict_first(const float* at) {
  float4 x;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
      : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
      : "l"(at), "l"(l2_policy_evict_first()));
  return x;
}
// 16 bytes into shared memory asynchronously (a cp.async group member, as
// __pipeline_memcpy_async), evicted from L2 first.
__device__ inline void copy_evict_first(float4* shared, const float* at) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(
                   unsigned(__cvta_generic_to_shared(shared))),
               "l"(at), "l"(l2_policy_evict_first())
               : "memory");
}
__device__ inline void store_evict_last(std::uint16_t* at, uint2 v) {
  asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;" ::"l"(at), "r"(v.x), "r"(v.y),
               "l"(l2_policy_evict_last())
               : "memory");
}

// Channels d .. d+3 of a group's row from its R positions' scores s and latents v
// (16-byte loads, position t read at in[t]): every non-finite value reported, the
// four bf16 written (Staged: a prefill's staging buffer, kept in L2).
template <int R, bool Staged>
__device__ void channel_quad(const float4 (&s)[R], const float4 (&v)[R], const Input (&in)[R],
                             unsigned d, unsigned D, const RefusalWord& error, std::uint16_t* out) {
  bool finite = true;
#pragma unroll
  for (int t = 0; t < R; ++t) finite = finite & all_finite(s[t]) & all_finite(v[t]);
  if (!finite)
    for (int t = 0; t < R; ++t)
      for (unsigned c = 0; c < 4; ++c) {
        if (!isfinite(component(s[t], int(c)))) report(error, in[t].index + d + c);
        if (!isfinite(component(v[t], int(c)))) report(error, in[t].index + D + d + c);
      }
  std::uint16_t z[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const auto score = [&](int t) { return component(s[t], c); };
    const auto value = [&](int t) { return component(v[t], c); };
    if constexpr (R == 2)
      z[c] = impl::bf16_nearest(impl::gated_mean_pair(score(0), score(1), value(0), value(1)));
    else
      z[c] = impl::bf16_nearest(impl::gated_mean(score, value, R));
  }
  const uint2 packed = make_uint2(z[0] | unsigned(z[1]) << 16, z[2] | unsigned(z[3]) << 16);
  if constexpr (Staged)
    store_evict_last(out + d, packed);
  else
    *reinterpret_cast<uint2*>(out + d) = packed;
}

// One completed group's row, a warp's lanes over the channels. R in {1, 2, 4}:
// channels 4 at a time from 16-byte loads, the group in registers; R = 0: any
// ratio, one channel at a time. Every non-finite value read is reported. Prefill:
// the 16-byte paths take the prefill's L2 priorities; otherwise (decode) they also
// store the group's new positions, as they are loaded, into their ring entries in
// ring_out (so a step reads each of them once).
template <int R, bool Prefill>
__device__ void group_row(const RequestMeta& q, std::int64_t j, const float* projected,
                          const float* ring, const Geometry& g, const RefusalWord& error,
                          std::uint16_t* out, unsigned lane, float* ring_out = nullptr) {
  const unsigned D = g.dim;
  if constexpr (R > 0) {
    constexpr int kQuads = R < 2 ? 2 : 1;  // 4 loads in flight per lane before any use
    constexpr unsigned kStep = 128 * kQuads;
    Input in[R];
#pragma unroll
    for (int t = 0; t < R; ++t) in[t] = input_of(q, j * R + t, projected, ring, g);
    float* keep[R];  // position t's ring entry if it is new in this decode step
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const std::int64_t p = j * R + t;
      keep[t] = Prefill || p < q.start ? nullptr : ring_out + entry_of(q, p, g);
    }
    const auto load = [&](unsigned base, float4(&s)[kQuads][R], float4(&v)[kQuads][R]) {
#pragma unroll
      for (int k = 0; k < kQuads; ++k)
#pragma unroll
        for (int t = 0; t < R; ++t)
          if (base + 128 * k < D) {
            const float *score = in[t].at + base + 128 * k, *latent = score + D;
            s[k][t] =
                Prefill ? load_evict_first(score) : __ldg(reinterpret_cast<const float4*>(score));
            v[k][t] =
                Prefill ? load_evict_first(latent) : __ldg(reinterpret_cast<const float4*>(latent));
          }
    };
    float4 s[kQuads][R], v[kQuads][R];
    load(4 * lane, s, v);
    for (unsigned base = 4 * lane; base < D; base += kStep) {
      // the next chunk's loads in flight during this chunk's arithmetic (R <= 2:
      // R = 4 would need twice the registers)
      float4 next_s[kQuads][R], next_v[kQuads][R];
      if (kPrefetchNextChunk && R <= 2 && base + kStep < D) load(base + kStep, next_s, next_v);
#pragma unroll
      for (int k = 0; k < kQuads; ++k) {
        const unsigned d = base + 128 * k;
        if (d >= D) break;
        channel_quad<R, Prefill>(s[k], v[k], in, d, D, error, out);
#pragma unroll
        for (int t = 0; t < R; ++t)
          if (keep[t] != nullptr) {
            *reinterpret_cast<float4*>(keep[t] + d) = s[k][t];
            *reinterpret_cast<float4*>(keep[t] + D + d) = v[k][t];
          }
      }
      if (kPrefetchNextChunk && R <= 2) {
#pragma unroll
        for (int k = 0; k < kQuads; ++k)
#pragma unroll
          for (int t = 0; t < R; ++t) s[k][t] = next_s[k][t], v[k][t] = next_v[k][t];
      } else if (base + kStep < D) {
        load(base + kStep, s, v);
      }
    }
  } else {
    const std::int64_t r = g.ratio;
    for (unsigned d = lane; d < D; d += 32) {
      for (std::int64_t t = 0; t < r; ++t) {
        const Input in = input_of(q, j * r + t, projected, ring, g);
        if (!isfinite(in.at[d])) report(error, in.index + d);
        if (!isfinite(in.at[D + d])) report(error, in.index + D + d);
      }
      const auto at = [&](int t) { return input_of(q, j * r + t, projected, ring, g).at; };
      out[d] = impl::bf16_nearest(impl::gated_mean([&](int t) { return at(t)[d]; },
                                                   [&](int t) { return at(t)[D + d]; }, int(r)));
    }
  }
}

// Row `row` of request q: its compressed row number j, or -1 for the placeholder of
// a chunk that completes nothing.
__device__ std::int64_t row_number(const RequestMeta& q, std::size_t row, std::int64_t r) {
  const std::int64_t s = q.start, e = q.start + q.tokens;
  return e / r == s / r ? -1 : s / r + (std::int64_t(row) - q.row_offset);
}

// This warp's share of the prefill rows (a run of consecutive rows) at r = 2
// (16-byte loads) as a stream of (row, 128-channel chunk) items: each lane's four loads of an item
// are copied into shared memory asynchronously, kStreamStages - 1 items ahead of their arithmetic
// and across row boundaries. (Loading into registers kept two chunks of one row in flight and
// started each row cold: 55% of DRAM bandwidth with the issue slots half idle.) A lane reads back
// only what it copied: no barrier.
using Stages = float4[kStreamStages][4][32 * kWarpsPerBlock];
__device__ void stream_pairs(const RequestMeta* requests, std::size_t n, std::size_t row_count,
                             const float* projected, const float* ring, const Geometry& g,
                             std::uint16_t* staged, std::int32_t* staged_j,
                             const RefusalWord& error, Stages& stage) {
  const unsigned lane = threadIdx.x % 32, slot = threadIdx.x, D = g.dim, chunks = (D + 127) / 128;
  const std::size_t warps = warp_count(), w = warp_id(), share = (row_count + warps - 1) / warps;
  const std::size_t first = w * share, last = first + share < row_count ? first + share : row_count;
  // this warp's items (row, chunk) in order, counted forward: a 64-bit division of
  // the item number by a run-time chunk count cost a hundred-odd instructions an item
  struct Item {
    std::size_t row;
    unsigned chunk;
  };
  const auto advance = [&](Item& at) {
    if (++at.chunk == chunks) at.chunk = 0, ++at.row;
  };
  const auto next_stage = [](unsigned u) { return u + 1 == kStreamStages ? 0u : u + 1; };
  const auto request_of = [&](std::size_t& i, std::size_t row) {
    while (i + 1 < n && std::size_t(requests[i + 1].row_offset) <= row) ++i;
  };
  std::size_t ask_request = 0, use_request = 0;
  Item asked{first, 0};
  if (first < last)
    ask_request = use_request =
        find_request(requests, n, first, [](const RequestMeta& m) { return m.row_offset; });
  // a row's inputs found once, at the first of its chunks this warp takes
  std::size_t ask_last = ~std::size_t(0), use_last = ~std::size_t(0);
  const float* ask_at[2] = {nullptr, nullptr};
  Input use_in[2] = {};
  std::int64_t use_j = -1;
  const auto ask =
      [&](unsigned u) {  // the next item's loads into stage u, then a commit (empty past the end)
        const std::size_t row = asked.row;
        const unsigned chunk = asked.chunk;
        advance(asked);
        if (row < last) {
          if (row != ask_last) {
            ask_last = row;
            request_of(ask_request, row);
            const RequestMeta q = requests[ask_request];
            const std::int64_t j = row_number(q, row, 2);
            ask_at[0] = j < 0 ? nullptr : input_of(q, 2 * j, projected, ring, g).at;
            ask_at[1] = j < 0 ? nullptr : input_of(q, 2 * j + 1, projected, ring, g).at;
          }
          const unsigned d = 4 * lane + 128 * chunk;
          if (ask_at[0] != nullptr && d < D)
            for (int t = 0; t < 2; ++t) {
              copy_evict_first(&stage[u][2 * t][slot], ask_at[t] + d);
              copy_evict_first(&stage[u][2 * t + 1][slot], ask_at[t] + D + d);
            }
        }
        __pipeline_commit();
      };
  for (unsigned k = 0; k + 1 < kStreamStages; ++k) ask(k);
  unsigned u = 0, refill = kStreamStages - 1;  // this item's stage, and the stage asked for now
  for (Item at{first, 0}; at.row < last;
       advance(at), u = next_stage(u), refill = next_stage(refill)) {
    const std::size_t row = at.row;
    const unsigned chunk = at.chunk;
    ask(refill);
    if (row != use_last) {
      use_last = row;
      request_of(use_request, row);
      const RequestMeta q = requests[use_request];
      use_j = row_number(q, row, 2);
      if (use_j >= 0)
        use_in[0] = input_of(q, 2 * use_j, projected, ring, g),
        use_in[1] = input_of(q, 2 * use_j + 1, projected, ring, g);
    }
    if (chunk == 0 && lane == 0) staged_j[row] = std::int32_t(use_j);
    __pipeline_wait_prior(kStreamStages - 1);  // this item's copies landed
    std::uint16_t* out = staged + row * D;
    const unsigned d = 4 * lane + 128 * chunk;
    if (d < D && use_j < 0) *reinterpret_cast<uint2*>(out + d) = make_uint2(0, 0);
    if (d < D && use_j >= 0) {
      const float4 sc[2] = {stage[u][0][slot], stage[u][2][slot]},
                   la[2] = {stage[u][1][slot], stage[u][3][slot]};
      channel_quad<2, true>(sc, la, use_in, d, D, error, out);
    }
  }
}

// Prefill, pass 1 (reads, writes only the staging buffer): output row x into
// `staged` and its row number j (-1: placeholder) into `staged_j`, then each
// request's pending positions, the ones no row reads. So every input the step
// reads is checked exactly where it is read.
template <int R>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kRowBlocksPerSm)
    prefill_rows(const __grid_constant__ Requests table, std::size_t row_count,
                 const float* projected, const float* ring, Geometry g, std::uint16_t* staged,
                 std::int32_t* staged_j, RefusalWord error) {
  wait_for_previous_kernel();  // launched as a programmatic dependent of the metadata's upload, if
                               // any
  const RequestMeta* requests = table.table();
  const std::size_t request_count = table.count;
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t r = R > 0 ? R : g.ratio;  // a constant where the template gives it
  if constexpr (R == 2 && kStreamPairs) {
    __shared__ Stages stage;
    stream_pairs(requests, request_count, row_count, projected, ring, g, staged, staged_j, error,
                 stage);
  } else {
    for_each_item(
        requests, request_count, row_count, [](const RequestMeta& m) { return m.row_offset; },
        [&](const RequestMeta& q, std::size_t row) {
          const std::int64_t j = row_number(q, row, r);
          if (lane == 0) staged_j[row] = std::int32_t(j);
          std::uint16_t* out = staged + row * g.dim;
          if (j < 0) {
            for (unsigned d = lane; d < g.dim; d += 32) out[d] = 0;
          } else {
            group_row<R, true>(q, j, projected, ring, g, error, out, lane);
          }
        });
  }
  // Each request's pending positions (e mod r of them, at most r - 1), in pieces of
  // 128 floats dealt over every warp: with a warp per request each lane would wait
  // out its eight loads of a 4 KiB position one after another.
  const std::size_t pieces = (std::size_t(r - 1) * g.width + 127) / 128;
  for (std::size_t item = warp_id(); item < request_count * pieces; item += warp_count()) {
    const RequestMeta q = requests[item / pieces];
    const std::int64_t e = q.start + q.tokens, first = e / r * r > q.start ? e / r * r : q.start;
    const std::size_t from =
        std::size_t(q.token_offset + first - q.start) * g.width + item % pieces * 128;
    const std::size_t to = std::size_t(q.token_offset + q.tokens) * g.width;
    if (from < to)
      check_run<1>(projected + from, to - from < 128 ? to - from : 128, from, error, lane);
  }
}

// Prefill, pass 2, only when nothing was refused (launched as a programmatic
// dependent of pass 1: it waits for it before reading the verdict). The first
// `commit_blocks` blocks copy the staged rows and their numbers to the caller's
// buffers; block commit_blocks + x + requests k copies request x's k-th last
// position into the ring, if the chunk has one (a chunk keeps its last S positions).
__global__ void commit_rows(const std::uint16_t* staged, const std::int32_t* staged_j,
                            std::size_t row_count, unsigned dim, std::int64_t ratio,
                            std::uint16_t* rows, std::int32_t* row_index, std::int32_t* positions,
                            bool vector_rows, unsigned commit_blocks,
                            const __grid_constant__ Requests table, unsigned keep_depth,
                            const float* projected, float* ring, Geometry g, bool vector_ring,
                            RefusalWord refusals, unsigned long long* verdict) {
  wait_for_previous_kernel();
  const unsigned long long word = *refusals.at;
  if (blockIdx.x == 0 && threadIdx.x == 0) *verdict = verdict_of(refusals, word);
  if (refusals.refused(word)) return;
  const RequestMeta* requests = table.table();
  const std::size_t request_count = table.count;
  if (blockIdx.x >= commit_blocks) {
    const unsigned x = (blockIdx.x - commit_blocks) % unsigned(request_count);
    const RequestMeta q = requests[x];
    const std::int64_t kept = q.tokens < g.ring ? q.tokens : g.ring;
    for (std::int64_t k = (blockIdx.x - commit_blocks) / unsigned(request_count); k < kept;
         k += keep_depth) {
      const std::int64_t local = q.tokens - 1 - k, p = q.start + local;
      const float* from = projected + std::size_t(q.token_offset + local) * g.width;
      float* to = ring + entry_of(q, p, g);
      if (vector_ring) {
        for (unsigned i = threadIdx.x; i < g.width / 4; i += blockDim.x)
          reinterpret_cast<float4*>(to)[i] = reinterpret_cast<const float4*>(from)[i];
      } else {
        for (unsigned i = threadIdx.x; i < g.width; i += blockDim.x) to[i] = from[i];
      }
    }
    return;
  }
  const std::size_t stride = std::size_t(commit_blocks) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n = row_count * dim, vectors = vector_rows ? n / 8 : 0;
  for (std::size_t i = first; i < vectors; i += stride) {
    const uint4* line = reinterpret_cast<const uint4*>(staged) + i / 8 * 8;
    reinterpret_cast<uint4*>(rows)[i] = line[i % 8];
    // A staged 128-byte line, once its eight lanes (of this warp) have read it, is
    // dropped from L2 unwritten: it never goes back to DRAM. Lines the element
    // loop below reads are kept.
    __syncwarp(__activemask());
    if (i % 8 == 0 && i + 7 < vectors)
      asm volatile("discard.global.L2 [%0], 128;" ::"l"(line) : "memory");
  }
  for (std::size_t i = 8 * vectors + first; i < n; i += stride) rows[i] = staged[i];
  for (std::size_t i = first; i < row_count; i += stride) {
    const std::int32_t j = staged_j[i];
    row_index[i] = j;
    positions[i] = j < 0 ? 0 : std::int32_t(j * ratio);
  }
}

// Decode, pass 1, on blocks of 256 threads, each thread kValidateLoads 16-byte
// loads: a block per 4096 floats (with a thread per 4 floats three threads in four
// would have no load and a small call's grid would run four waves deep).
constexpr int kValidateLoads = 4;
constexpr std::size_t kValidatedPerBlock = 256 * 4 * kValidateLoads;
// The model's refusal order, the first non-finite projected value
// (lowest index), else the lowest non-finite old ring entry a request reads (the
// codes order them, so the two checks may run apart: Projected, OldEntries).
template <bool Projected, bool OldEntries>
__global__ void validate(const float* projected, std::size_t n, const float* ring,
                         const __grid_constant__ Requests table, Geometry g, RefusalWord error) {
  wait_for_previous_kernel();  // launched as a programmatic dependent of the metadata's upload, if
                               // any
  const RequestMeta* requests = table.table();
  const std::size_t request_count = table.count;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (!Projected) n = 0;
  // 16 bytes per load where aligned: this pass reads every input once
  const std::size_t vectors = reinterpret_cast<std::uintptr_t>(projected) % 16 == 0 ? n / 4 : 0;
  constexpr int kLoads = kValidateLoads;  // in flight per thread before any test
  for (std::size_t base = first; base < vectors; base += kLoads * stride) {
    float4 x[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k)
      if (base + k * stride < vectors)
        x[k] = __ldg(reinterpret_cast<const float4*>(projected) + base + k * stride);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const std::size_t v = base + k * stride;
      if (v < vectors && !all_finite(x[k]))
        for (std::size_t i = 4 * v; i < 4 * v + 4; ++i)
          if (!isfinite(projected[i])) report(error, i);
    }
  }
  for (std::size_t i = 4 * vectors + first; i < n; i += stride)
    if (!isfinite(projected[i])) report(error, i);
  if (!OldEntries) return;
  const unsigned lane = threadIdx.x % 32;
  for (std::size_t i = warp_id(); i < request_count;
       i += warp_count()) {  // old positions [r floor(s/r), s)
    const RequestMeta q = requests[i];
    if ((q.start + q.tokens) / g.ratio == q.start / g.ratio)
      continue;  // completes nothing: reads nothing old
    for (std::int64_t p = q.start / g.ratio * g.ratio; p < q.start; ++p) {
      const Input in = input_of(q, p, projected, ring, g);
      check_run<8>(in.at, g.width, in.index, error, lane);
    }
  }
}

// Decode, pass 2, only when nothing was refused: token x's position into its ring
// entry, then its output row, completed when p mod r = r - 1.
template <int R>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kRowBlocksPerSm)
    decode_rows(const __grid_constant__ Requests table, std::size_t token_count,
                const float* projected, float* ring, Geometry g, std::uint16_t* rows,
                std::int32_t* row_index, std::int32_t* positions, bool vector, RefusalWord refusals,
                unsigned long long* verdict) {
  wait_for_previous_kernel();  // launched as a programmatic dependent of validate
  const unsigned long long word = *refusals.at;
  if (blockIdx.x == 0 && threadIdx.x == 0) *verdict = verdict_of(refusals, word);
  if (refusals.refused(word)) return;
  const unsigned lane = threadIdx.x % 32;
  for_each_item(
      table.table(), table.count, token_count, [](const RequestMeta& m) { return m.token_offset; },
      [&](const RequestMeta& q, std::size_t token) {
        // r a constant where the template gives it (its divisions a few instructions)
        const std::int64_t r = R > 0 ? R : g.ratio,
                           p = q.start + (std::int64_t(token) - q.token_offset);
        const float* from = projected + token * g.width;
        float* to = ring + entry_of(q, p, g);
        // a position whose group completes in this step goes into the ring with the
        // group's row (group_row, 16-byte paths); the others here
        const bool with_its_row = R > 0 && p / r * r + r - 1 < q.start + q.tokens;
        if (!with_its_row && vector) {
          for (unsigned i = lane; i < g.width / 4; i += 32)
            reinterpret_cast<float4*>(to)[i] = reinterpret_cast<const float4*>(from)[i];
        } else if (!with_its_row) {
          for (unsigned i = lane; i < g.width; i += 32) to[i] = from[i];
        }
        const std::int64_t j = p % r == r - 1 ? p / r : -1;
        if (lane == 0) {
          row_index[token] = std::int32_t(j);
          positions[token] = j < 0 ? 0 : std::int32_t(j * r);
        }
        std::uint16_t* out = rows + token * g.dim;
        if (j < 0) {
          for (unsigned d = lane; d < g.dim; d += 32) out[d] = 0;
        } else {
          group_row<R, false>(q, j, projected, ring, g, RefusalWord{}, out, lane, ring);
        }
      });
}

// Calls f(std::integral_constant<int, R>) for the kernels' ratio template: the
// register path for r in {1, 2, 4}, 0 (any ratio) otherwise.
template <class F>
void with_ratio(int ratio, F f) {
  switch (ratio) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

unsigned grid_for(std::size_t work, std::size_t per_block,
                  std::size_t most = std::size_t(1) << 31) {
  return unsigned(std::min((work + per_block - 1) / per_block, most));
}

// Blocks of kWarpsPerBlock warps for `warps` warps of work, at most what the
// device holds at once (the row kernels' warps persist over their share).
template <auto kernel>
unsigned resident_grid(std::size_t warps) {
  const std::size_t blocks =
      resident_blocks(reinterpret_cast<const void*>(kernel), int(32 * kWarpsPerBlock));
  return std::max(1u, grid_for(warps, kWarpsPerBlock, std::max<std::size_t>(1, blocks)));
}

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Both steps read each input once where they use it and write nothing the caller
// sees until the call's refusal word says nothing was refused: prefill computes
// its rows into a staging buffer while checking what it reads, then commits them
// and the ring's new entries; decode checks its inputs in a first pass, then its
// ring writes and rows. The pass-2 kernels read the word themselves and write the
// caller's verdict, so nothing waits between them. Queues a planned, non-empty
// call. 0 or the cudaError_t.
int launch(const impl::CompressPlan& plan, std::span<const CompressRequest> requests,
           device_span<const float> projected, device_span<float> ring, const CompressShape& shape,
           device_span<std::uint16_t> rows, device_span<std::int32_t> row_index,
           device_span<std::int32_t> positions, Step step, unsigned long long* verdict,
           Stream stream) {
  const bool decode = step == Step::Decode;
  if (decode && plan.tokens == 0)  // nothing read, nothing written
    return cudaMemsetAsync(verdict, 0xff, sizeof *verdict, stream);
  std::vector<RequestMeta> meta;
  meta.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i)
    meta.push_back({requests[i].start, std::int64_t(plan.token_offset[i]),
                    std::int64_t(plan.row_offset[i]), requests[i].state_slot, requests[i].tokens});
  Requests table{};
  table.count = meta.size();
  const bool in_parameters = meta.size() <= kRequestsInParameters;
  if (in_parameters) std::copy(meta.begin(), meta.end(), table.in_parameters);
  const auto round_up = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t meta_bytes = in_parameters ? 0 : round_up(meta.size() * sizeof(RequestMeta));
  const std::size_t staged_bytes = decode ? 0 : round_up(plan.rows * shape.dim * 2);
  void* scratch = nullptr;
  RefusalWord refusals;
  // A decode's table longer than one upload kernel carries is copied on a second
  // stream, beside the check of `projected` (which needs no table), and the old
  // entries are checked there; a shorter table's store kernel is faster on the
  // call's own stream (docs/performance.md).
  const bool table_beside = decode && meta.size() * sizeof(RequestMeta) > kKernelCarriedBytes;
  const bool upload_here = !in_parameters && !table_beside;
  if (int e = upload_scratch(upload_here ? meta.data() : nullptr,
                             upload_here ? meta.size() * sizeof(RequestMeta) : 0, stream, &scratch,
                             meta_bytes + staged_bytes + (decode ? 0 : plan.rows * 4), &refusals))
    return e;
  if (!in_parameters) table.in_memory = static_cast<const RequestMeta*>(scratch);
  auto* staged = reinterpret_cast<std::uint16_t*>(static_cast<char*>(scratch) + meta_bytes);
  auto* staged_j =
      reinterpret_cast<std::int32_t*>(static_cast<char*>(scratch) + meta_bytes + staged_bytes);
  const Geometry g{shape.ratio, std::int64_t(shape.ring), unsigned(shape.dim),
                   unsigned(2 * shape.dim)};
  const bool vector =
      shape.dim % 4 == 0 && aligned(projected.data(), 16) && aligned(ring.data(), 16);
  const int R = vector && (!decode || aligned(rows.data(), 8)) ? int(shape.ratio) : 0;
  const unsigned warp_threads = 32 * kWarpsPerBlock;
  int failure = 0;
  if (decode && !table_beside) {
    const std::size_t work =
        std::max(projected.size(), meta.size() * std::size_t(shape.ratio - 1) * g.width);
    overlapped(validate<true, true>, dim3(grid_for(work, kValidatedPerBlock, 4096) + 1), 256, 0,
               stream, projected.data(), projected.size(), static_cast<const float*>(ring.data()),
               table, g, refusals);
  } else if (decode) {
    Stream side = nullptr;
    failure = fork_side(stream, &side);
    if (failure == 0)
      failure = copy_to_scratch(meta.data(), meta.size() * sizeof(RequestMeta), side);
    if (failure == 0)
      validate<false, true><<<grid_for(meta.size(), 8), 256, 0, side>>>(
          projected.data(), projected.size(), static_cast<const float*>(ring.data()), table, g,
          refusals);
    overlapped(validate<true, false>,
               dim3(grid_for(projected.size(), kValidatedPerBlock, 4096) + 1), 256, 0, stream,
               projected.data(), projected.size(), static_cast<const float*>(ring.data()), table, g,
               refusals);
    if (failure == 0) failure = join_side(stream);
  }
  if (decode) {
    with_ratio(R, [&](auto r) {
      overlapped(decode_rows<r()>, dim3(resident_grid<decode_rows<r()>>(plan.tokens)),
                 int(warp_threads), 0, stream, table, plan.tokens, projected.data(), ring.data(), g,
                 rows.data(), row_index.data(), positions.data(), vector, refusals, verdict);
    });
  } else {
    with_ratio(R, [&](auto r) {
      overlapped(prefill_rows<r()>, dim3(resident_grid<prefill_rows<r()>>(plan.rows)),
                 int(warp_threads), 0, stream, table, plan.rows, projected.data(),
                 static_cast<const float*>(ring.data()), g, staged, staged_j, refusals);
    });
    // the ring's new entries: requests x depth blocks after the row blocks
    std::size_t most = 0;
    for (const auto& q : requests) most = std::max(most, std::size_t(q.tokens));
    const unsigned depth = unsigned(std::min({shape.ring, most, std::size_t(64)}));
    const unsigned commit_blocks =
        grid_for(std::max(plan.rows * shape.dim / 8, plan.rows), 256, 4096) + 1;
    overlapped(commit_rows, dim3(commit_blocks + unsigned(meta.size()) * depth), 256, 0, stream,
               static_cast<const std::uint16_t*>(staged),
               static_cast<const std::int32_t*>(staged_j), plan.rows, unsigned(shape.dim),
               shape.ratio, rows.data(), row_index.data(), positions.data(),
               aligned(rows.data(), 16), commit_blocks, table, depth, projected.data(), ring.data(),
               g, vector, refusals, verdict);
  }
  if (failure == 0) failure = cudaGetLastError();
  // recorded on every path: the call that next takes this buffer waits for it
  if (const int e = release_scratch(stream); failure == 0) failure = e;
  return failure;
}

using Planned = std::variant<impl::CompressPlan, CompressError>;
Planned plan_of(std::span<const CompressRequest> requests, device_span<const float> projected,
                device_span<float> ring, const CompressShape& shape,
                device_span<std::uint16_t> rows, device_span<std::int32_t> row_index,
                device_span<std::int32_t> positions, Step step) {
  return impl::plan_call(requests, shape, step, projected.size(), ring.size(), rows.size(),
                         row_index.size(), positions.size());
}

// The call, waiting once for the device's verdict.
Status<CompressError> run(std::span<const CompressRequest> requests,
                          device_span<const float> projected, device_span<float> ring,
                          const CompressShape& shape, device_span<std::uint16_t> rows,
                          device_span<std::int32_t> row_index, device_span<std::int32_t> positions,
                          Step step, Stream stream) {
  const Planned planned =
      plan_of(requests, projected, ring, shape, rows, row_index, positions, step);
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  if (requests.empty()) return Ok{};
  Verdict v;
  int failure = verdict_slot(v);  // every launch writes it
  if (failure == 0)
    failure = launch(std::get<impl::CompressPlan>(planned), requests, projected, ring, shape, rows,
                     row_index, positions, step, v.word(), stream);
  if (failure == 0) failure = end_verdict(v, stream);
  if (failure != 0) return ce::DeviceFailure{failure};
  return compress_verdict(*v.host);
}

// The call queued, its device refusals left in *verdict.
Status<CompressError> enqueue(std::span<const CompressRequest> requests,
                              device_span<const float> projected, device_span<float> ring,
                              const CompressShape& shape, device_span<std::uint16_t> rows,
                              device_span<std::int32_t> row_index,
                              device_span<std::int32_t> positions, Step step,
                              DeviceVerdict* verdict, Stream stream) {
  const Planned planned =
      plan_of(requests, projected, ring, shape, rows, row_index, positions, step);
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  const int failure =
      requests.empty() ? cudaMemsetAsync(&verdict->refusal, 0xff, sizeof verdict->refusal, stream)
                       : launch(std::get<impl::CompressPlan>(planned), requests, projected, ring,
                                shape, rows, row_index, positions, step, &verdict->refusal, stream);
  if (failure != 0) return ce::DeviceFailure{failure};
  return Ok{};
}
}  // namespace

Status<CompressError> compress_verdict(const DeviceVerdict& verdict) {
  if (verdict.refusal == kNoError) return Ok{};
  return ce::NonFiniteInput{verdict.refusal & kRingBit ? 1 : 0,
                            std::size_t(verdict.refusal & ~kRingBit)};
}

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       device_span<const float> projected, device_span<float> ring,
                                       const CompressShape& shape, device_span<std::uint16_t> rows,
                                       device_span<std::int32_t> row_index,
                                       device_span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Prefill, stream);
}

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      device_span<const float> projected, device_span<float> ring,
                                      const CompressShape& shape, device_span<std::uint16_t> rows,
                                      device_span<std::int32_t> row_index,
                                      device_span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Decode, stream);
}

Status<CompressError> enqueue_compress_prefill(std::span<const CompressRequest> requests,
                                               device_span<const float> projected,
                                               device_span<float> ring, const CompressShape& shape,
                                               device_span<std::uint16_t> rows,
                                               device_span<std::int32_t> row_index,
                                               device_span<std::int32_t> positions,
                                               DeviceVerdict* verdict, Stream stream) {
  return enqueue(requests, projected, ring, shape, rows, row_index, positions, Step::Prefill,
                 verdict, stream);
}

Status<CompressError> enqueue_compress_decode(std::span<const CompressRequest> requests,
                                              device_span<const float> projected,
                                              device_span<float> ring, const CompressShape& shape,
                                              device_span<std::uint16_t> rows,
                                              device_span<std::int32_t> row_index,
                                              device_span<std::int32_t> positions,
                                              DeviceVerdict* verdict, Stream stream) {
  return enqueue(requests, projected, ring, shape, rows, row_index, positions, Step::Decode,
                 verdict, stream);
}

}  // namespace aether::cuda
