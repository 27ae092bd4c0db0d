// Prefill's kernels (impl/cuda/compress_kernels.hpp): the one pass over the rows
// and the ring writes, and the second kernel that keeps the writes landing on a
// pending input until the verdict is clean.
#include "impl/cuda/compress_kernels.hpp"

#include <cuda_pipeline.h>

#include <algorithm>

#include "impl/cuda/compress_launch.cuh"
#include "impl/cuda/compress_rows.cuh"
#include "impl/cuda/evict_first.cuh"

namespace aether::cuda::compress_kernels {

namespace {
constexpr int kRowBlocksPerSm = 4;  // 64 registers for the next chunk's loads
// Prefill at r = 2 streams its (row, chunk) items through shared memory, this many
// stages deep (48 KiB a block: 3 x 4 loads of 16 bytes x 256 threads).
constexpr unsigned kStreamStages = 3;
using Stages = float4[kStreamStages][4][32 * kWarpsPerBlock];

// The ring writes of a prefill, as items (request, k-th last position, 128-float
// piece) dealt over every warp: each request's last min(S, tokens) positions,
// checked as they are read (the pending ones, which no row reads, are among them:
// S >= r), each written but those that wait for the verdict (waits_for_verdict).
__device__ void keep_last_positions(const Launch& c, const RequestMeta* requests, std::size_t n) {
  const Geometry& g = c.g;
  const unsigned lane = threadIdx.x % 32;
  const auto least = [](std::size_t a, std::size_t b) { return a < b ? a : b; };
  const std::size_t depth = least(g.ring, std::size_t(c.most_tokens));
  const std::size_t pieces = (g.width + 127) / 128, per_request = depth * pieces;
  for (std::size_t item = warp_id(); item < n * per_request; item += warp_count()) {
    const RequestMeta q = requests[item / per_request];
    const std::size_t k = item % per_request / pieces, piece = item % pieces;
    if (k >= least(g.ring, std::size_t(q.tokens))) continue;
    const std::int64_t local = q.tokens - 1 - std::int64_t(k), p = q.start + local;
    const std::size_t from = std::size_t(q.token_offset + local) * g.width + piece * 128;
    const std::size_t n = least(128, g.width - piece * 128);
    float* to = waits_for_verdict(q, p, g) ? nullptr : c.ring + entry_of(q, p, g) + piece * 128;
    copy_checked<1>(c.projected + from, to, n, from, c.refusal, lane, c.vector);
  }
}

// This warp's share of the prefill rows (a run of consecutive rows) at r = 2
// (16-byte loads) as a stream of (row, 128-channel chunk) items: each lane's four
// loads of an item are copied into shared memory asynchronously, kStreamStages - 1
// items ahead of their arithmetic and across row boundaries. (Loading into registers
// kept two chunks of one row in flight and started each row cold: 55% of DRAM
// bandwidth with the issue slots half idle.) A lane reads back only what it copied:
// no barrier. `between` runs once the first items' loads are asked for, under
// their latency.
template <bool EvictFirst, class Between>
__device__ void stream_pairs(const Launch& c, const RequestMeta* requests, std::size_t n,
                             bool in_parameters, Stages& stage, Between between) {
  const Geometry& g = c.g;
  const unsigned lane = threadIdx.x % 32, slot = threadIdx.x, D = g.dim, chunks = (D + 127) / 128;
  const std::size_t warps = warp_count(), share = (c.rows + warps - 1) / warps;
  const std::size_t first = warp_id() * share,
                    last = first + share < c.rows ? first + share : c.rows;
  // the items (row, chunk) counted forward: a 64-bit division of the item number by
  // a run-time chunk count cost a hundred-odd instructions an item
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
  // a row's inputs found once, at the first of its chunks: one cursor for the loads
  // asked for, one for the arithmetic, kStreamStages - 1 items behind
  struct Cursor {
    std::size_t request = 0, row = ~std::size_t(0);
    std::int64_t j = -1;
    Input in[2] = {};
  };
  const auto locate = [&](Cursor& at, std::size_t row) {
    if (row == at.row) return;
    at.row = row;
    request_of(at.request, row);
    const RequestMeta q = requests[at.request];
    at.j = row_number(q, row, 2);
    if (at.j >= 0)
      for (int t = 0; t < 2; ++t) at.in[t] = input_of(q, 2 * at.j + t, c.projected, c.ring, g);
  };
  Cursor ask, use;
  if (first < last)
    ask.request = use.request = find_request(
        requests, n, first, [](const RequestMeta& m) { return m.row_offset; }, in_parameters);
  Item asked{first, 0};
  // the rows' values are read once: under the evict-first policy up to the size the
  // host names (kPrefillEvictFirstElements), the normal one past it
  const unsigned long long policy = EvictFirst ? evict_first_policy() : 0;
  const auto fetch = [&](float4& to, const float* from) {
    const unsigned at = unsigned(__cvta_generic_to_shared(&to));
    if constexpr (EvictFirst)
      fetch_evict_first(at, from, policy);
    else
      fetch_plain(at, from);
  };
  const auto ask_next = [&](unsigned u) {  // the next item's loads into stage u, then a commit
    const Item at = asked;
    advance(asked);
    if (at.row < last) {
      locate(ask, at.row);
      const unsigned d = 4 * lane + 128 * at.chunk;
      if (ask.j >= 0 && d < D)
        for (int t = 0; t < 2; ++t) {
          fetch(stage[u][2 * t][slot], ask.in[t].at + d);
          fetch(stage[u][2 * t + 1][slot], ask.in[t].at + D + d);
        }
    }
    __pipeline_commit();  // empty past the end: the waits below count every stage
  };
  for (unsigned k = 0; k + 1 < kStreamStages; ++k) ask_next(k);
  between();
  unsigned u = 0, refill = kStreamStages - 1;  // this item's stage, and the one asked for now
  for (Item at{first, 0}; at.row < last;
       advance(at), u = next_stage(u), refill = next_stage(refill)) {
    ask_next(refill);
    locate(use, at.row);
    if (at.chunk == 0 && lane == 0) {
      c.row_index[at.row] = std::int32_t(use.j);
      c.positions[at.row] = use.j < 0 ? 0 : std::int32_t(2 * use.j);
    }
    __pipeline_wait_prior(kStreamStages - 1);  // this item's copies landed
    std::uint16_t* out = c.out + at.row * D;
    const unsigned d = 4 * lane + 128 * at.chunk;
    if (d < D && use.j < 0) *reinterpret_cast<uint2*>(out + d) = make_uint2(0, 0);
    if (d < D && use.j >= 0) {
      const float4 scores[2] = {stage[u][0][slot], stage[u][2][slot]},
                   latents[2] = {stage[u][1][slot], stage[u][3][slot]};
      channel_quad<2>(scores, latents, use.in, d, D, c.refusal, out);
    }
  }
}

// The ring writes that waited for the verdict, a warp a (request, i): the pending
// input's entry b + i (i < s - b, b = r floor(s/r)) takes the one position of the
// chunk's last min(S, tokens) congruent to b + i mod S, if there is one, found
// directly (testing each of the last S positions a piece at a time is a chain of
// 64-bit divisions a warp: 7.8 us at 64 x 512 on the H200).
__device__ void keep_waiting_positions(const Launch& c, const RequestMeta* requests,
                                       std::size_t n) {
  const Geometry& g = c.g;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t per_request = std::size_t(g.ratio - 1);
  const auto S = std::int64_t(g.ring);
  for (std::size_t item = warp_id(); item < n * per_request; item += warp_count()) {
    const RequestMeta q = requests[item / per_request];
    const std::int64_t i = std::int64_t(item % per_request), b = q.start / g.ratio * g.ratio;
    if (i >= q.start - b) continue;
    const std::int64_t last = q.start + q.tokens, first = last - (q.tokens < S ? q.tokens : S);
    const std::int64_t p = first + ((b + i - first) % S + S) % S;
    if (p >= last) continue;
    const std::size_t from = std::size_t(q.token_offset + (p - q.start)) * g.width;
    copy_checked<8, true>(c.projected + from, c.ring + entry_of(q, p, g), g.width, from, c.refusal,
                          lane, c.vector);
  }
  wait_for_previous_kernel();  // every warp: the kernel ends after the rows' kernel
}

// Prefill, one pass: every output row (row index, position, bf16 channels) and the
// chunk's last S positions into the ring, all but those landing on a pending input.
// At r = 2 a warp copies its ring pieces once its first row items are asked for,
// their loads under those (copied after its rows, they added a trip to memory to
// the warp's end).
template <int R, bool EvictFirst = false>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kRowBlocksPerSm)
    prefill_rows(const __grid_constant__ Launch c, const __grid_constant__ Requests table) {
  wait_for_previous_kernel();  // a dependent of the table's upload, if any
  // the second kernel's blocks take the SMs this kernel's leave, and load under its tail
  if (c.pending_inputs) let_next_kernel_start();
  const RequestMeta* requests = table.table();
  const std::size_t n = table.count;
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t r = R > 0 ? R : c.g.ratio;  // a constant where the template gives it
  if constexpr (R == 2) {
    __shared__ Stages stage;
    stream_pairs<EvictFirst>(c, requests, n, table.in_memory == nullptr, stage,
                             [&] { keep_last_positions(c, requests, n); });
  } else {
    for_each_item(
        requests, n, table.in_memory == nullptr, c.rows,
        [](const RequestMeta& m) { return m.row_offset; },
        [&](const RequestMeta& q, std::size_t row) {
          const std::int64_t j = row_number(q, row, r);
          if (lane == 0) {
            c.row_index[row] = std::int32_t(j);
            c.positions[row] = j < 0 ? 0 : std::int32_t(j * r);
          }
          std::uint16_t* out = c.out + row * c.g.dim;
          if (j < 0) {
            for (unsigned d = lane; d < c.g.dim; d += 32) out[d] = 0;
          } else {
            group_row<R>(q, j, c.projected, c.ring, c.g, c.refusal, out, lane, nullptr);
          }
        });
    keep_last_positions(c, requests, n);
  }
}

// Prefill's second kernel, a programmatic dependent of the first, which lets it start
// at once: on a clean word, the ring writes that land on a pending input (at most
// r - 1 a request). Its loads, of `projected` (which the first kernel only reads), go
// before its wait; the verdict and the writes after it (32 x 512 from an odd start
// 25.2-25.5 us in a graph against 26.2-26.3 with its loads after the wait: H200,
// docs/performance.md).
__global__ void keep_deferred_positions(const __grid_constant__ Launch c,
                                        const __grid_constant__ Requests table) {
  keep_waiting_positions(c, table.table(), table.count);
}

// The rows' kernel over the rows' warps, or the ring's pieces where they are more.
template <auto kernel>
cudaError_t queue_rows(const Launch& c, const Requests& table, Stream stream) {
  const std::size_t ring_items = table.count *
                                 std::min<std::size_t>(c.g.ring, std::size_t(c.most_tokens)) *
                                 ((c.g.width + 127) / 128);
  return overlapped(kernel, dim3(resident_grid<kernel>(std::max(c.rows, ring_items))),
                    int(32 * kWarpsPerBlock), 0, stream, c, table);
}
}  // namespace

cudaError_t queue_prefill(const Launch& c, const Requests& table, Stream stream) {
  cudaError_t e = cudaSuccess;
  with_ratio(c.ratio_path, [&](auto r) {
    e = r() == 2 && c.evict_first ? queue_rows<prefill_rows<2, true>>(c, table, stream)
                                  : queue_rows<prefill_rows<r()>>(c, table, stream);
  });
  // a warp a waiting write (request, i < r - 1)
  if (e == cudaSuccess && c.pending_inputs)
    e = overlapped(
        keep_deferred_positions,
        dim3(unsigned(std::min<std::size_t>(
            (table.count * std::size_t(c.g.ratio - 1) + kWarpsPerBlock - 1) / kWarpsPerBlock, 64))),
        int(32 * kWarpsPerBlock), 0, stream, c, table);
  return e;
}

}  // namespace aether::cuda::compress_kernels
