#include "impl/cuda/dosa.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/dosa_backends.hpp"

namespace aether::props {

Status<DosaError> cuda_dosa_topk(std::span<const std::uint16_t> queries,
                                 std::span<const float> weights, std::size_t query_count,
                                 const IndexKeys& keys, std::size_t k,
                                 std::span<const std::int32_t> seeds,
                                 std::span<const DosaPlan> plans, std::span<std::int32_t> out,
                                 const DosaOptions& options, DosaStats* stats) {
  DeviceBuffer<std::uint16_t> d_queries(queries);
  DeviceBuffer<float> d_weights(weights);
  DeviceBuffer<std::byte> d_keys(keys.bytes);
  DeviceBuffer<std::int32_t> d_seeds(seeds), d_out{std::span<const std::int32_t>(out)};
  const auto status = cuda::dosa_topk(d_queries.span(), d_weights.span(), query_count,
                                      cuda::DeviceIndexKeys{keys.format, d_keys.span(), keys.dim},
                                      k, d_seeds.span(), plans, d_out.span(), options, stats);
  d_out.download(out);
  return status;
}

Status<DosaError> cuda_dosa_bounds(std::span<const std::uint16_t> query,
                                   std::span<const float> weights, const IndexKeys& keys,
                                   const DosaPlan& plan, std::span<double> out) {
  DeviceBuffer<std::uint16_t> d_query(query);
  DeviceBuffer<float> d_weights(weights);
  DeviceBuffer<std::byte> d_keys(keys.bytes);
  DeviceBuffer<double> d_out{std::span<const double>(out)};
  const auto status = cuda::dosa_bounds(d_query.span(), d_weights.span(),
                                        cuda::DeviceIndexKeys{keys.format, d_keys.span(), keys.dim},
                                        plan, d_out.span());
  d_out.download(out);
  return status;
}

Status<DosaError> cuda_decode_topk(std::span<const float> scores,
                                   std::span<const std::int32_t> recent, std::size_t k,
                                   std::span<std::int32_t> out) {
  DeviceBuffer<float> d_scores(scores);
  DeviceBuffer<std::int32_t> d_recent(recent), d_out{std::span<const std::int32_t>(out)};
  const auto status = cuda::decode_topk(d_scores.span(), d_recent.span(), k, d_out.span());
  d_out.download(out);
  return status;
}

SeedSelection cuda_select_seeds(std::span<const float> scores, std::size_t queries, std::size_t k) {
  const std::size_t n = queries ? scores.size() / queries : 0;
  SeedSelection got{std::vector<float>(queries), std::vector<std::int32_t>(queries * k, -1)};
  DeviceBuffer<float> d_scores(scores), d_tau{std::span<const float>(got.tau)};
  DeviceBuffer<std::int32_t> d_lanes{std::span<const std::int32_t>(got.lanes)};
  cuda_check(cuda::dosa::select_seeds(d_scores.span().data(), n, k, queries, d_tau.span().data(),
                                      d_lanes.span().data(), nullptr),
             "select_seeds");
  d_tau.download(got.tau);
  d_lanes.download(got.lanes);
  return got;
}

}  // namespace aether::props
