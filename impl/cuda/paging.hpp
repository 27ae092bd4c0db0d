// CUDA backend of logical-row -> paged-slot conversion: the CPU signature
// (impl/cpu/paging.hpp) over device memory, out may be rows itself. One pass reads
// each lane's row, valid count and table entry once and writes its slot; the
// lowest refused lane is recorded on the way, so a call refused for its data
// (RowOutsideTable, BadBlock: SPEC section 3) returns the model's error with out
// unspecified (the CPU backend is stricter: it writes nothing). Geometry and shape
// refusals are decided before any device work and leave out untouched.
// paged_slots waits once for the verdict.
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
// device data are left in *verdict (device memory the caller owns, reset by the
// call), out then unspecified. After the stream, copy *verdict to the host and read
// it with paged_slots_verdict.
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
