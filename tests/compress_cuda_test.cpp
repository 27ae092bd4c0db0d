// CUDA compression against the CPU backend (GPU only; each skips without a device),
// every body run in each launch mode: waiting, queued, captured in a CUDA graph
// (props/support/compress_steps.hpp). The contract checked is docs/compress.md's:
// accepted steps equal the CPU bit for bit; a step refused for its data names the
// model's first non-finite input and changes the ring only where the model allows.
// The lab's examples and the refusals on every backend: tests/compress_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "props/support/property.hpp"
#ifdef AETHER_HAVE_CUDA
#include "props/support/compress_gen.hpp"
#include "props/support/compress_steps.hpp"
#endif

namespace aether {
namespace {

#ifdef AETHER_HAVE_CUDA
using props::Mode;
namespace ce = compress_error;

class CompressCuda : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  }
  // The step on the CPU and on the device in this test's mode, checked.
  void expect_the_cpu_s(const props::Step& step, const std::string& what) {
    props::expect_agree(props::on_cpu(step), props::on_gpu(step, GetParam()), step,
                        what + ", " + props::mode_name(GetParam()));
  }
};

// Every kernel path: prefill and a decode step of 6 at D 512 and r = 1 and 2
// (registers, the next 128 or 256 channels loaded during the current ones; prefill
// at 2 streams through shared memory), r = 4 (registers) and r = 3 (a channel at a
// time), and r = 2 at D 1024 (eight streamed chunks a row); 16 requests each from
// starts that read old positions from the ring.
TEST_P(CompressCuda, every_kernel_path_at_d_512_and_1024_equals_the_cpu) {
  std::minstd_rand rng(29);
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  for (const auto& [r, dim] :
       {std::pair<std::int64_t, std::size_t>{1, 512}, {2, 512}, {2, 1024}, {3, 512}, {4, 512}})
    for (const bool decode : {false, true}) {
      const std::int32_t tokens = decode ? 6 : 64;
      std::vector<CompressRequest> requests;
      for (std::int32_t i = 0; i < 16; ++i) requests.push_back({15 - i, 1001 + i, tokens - i % 2});
      const auto step =
          props::make_step(requests, {r, dim, std::size_t(ring_needed(r, 6, true)), 16}, decode,
                           [&] { return uniform(rng); });
      expect_the_cpu_s(step, (decode ? "decode at r " : "prefill at r ") + std::to_string(r) +
                                 ", D " + std::to_string(dim));
    }
}

// A call's requests reach its kernels by their count (docs/compress.md). A
// prefill's table: in the kernels' parameters (up to 64 requests), stored by
// kernels carrying it in pieces of 4, 8, 16 or 32000 bytes' worth (up to 128, 256,
// 512 and 1000), else in two or more pieces of 32000 bytes (a captured call's side
// by side); a prefill at each length and one past it. A decode step's: in its launches' own
// parameters, a decode at each launch capacity and one past it, and one of three
// parts.
TEST_P(CompressCuda, every_table_length_equals_the_cpu) {
  namespace tables = cuda::compress_tables;
  std::mt19937 rng(41);
  std::normal_distribution<float> normal;
  const auto expect_at = [&](std::size_t count, bool decode) {
    std::vector<CompressRequest> requests;
    for (std::size_t i = 0; i < count; ++i)  // slots reversed, starts and lengths varied
      requests.push_back(
          {std::int32_t(count - 1 - i), std::int64_t(i % 5), std::int32_t(1 + i % 4)});
    const auto step =
        props::make_step(requests, {2, 4, 7, count}, decode, [&] { return normal(rng); });
    expect_the_cpu_s(step, std::string(decode ? "decode" : "prefill") + " of " +
                               std::to_string(count) + " requests");
  };
  for (const std::size_t count :
       {tables::kPrefillRequestsInParameters, tables::kPrefillRequestsInParameters + 1,
        std::size_t(128), std::size_t(129), std::size_t(256), std::size_t(257), std::size_t(512),
        std::size_t(513), std::size_t(1000), std::size_t(1001), std::size_t(1500)})
    expect_at(count, false);
  for (const std::size_t capacity : tables::kDecodeLaunchCapacities) {
    expect_at(capacity, true);
    expect_at(capacity + 1, true);
  }
  expect_at(2 * tables::kDecodeLaunchCapacities.back() + 1, true);
}

