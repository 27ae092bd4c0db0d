// Decode's kernel (impl/cuda/compress_kernels.hpp): one pass a part of the step,
// the requests in the launch's own parameters.
#include "impl/cuda/compress_kernels.hpp"

#include <algorithm>

#include "impl/cuda/compress_launch.cuh"
#include "impl/cuda/compress_rows.cuh"

namespace aether::cuda::compress_kernels {

namespace {
constexpr int kDecodeBlocksPerSm = 3;  // 80: a row's loads and its new positions' entries

// Decode, one pass: each token's output row, completed when p mod r = r - 1, its
// old inputs read from the ring and its new ones from `projected`, which the warp
// also writes into their ring entries; then the positions whose group stays pending
// into theirs. That equals the model's "write every position first, then read"
// because S >= r + qmax - 1 keeps the entries written apart from every old entry
// read (docs/compress.md). (The two loops apart: a copy beside a row's registers
// spilled both.) One launch a part of the step (DecodeRequests): the parts share
// no request, so each starts the next at once, and each ends only after the one
// before it, so the last part's end is the call's. The first part follows the
// verdict's reset, which lets it start only once every earlier kernel has
// finished: it reads at once and waits for the reset only to report (`report`).
template <int R, std::size_t N>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, kDecodeBlocksPerSm)
    decode_rows(const __grid_constant__ Launch c, const __grid_constant__ DecodeRequests<N> part) {
  if (part.before_a_part) let_next_kernel_start();
  const unsigned lane = threadIdx.x % 32;
  const Geometry& g = c.g;
  const std::int64_t r = R > 0 ? R : g.ratio;  // a constant where the template gives it
  const auto token_in_part = [&](const RequestMeta& m) {
    return std::size_t(m.token_offset) - part.first_token;
  };
  // a position whose group completes in the step goes into the ring with its row
  // (16-byte paths)
  const auto with_its_row = [&](const RequestMeta& q, std::int64_t p) {
    return R > 0 && p / r * r + r - 1 < q.start + q.tokens;
  };
  for_each_item(part, part.count, true, part.tokens(), token_in_part,
                [&](const RequestMeta& q, std::size_t x) {
                  const std::size_t token = part.first_token + x;
                  const std::int64_t p = q.start + (std::int64_t(token) - q.token_offset);
                  const std::int64_t j = p % r == r - 1 ? p / r : -1;
                  if (lane == 0) {
                    c.row_index[token] = std::int32_t(j);
                    c.positions[token] = j < 0 ? 0 : std::int32_t(j * r);
                  }
                  std::uint16_t* out = c.out + token * g.dim;
                  if (j < 0) {
                    for (unsigned d = lane; d < g.dim; d += 32) out[d] = 0;
                  } else {
                    group_row<R>(q, j, c.projected, c.ring, g, c.refusal, out, lane,
                                 R > 0 ? c.ring : nullptr);
                  }
                });
  for_each_item(part, part.count, true, part.tokens(), token_in_part,
                [&](const RequestMeta& q, std::size_t x) {
                  const std::size_t token = part.first_token + x;
                  const std::int64_t p = q.start + (std::int64_t(token) - q.token_offset);
                  if (!with_its_row(q, p))
                    copy_checked<8>(c.projected + token * g.width, c.ring + entry_of(q, p, g),
                                    g.width, token * g.width, c.refusal, lane, c.vector);
                });
  wait_for_previous_kernel();
}

static_assert(sizeof(Launch) +
                  sizeof(DecodeRequests<compress_tables::kDecodeLaunchCapacities.back()>) <=
              kKernelCarriedBytes);

// Requests [first, last) as one part, `before_a_part` if another follows.
template <std::size_t N>
cudaError_t queue_decode_part(const Launch& c, std::span<const CompressRequest> requests,
                              std::span<const std::size_t> token_offset, std::size_t first,
                              std::size_t last, std::size_t end_token, bool before_a_part,
                              Stream stream) {
  DecodeRequests<N> part;
  part.count = last - first;
  part.first_token = token_offset[first];
  part.before_a_part = before_a_part;
  for (std::size_t i = first; i < last; ++i)
    part.entry[i - first] = {requests[i].start, requests[i].state_slot,
                             std::int32_t(token_offset[i] - part.first_token)};
  part.entry[part.count] = {0, 0, std::int32_t(end_token - part.first_token)};
  cudaError_t e = cudaSuccess;
  with_ratio(c.ratio_path, [&](auto r) {
    const std::size_t tokens = end_token - part.first_token;
    e = overlapped(decode_rows<r(), N>, dim3(resident_grid<decode_rows<r(), N>>(tokens)),
                   int(32 * kWarpsPerBlock), 0, stream, c, part);
  });
  return e;
}

// The step in parts of equal request counts, each at most N requests and under 2^31
// tokens (the entries' int32 offsets; a request's own tokens are an int32).
template <std::size_t N>
cudaError_t queue_decode_parts(const Launch& c, std::span<const CompressRequest> requests,
                               std::span<const std::size_t> token_offset, Stream stream) {
  const std::size_t n = requests.size(), parts = (n + N - 1) / N;
  const auto end_of = [&](std::size_t i) { return i < n ? token_offset[i] : c.tokens; };
  for (std::size_t first = 0; first < n;) {
    std::size_t last = std::min(n, first + (n + parts - 1) / parts);
    while (last > first + 1 && end_of(last) - token_offset[first] > 0x7fffffffu) --last;
    if (cudaError_t e = queue_decode_part<N>(c, requests, token_offset, first, last, end_of(last),
                                             last < n, stream))
      return e;
    first = last;
  }
  return cudaSuccess;
}

// The step in launches of the first capacity from the I-th on that holds it.
template <std::size_t I = 0>
cudaError_t queue_decode_in(const Launch& c, std::span<const CompressRequest> requests,
                            std::span<const std::size_t> token_offset, Stream stream) {
  constexpr auto& capacities = compress_tables::kDecodeLaunchCapacities;
  if constexpr (I + 1 < capacities.size())
    if (requests.size() > capacities[I])
      return queue_decode_in<I + 1>(c, requests, token_offset, stream);
  return queue_decode_parts<capacities[I]>(c, requests, token_offset, stream);
}
}  // namespace

cudaError_t queue_decode(const Launch& c, std::span<const CompressRequest> requests,
                         std::span<const std::size_t> token_offset, Stream stream) {
  return queue_decode_in(c, requests, token_offset, stream);
}

}  // namespace aether::cuda::compress_kernels
