// The request table of a CUDA compression call as its kernels see it, and where
// each input a step reads lives: which request a row or token belongs to, which
// ring entry holds a position, which flat index a refusal names. CUDA source only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/compress.hpp"
#include "impl/cuda/compress.hpp"

namespace aether::cuda::compress_kernels {

// One request; its rows and tokens start at its offsets (the host's plan), so a
// warp finds its request by searching them.
struct RequestMeta {
  std::int64_t start, token_offset, row_offset;
  std::int32_t slot, tokens;
};

// A prefill's requests: in the kernels' parameters when the table is short, so a
// queued call needs no copy before its first kernel, else in device memory.
constexpr std::size_t kRequestsInParameters = compress_tables::kPrefillRequestsInParameters;
struct Requests {
  RequestMeta in_parameters[kRequestsInParameters];
  const RequestMeta* in_memory;  // nullptr: the table is in_parameters
  std::size_t count;
  __device__ const RequestMeta* table() const {
    return in_memory != nullptr ? in_memory : in_parameters;
  }
};

// A decode step's requests as its launches' own parameters carry them, 16 bytes
// each, so nothing is copied before the kernel (a 32-byte table stored by kernels
// ahead of it took 7 us of a 30 us decode of 1024 requests in a graph on the
// H200). A step of more than N requests is split into parts of at most N, a launch
// each; all but the last let the next start at once.
struct DecodeEntry {
  std::int64_t start;
  std::int32_t slot;
  std::int32_t token_offset;  // from the part's first token
};
template <std::size_t N>
struct DecodeRequests {
  DecodeEntry entry[N + 1];        // entry[count].token_offset: the part's tokens
  std::size_t count, first_token;  // first_token: the part's first token in the step
  bool before_a_part;
  __device__ std::size_t tokens() const { return std::size_t(entry[count].token_offset); }
  __device__ RequestMeta operator[](std::size_t i) const {
    return {entry[i].start, std::int64_t(first_token) + entry[i].token_offset, 0, entry[i].slot,
            entry[i + 1].token_offset - entry[i].token_offset};
  }
};

struct Geometry {
  std::int64_t ratio;   // r
  std::size_t ring;     // S
  unsigned dim, width;  // D, 2 D
};

// A refusal code names a flat index of `projected`, or of the ring with this bit
// set: every ring code is above every projected one, the model's order.
constexpr unsigned long long kRingCode = 1ull << 62;

__device__ inline std::size_t warp_id() {
  return (std::size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ inline std::size_t warp_count() { return std::size_t(gridDim.x) * (blockDim.x / 32); }

// The last request whose `offset` is <= x (requests with nothing at x come first),
// every lane the same x. A table in memory is searched by the whole warp: each step
// its lanes test 32 evenly spaced entries of [lo, hi), so n requests take log32 n
// dependent loads where a binary search takes log2 n (1024 requests: 2, not 10). A
// table in the kernel's parameters is read through the constant cache, which serves
// a warp one address at a time: there every lane runs the same binary search (the
// warp's 32 addresses a step made a 1024-request decode 8-10 us slower on the H200).
template <class Table, class Offset>
__device__ std::size_t find_request(const Table& requests, std::size_t n, std::size_t x,
                                    Offset offset, bool in_parameters) {
  const unsigned lane = threadIdx.x % 32;
  std::size_t lo = 0, hi = n;  // invariant: answer in [lo, hi)
  while (in_parameters && hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (std::size_t(offset(requests[mid])) <= x ? lo : hi) = mid;
  }
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
template <class Table, class Offset, class Body>
__device__ void for_each_item(const Table& requests, std::size_t n, bool in_parameters,
                              std::size_t count, Offset offset, Body body) {
  const std::size_t warps = warp_count(), share = (count + warps - 1) / warps;
  const std::size_t first = warp_id() * share, last = first + share < count ? first + share : count;
  if (first >= last) return;
  std::size_t i = find_request(requests, n, first, offset, in_parameters);
  for (std::size_t x = first; x < last; ++x) {
    while (i + 1 < n && std::size_t(offset(requests[i + 1])) <= x) ++i;
    body(requests[i], x);
  }
}

// Position p's ring entry in request q's slot, as a float index.
__device__ inline std::size_t entry_of(const RequestMeta& q, std::int64_t p, const Geometry& g) {
  return ring_entry_offset(q.slot, p, g.ring, g.width);
}

// Where position p of request q is read from: positions before the step's start
// from the ring, the step's own from `projected` (for decode the same bytes the
// ring is given: S >= r + qmax - 1 keeps those entries apart from every old one
// read). `code`: the refusal code of its first float.
struct Input {
  const float* at;
  unsigned long long code;
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

// Output row `row` of a prefill request: its compressed row number j, or -1 for the
// placeholder of a chunk that completes nothing.
__device__ inline std::int64_t row_number(const RequestMeta& q, std::size_t row, std::int64_t r) {
  const std::int64_t s = q.start, e = q.start + q.tokens;
  return e / r == s / r ? -1 : s / r + (std::int64_t(row) - q.row_offset);
}

// The prefill positions whose ring writes wait for the verdict: those of the chunk's
// last S that land on the entry of a pending input [b, s), b = r floor(s/r), which
// every retry of a refused call reads (model::entries_a_refusal_may_change) and the
// chunk's first row may still be reading: p with (p - b) mod S < s - b, at most
// r - 1 of them (s - b < r <= S, and the last S positions take each entry once).
__device__ inline bool waits_for_verdict(const RequestMeta& q, std::int64_t p, const Geometry& g) {
  const std::int64_t b = q.start / g.ratio * g.ratio;
  return (p - b) % std::int64_t(g.ring) < q.start - b;
}

}  // namespace aether::cuda::compress_kernels