// A prefill whose first request starts on a group's boundary (no pending input)
// and whose every second one starts inside a group, its chunk's last positions
// wrapping onto its pending input's entry (start 1001, entry of 1000 = that of
// 1014): the second kernel is queued for the later requests' sake.
TEST_P(CompressCuda, a_prefill_with_pending_inputs_past_its_first_request_equals_the_cpu) {
  std::vector<CompressRequest> requests;
  for (std::int32_t i = 0; i < 8; ++i) requests.push_back({i, 1000 + i % 2, 16});
  std::mt19937 rng(53);
  std::normal_distribution<float> normal;
  expect_the_cpu_s(props::make_step(requests, {2, 8, 7, 8}, false, [&] { return normal(rng); }),
                   "starts 1000 and 1001 alternating");
}

// A decode in three parts (equal request counts, docs/compress.md) whose first two
// and last two requests each have no tokens, and whose middle part has none at all:
// a part that starts or ends on empty requests, and a launch with nothing to do
// between two that write, equal the CPU.
TEST_P(CompressCuda, a_decode_in_parts_with_empty_requests_equals_the_cpu) {
  const std::size_t count = 2 * cuda::compress_tables::kDecodeLaunchCapacities.back() + 1;
  const std::size_t per = (count + 2) / 3;  // each part's requests
  std::vector<CompressRequest> requests;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t from_edge = std::min(i % per, per - 1 - i % per);
    const bool empty = i / per == 1 || from_edge < 2;
    requests.push_back(
        {std::int32_t(i), std::int64_t(1001 + i % 3), empty ? 0 : std::int32_t(1 + i % 6)});
  }
  std::mt19937 rng(47);
  std::normal_distribution<float> normal;
  expect_the_cpu_s(props::make_step(requests, {2, 4, 7, count}, true, [&] { return normal(rng); }),
                   "three parts, the middle one empty");
}

// Prefill at serving sizes, D 512, r 2, ring 7: 64 requests x 512 tokens from an odd
// start (16384 rows; each chunk's last positions wrap onto the entry of its pending
// input, position 0, which a refused call must keep) and 72 x 1024 (36864 rows, 288
// MiB in), requests of three lengths. Then NaN in the last row's input (a latent's
// last channel, then a score's lane 2 of its 16-byte group: the index names that
// lane) and among a request's pending positions (which no row reads), each with an
// inf after it that is not the one named. The two sizes lie on either side of the
// size past which prefill's fetches leave the evict-first policy.
static_assert(16384 * 512 <= cuda::kPrefillEvictFirstElements &&
              36864 * 512 > cuda::kPrefillEvictFirstElements);
TEST_P(CompressCuda, large_prefills_equal_the_cpu_and_name_the_first_non_finite_input) {
  for (const std::size_t count : {64, 72}) {
    const std::int32_t tokens = count == 64 ? 512 : 1024;
    const std::int64_t start = count == 64 ? 1 : 0;
    std::vector<CompressRequest> requests;
    for (std::size_t i = 0; i < count; ++i)
      requests.push_back({std::int32_t(i), start, tokens - std::int32_t(i % 3)});
    std::minstd_rand rng(23);
    std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
    const auto step =
        props::make_step(requests, {2, 512, 7, count}, false, [&] { return uniform(rng); });
    const std::string size = std::to_string(count) + " x " + std::to_string(tokens);
    expect_the_cpu_s(step, size);
    const std::size_t width = 1024, all = step.projected.size() / width;
    const std::size_t last_pair = all - std::size_t(requests.back().tokens) +
                                  std::size_t((start + requests.back().tokens) / 2 * 2 - 1 - start);
    // a chunk that ends odd: request 0 of the first size (1 + 512), request 1 of the
    // second (0 + 1023)
    const std::size_t pending =
        count == 64 ? std::size_t(tokens) : std::size_t(tokens + tokens - 1);
    for (const std::size_t bad :
         {last_pair * width + width - 1, last_pair * width + 6, (pending - 1) * width + 3}) {
      auto poisoned = step;
      poisoned.projected[bad] = NAN;
      if (bad + 1 < poisoned.projected.size()) poisoned.projected[bad + 1] = INFINITY;
      const auto cpu = props::on_cpu(poisoned);
      ASSERT_EQ(cpu.status, (Status<CompressError>(ce::NonFiniteInput{ce::Input::Projected, bad})));
      props::expect_agree(cpu, props::on_gpu(poisoned, GetParam()), poisoned,
                          size + ", NaN at " + std::to_string(bad));
    }
  }
}

