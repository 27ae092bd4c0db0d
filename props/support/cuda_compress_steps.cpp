#include <gtest/gtest.h>

#include <algorithm>

#include "impl/cpu/compress.hpp"
#include "model/compress.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/compress_steps.hpp"

namespace aether::props {

Step make_step(std::vector<CompressRequest> requests, const CompressShape& shape, bool decode,
               const std::function<float()>& draw) {
  Step s{std::move(requests), shape, decode, {}, {}, {}, {}, {}, Ok{}};
  std::size_t rows = 0, tokens = 0;
  for (const auto& q : s.requests) {
    rows += decode ? std::size_t(q.tokens)
                   : std::size_t(std::max<std::int64_t>(
                         1, completed_in_chunk(q.start, q.start + q.tokens, shape.ratio)));
    tokens += std::size_t(q.tokens);
  }
  s.projected.resize(tokens * 2 * shape.dim);
  s.ring.resize(shape.state_slots * shape.ring * 2 * shape.dim);
  for (float& x : s.projected) x = draw();
  for (float& x : s.ring) x = draw();
  s.rows.assign(rows * shape.dim, 0x5a5a);
  s.index.assign(rows, 77);
  s.positions.assign(rows, 77);
  return s;
}

Step on_cpu(Step s) {
  s.status = (s.decode ? cpu::compress_decode : cpu::compress_prefill)(
      s.requests, s.projected, s.ring, s.shape, s.rows, s.index, s.positions);
  return s;
}

DeviceStep::DeviceStep(const Step& s)
    : requests_(s.requests),
      shape_(s.shape),
      decode_(s.decode),
      in_(std::span<const float>(s.projected)),
      ring_(std::span<const float>(s.ring)),
      rows_(std::span<const std::uint16_t>(s.rows)),
      index_(std::span<const std::int32_t>(s.index)),
      positions_(std::span<const std::int32_t>(s.positions)),
      verdict_(std::vector<cuda::DeviceVerdict>(1)) {}

void DeviceStep::upload(const Step& s) {
  const auto put = [](auto& to, const auto& from) {
    cuda_check(cudaMemcpy(to.span().data(), from.data(), from.size() * sizeof from[0],
                          cudaMemcpyHostToDevice),
               "upload");
  };
  put(in_, s.projected);
  put(ring_, s.ring);
  put(rows_, s.rows);
  put(index_, s.index);
  put(positions_, s.positions);
  put(verdict_, std::vector<cuda::DeviceVerdict>(1, {0x5a5a, {0x5a5a, 0x5a5a}}));
}

Step DeviceStep::download(Step s) const {
  in_.download(s.projected);
  ring_.download(s.ring);
  rows_.download(s.rows);
  index_.download(s.index);
  positions_.download(s.positions);
  std::vector<cuda::DeviceVerdict> v(1);
  verdict_.download(v);
  s.status = cuda::compress_verdict(v[0]);
  return s;
}

Status<CompressError> DeviceStep::run(cuda::Stream stream) {
  return (decode_ ? cuda::compress_decode : cuda::compress_prefill)(
      requests_, in_.span(), ring_.span(), shape_, rows_.span(), index_.span(), positions_.span(),
      stream);
}

bool DeviceStep::queue(cuda::Stream stream) {
  return (decode_ ? cuda::enqueue_compress_decode : cuda::enqueue_compress_prefill)(
             requests_, in_.span(), ring_.span(), shape_, rows_.span(), index_.span(),
             positions_.span(), verdict_.span().data(), stream)
      .ok();
}

Step on_gpu(Step s, Mode mode) {
  DeviceStep d(s);
  if (mode == Mode::Waiting) {
    const auto status = d.run();
    s = d.download(std::move(s));
    s.status = status;
    return s;
  }
  if (mode == Mode::Queued) {
    EXPECT_TRUE(d.queue(nullptr));
    cuda_check(cudaStreamSynchronize(nullptr), "queued call");
  } else {
    Graph graph([&](cudaStream_t stream) { return d.queue(stream); });
    EXPECT_TRUE(graph.ok());
    run_two_uploading_calls(graph.stream());
    EXPECT_TRUE(graph.replay());
  }
  return d.download(std::move(s));
}

void expect_agree(const Step& cpu, const Step& gpu, const Step& given, const std::string& what) {
  EXPECT_EQ(gpu.status, cpu.status) << what;
  if (!cpu.status && std::holds_alternative<compress_error::NonFiniteInput>(cpu.status.error())) {
    EXPECT_EQ(
        ring_report(given.ring, gpu.ring, given.shape,
                    model::entries_a_refusal_may_change(given.requests, given.shape, given.decode)),
        "")
        << what << ": a data refusal changed a ring entry outside the model's set";
    return;
  }
  EXPECT_EQ(ring_report(cpu.ring, gpu.ring, cpu.shape), "") << what;
  EXPECT_TRUE(gpu.rows == cpu.rows) << what << ": rows differ";
  EXPECT_EQ(gpu.index, cpu.index) << what;
  EXPECT_EQ(gpu.positions, cpu.positions) << what;
}

void run_two_uploading_calls(cudaStream_t stream) {
  std::vector<CompressRequest> requests;
  for (std::int32_t i = 0; i < 100; ++i) requests.push_back({i, 1000 + i, 2});
  float x = 0;
  for (int call = 0; call < 2; ++call) {
    DeviceStep d(make_step(requests, {2, 4, 3, 100}, true, [&] { return x += 0.25f; }));
    EXPECT_TRUE(d.run(stream).ok());
  }
}

}  // namespace aether::props
