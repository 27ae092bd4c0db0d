// CUDA backend of logical-row -> paged-slot conversion: the CPU signature
// (impl/cpu/paging.hpp) over device memory, out may be rows itself. Refusals
// depend on device data, so every lane is checked before any is written: in one
// cooperative kernel with a grid-wide barrier when the call's lanes fit in the
// registers of one resident grid, else a first kernel finds the lowest bad lane
// and the converting kernel writes only if there is none (it reads the verdict
// itself). paged_slots waits once, returns the model's error and writes nothing on
// a refusal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/paging.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

Status<PagingError> paged_slots(device_span<const std::int32_t> rows, std::size_t k,
                                device_span<const std::int32_t> valid_counts,
                                device_span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, device_span<std::int32_t> out,
                                Stream stream = nullptr);

// The same conversion queued on `stream` without waiting, for callers that keep
// the host off the critical path (a serving loop, a CUDA graph: it only launches
// work). Geometry and shape refusals return at once; refusals that depend on the
// device data are left in *verdict (device memory the caller owns), with nothing
// written to out. After the stream, copy *verdict to the host and read it with
// paged_slots_verdict.
Status<PagingError> enqueue_paged_slots(device_span<const std::int32_t> rows, std::size_t k,
                                        device_span<const std::int32_t> valid_counts,
                                        device_span<const std::int32_t> block_tables,
                                        std::size_t blocks_per_request, std::int64_t block_tokens,
                                        std::int64_t ratio, device_span<std::int32_t> out,
                                        DeviceVerdict* verdict, Stream stream = nullptr);
Status<PagingError> paged_slots_verdict(const DeviceVerdict& verdict);

// model::paged_slots_masked over device memory (out may be rows): a lane the
// conversion above would refuse reads -1, so nothing depends on a verdict and each
// lane is written as it is converted, one kernel, one read of the rows and tables.
// Geometry and shape refusals only, returned before anything is queued. The
// enqueue_ form only queues the kernel; paged_slots_masked also waits for `stream`.
Status<PagingError> enqueue_paged_slots_masked(device_span<const std::int32_t> rows, std::size_t k,
                                               device_span<const std::int32_t> valid_counts,
                                               device_span<const std::int32_t> block_tables,
                                               std::size_t blocks_per_request,
                                               std::int64_t block_tokens, std::int64_t ratio,
                                               device_span<std::int32_t> out,
                                               Stream stream = nullptr);
Status<PagingError> paged_slots_masked(device_span<const std::int32_t> rows, std::size_t k,
                                       device_span<const std::int32_t> valid_counts,
                                       device_span<const std::int32_t> block_tables,
                                       std::size_t blocks_per_request, std::int64_t block_tokens,
                                       std::int64_t ratio, device_span<std::int32_t> out,
                                       Stream stream = nullptr);

}  // namespace aether::cuda