// A decode in two launches (210 requests past one launch's parts): clean it equals
// the CPU; a non-finite old entry of a late request (in the second launch) is
// refused and named, and with a non-finite value in `projected` as well that one is
// named (the model's order: every projected index before every ring index).
TEST_P(CompressCuda, a_decode_of_many_requests_names_the_first_non_finite_input) {
  const std::size_t count = cuda::compress_tables::kDecodeLaunchCapacities.back() + 210, width = 8;
  std::vector<CompressRequest> requests;
  for (std::size_t i = 0; i < count; ++i)
    requests.push_back(
        {std::int32_t(count - 1 - i), std::int64_t(1001 + i % 4), std::int32_t(1 + i % 6)});
  std::mt19937 rng(43);
  std::normal_distribution<float> normal;
  const auto step = props::make_step(requests, {2, 4, 7, count}, true, [&] { return normal(rng); });
  // an even request starts at 1001 or 1003 (odd) and completes a row: it reads the
  // position before its start
  const CompressRequest& late = requests[count - 2 - count % 2];
  ASSERT_EQ(late.start % 2, 1);
  const std::size_t old_entry = ring_entry_offset(late.state_slot, late.start - 1, 7, width) + 3;
  const std::size_t bad_input = step.projected.size() - 2 * width + 6;
  for (const bool poison_input : {false, true}) {
    expect_the_cpu_s(step, "clean");
    auto poisoned = step;
    poisoned.ring[old_entry] = INFINITY;
    if (poison_input) poisoned.projected[bad_input] = NAN;
    const auto cpu = props::on_cpu(poisoned);
    ASSERT_EQ(
        cpu.status,
        (Status<CompressError>(poison_input ? ce::NonFiniteInput{ce::Input::Projected, bad_input}
                                            : ce::NonFiniteInput{ce::Input::Ring, old_entry})));
    props::expect_agree(cpu, props::on_gpu(poisoned, GetParam()), poisoned,
                        poison_input ? "inf in the ring, NaN in projected" : "inf in the ring");
  }
}

