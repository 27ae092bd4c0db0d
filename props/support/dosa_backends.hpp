// The CUDA DoSA backend behind host buffers (staged through device memory, out too,
// so untouched-on-refusal checks mean something), and a generated call in the
// form the CUDA scorer reads: bf16 queries, BF16 or E4M3 keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/dosa.hpp"
#include "props/support/dosa_gen.hpp"

namespace aether::props {

// A DosaCall for the tensor cores: queries cut to bf16 (their high halves, as the
// generator stores BF16 keys), F32 keys stored as BF16 the same way, BF16 and E4M3
// keys as they are. Integer-grid values stay exact; NaN and inf stay non-finite.
struct CudaDosaCall {
  std::vector<std::uint16_t> queries;  // bf16 bits
  std::vector<std::byte> key_bytes;
  KeyFormat format = KeyFormat::BF16;
  std::size_t dim = 0;
  IndexKeys stored() const { return {format, key_bytes, dim}; }
};
CudaDosaCall cuda_form(const DosaCall& call);
// Floats cut to bf16 by truncation (the bits the device takes), and the floats
// bf16 bits hold (for the model and the CPU).
std::vector<std::uint16_t> bf16_bits(std::span<const float> values);
std::vector<float> bf16_values(std::span<const std::uint16_t> bits);

#ifdef AETHER_HAVE_CUDA
Status<DosaError> cuda_dosa_topk(std::span<const std::uint16_t> queries,
                                 std::span<const float> weights, std::size_t query_count,
                                 const IndexKeys& keys, std::size_t k,
                                 std::span<const std::int32_t> seeds,
                                 std::span<const DosaPlan> plans, std::span<std::int32_t> out,
                                 const DosaOptions& options = {}, DosaStats* stats = nullptr);
Status<DosaError> cuda_dosa_bounds(std::span<const std::uint16_t> query,
                                   std::span<const float> weights, const IndexKeys& keys,
                                   const DosaPlan& plan, std::span<double> out);
// The decode path (cuda::decode_topk) on host copies of its inputs; out downloaded.
Status<DosaError> cuda_decode_topk(std::span<const float> scores,
                                   std::span<const std::int32_t> recent, std::size_t k,
                                   std::span<std::int32_t> out);
// The seeds' select kernel (cuda::dosa::select_seeds) on rows [queries, n] of
// `scores` (1 <= k <= n, every score finite): each row's tau and its top-k lanes
// ([queries, k], each row's in the kernel's order).
struct SeedSelection {
  std::vector<float> tau;
  std::vector<std::int32_t> lanes;
};
SeedSelection cuda_select_seeds(std::span<const float> scores, std::size_t queries, std::size_t k);
#endif

}  // namespace aether::props
