// One compression step given to the CPU backend and to CUDA in each launch mode
// (props/support/cuda_launch.hpp; CUDA builds only), the captured call replayed
// after two eager calls that upload tables of their own.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/compress.hpp"
#include "impl/cuda/compress.hpp"
#include "props/support/cuda_launch.hpp"
#include "props/support/device_buffer.hpp"

namespace aether::props {

// A step's host buffers: what the call is given and, after it, what it left.
struct Step {
  std::vector<CompressRequest> requests;
  CompressShape shape;
  bool decode = false;
  std::vector<float> projected, ring;
  std::vector<std::uint16_t> rows;             // 0x5a5a before the call
  std::vector<std::int32_t> index, positions;  // 77 before the call
  Status<CompressError> status = Ok{};
};

// A step with its inputs drawn from `draw` and its outputs sized by the plan.
Step make_step(std::vector<CompressRequest> requests, const CompressShape& shape, bool decode,
               const std::function<float()>& draw);

// The step run by the CPU backend, and by CUDA in `mode`.
Step on_cpu(Step step);
Step on_gpu(Step step, Mode mode);

// Every check of a CUDA step against the CPU's (the contract, docs/compress.md): the
// same status; accepted: the same rows, indices, positions and ring; refused for its
// data: the ring the same outside model::entries_a_refusal_may_change, the outputs
// unspecified; refused otherwise: every buffer as it was.
void expect_agree(const Step& cpu, const Step& gpu, const Step& given, const std::string& what);

// A step's device buffers, for tests that queue and replay it themselves.
class DeviceStep {
 public:
  explicit DeviceStep(const Step& step);
  void upload(const Step& step);   // every buffer, the verdict reset
  Step download(Step step) const;  // outputs, ring and the queued verdict's status
  Status<CompressError> run(cuda::Stream stream = nullptr);  // the waiting call
  bool queue(cuda::Stream stream);                           // the enqueue_ call

 private:
  std::vector<CompressRequest> requests_;
  CompressShape shape_;
  bool decode_;
  props::DeviceBuffer<float> in_, ring_;
  props::DeviceBuffer<std::uint16_t> rows_;
  props::DeviceBuffer<std::int32_t> index_, positions_;
  props::DeviceBuffer<cuda::DeviceVerdict> verdict_;
};

// Two eager calls of another table (100 requests: each uploads its table into
// scratch memory): a replay after them that read anything but its own copy of its
// table would read theirs.
void run_two_uploading_calls(cudaStream_t stream);

}  // namespace aether::props