// A prefill captured once and replayed four times, its inputs reloaded before each
// replay and holding a NaN in the second and fourth: each replay refuses exactly
// when its own inputs hold one (the verdict is reset in the graph) and names it,
// and a clean replay, after the refused one, equals the CPU.
TEST(CompressCudaGraph, each_replay_refuses_by_its_own_inputs) {
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  std::mt19937 rng(37);
  std::normal_distribution<float> normal;
  const std::vector<CompressRequest> requests{{0, 1, 4}, {1, 0, 5}};
  auto step = props::make_step(requests, {2, 8, 7, 2}, false, [&] { return normal(rng); });
  props::DeviceStep device(step);
  props::Graph graph([&](cudaStream_t stream) { return device.queue(stream); });
  ASSERT_TRUE(graph.ok());
  for (int replay = 0; replay < 4; ++replay) {
    for (float& x : step.projected) x = normal(rng);
    if (replay % 2 == 1) step.projected[3 * 16 + 5] = NAN;  // request 0's position 4, a score
    device.upload(step);
    props::run_two_uploading_calls(graph.stream());
    ASSERT_TRUE(graph.replay());
    const auto cpu = props::on_cpu(step);
    EXPECT_EQ(cpu.status.ok(), replay % 2 == 0);
    props::expect_agree(cpu, device.download(step), step, "replay " + std::to_string(replay));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLaunch, CompressCuda,
                         ::testing::Values(Mode::Waiting, Mode::Queued, Mode::Captured),
                         [](const auto& info) { return props::mode_name(info.param); });

// Queued calls back to back on one stream, no wait between them (each prefill's
// table in scratch memory of its own): three prefill chunks and two decode steps
// over 100 requests on one ring, each into its own outputs, equal to the same calls
// on the CPU. Then the same calls captured in one graph
// behind a memset node and replayed: each call's reset follows a kernel of the
// call before it, or the memset, and must wait for it.
TEST(CompressCudaQueue, calls_back_to_back_equal_the_cpu) {
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CompressShape shape{2, 64, 7, 100};
  struct Call {
    bool decode;
    std::int64_t start;
    std::int32_t tokens;
  };
  const Call calls[] = {{false, 0, 5}, {false, 5, 4}, {false, 9, 7}, {true, 16, 3}, {true, 19, 3}};
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  std::vector<props::Step> want;
  std::vector<float> ring0;  // the first call's ring, as given
  for (const Call& call : calls) {
    std::vector<CompressRequest> requests;
    for (std::int32_t slot = 0; slot < 100; ++slot)
      requests.push_back({slot, call.start, call.tokens});
    auto step = props::make_step(requests, shape, call.decode, [&] { return normal(rng); });
    if (want.empty())
      ring0 = step.ring;
    else
      step.ring = want.back().ring;  // the ring the previous call left
    want.push_back(props::on_cpu(step));
    ASSERT_TRUE(want.back().status.ok());
  }
  for (const bool captured : {false, true}) {
    const std::string mode = captured ? "captured" : "queued";
    props::DeviceBuffer<float> ring{std::span<const float>(ring0)};
    props::DeviceBuffer<cuda::DeviceVerdict> verdicts{
        std::vector<cuda::DeviceVerdict>(std::size(calls))};
    std::vector<std::unique_ptr<props::DeviceBuffer<float>>> inputs;
    std::vector<std::unique_ptr<props::DeviceBuffer<std::uint16_t>>> rows;
    std::vector<std::unique_ptr<props::DeviceBuffer<std::int32_t>>> index, positions;
    for (const props::Step& w : want) {
      inputs.push_back(
          std::make_unique<props::DeviceBuffer<float>>(std::span<const float>(w.projected)));
      rows.push_back(std::make_unique<props::DeviceBuffer<std::uint16_t>>(
          std::vector<std::uint16_t>(w.rows.size())));
      index.push_back(std::make_unique<props::DeviceBuffer<std::int32_t>>(
          std::vector<std::int32_t>(w.index.size())));
      positions.push_back(std::make_unique<props::DeviceBuffer<std::int32_t>>(
          std::vector<std::int32_t>(w.positions.size())));
    }
    const auto queue_all = [&](cudaStream_t stream) {
      for (std::size_t c = 0; c < want.size(); ++c) {
        const props::Step& w = want[c];
        const auto queue =
            w.decode ? cuda::enqueue_compress_decode : cuda::enqueue_compress_prefill;
        if (!queue(w.requests, inputs[c]->span(), ring.span(), shape, rows[c]->span(),
                   index[c]->span(), positions[c]->span(), verdicts.span().data() + c, stream)
                 .ok())
          return false;
      }
      return true;
    };
    if (captured) {
      props::Graph graph([&](cudaStream_t stream) {
        return cudaMemsetAsync(rows[0]->span().data(), 0, 2, stream) == cudaSuccess &&
               queue_all(stream);
      });
      ASSERT_TRUE(graph.ok());
      ASSERT_TRUE(graph.replay());
    } else {
      ASSERT_TRUE(queue_all(nullptr));
    }
    std::vector<cuda::DeviceVerdict> verdict(std::size(calls));
    verdicts.download(verdict);
    std::vector<float> ring_back(want.back().ring.size());
    ring.download(ring_back);
    EXPECT_EQ(props::ring_report(want.back().ring, ring_back, shape), "") << mode;
    for (std::size_t c = 0; c < want.size(); ++c) {
      EXPECT_TRUE(cuda::compress_verdict(verdict[c]).ok()) << mode << ", call " << c;
      std::vector<std::uint16_t> got(want[c].rows.size());
      rows[c]->download(got);
      EXPECT_TRUE(got == want[c].rows) << mode << ", call " << c;
    }
  }
}

#endif  // AETHER_HAVE_CUDA

}  // namespace
}  // namespace aether
