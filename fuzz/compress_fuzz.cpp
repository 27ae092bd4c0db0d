// Differential fuzz target for the compression state ring: bytes -> a ratio, a
// ring size (undersized now and then), a dimension, then a schedule of prefill
// chunks, decode steps and verify steps with a rejected suffix (rollback), on one
// or two requests. After every call the CPU backend must equal the model: the same
// refusal, the same ring bytes, the same row indices and positions, and rows equal
// to the exact means (scores equal per channel, small integer latents, r in
// {1, 2, 4}: the L1 grid, where the backend's arithmetic is exact).
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "fuzz/support/gmp_arena.hpp"
#include "model/compress.hpp"
#include "props/support/compress_backends.hpp"
#include "props/support/compress_gen.hpp"

namespace {

using namespace aether;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "compress_fuzz: impl differs from model: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aether::fuzz::use_gmp_arena();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider p(data, size);
  const std::int64_t ratios[3] = {1, 2, 4};
  CompressShape shape;
  shape.ratio = ratios[p.ConsumeIntegralInRange(0, 2)];
  shape.dim = p.ConsumeIntegralInRange<std::size_t>(1, 2);
  shape.ring = p.ConsumeIntegralInRange<std::size_t>(1, 10);
  shape.state_slots = p.ConsumeIntegralInRange<std::size_t>(1, 2);
  const std::size_t D = shape.dim, width = 2 * D;
  std::vector<float> scores(D);
  for (float& s : scores) s = float(p.ConsumeIntegralInRange(-8, 8)) / 4;
  const auto position = [&](std::vector<float>& out) {
    out.insert(out.end(), scores.begin(), scores.end());
    for (std::size_t d = 0; d < D; ++d) out.push_back(float(p.ConsumeIntegralInRange(-15, 15)));
  };
  std::vector<float> ring_impl(shape.state_slots * shape.ring * width, 0.0f);
  std::vector<float> ring_model = ring_impl;
  std::vector<std::int64_t> length(shape.state_slots, 0);
  static const auto backend = props::cpu_compress_backend();

  for (int op = 0; op < 8 && p.remaining_bytes() > 0; ++op) {
    const int kind = p.ConsumeIntegralInRange(0, 2);  // prefill, decode, verify
    const bool decode = kind != 0;
    std::vector<CompressRequest> requests;
    std::vector<std::size_t> accepted;
    requests.reserve(shape.state_slots);
    accepted.reserve(shape.state_slots);
    std::vector<float> projected;
    projected.reserve(shape.state_slots * (decode ? 6 : 9) * width);
    for (std::size_t slot = 0; slot < shape.state_slots; ++slot) {
      if (slot > 0 && !p.ConsumeBool()) continue;
      const std::int32_t tokens = p.ConsumeIntegralInRange<std::int32_t>(0, decode ? 6 : 9);
      requests.push_back({std::int32_t(slot), length[slot], tokens});
      for (std::int32_t t = 0; t < tokens; ++t) position(projected);
      accepted.push_back(kind == 2 ? p.ConsumeIntegralInRange<std::size_t>(0, std::size_t(tokens))
                                   : std::size_t(tokens));
    }
    std::size_t rows = 0;
    for (const auto& q : requests)
      rows += decode ? std::size_t(q.tokens)
                     : std::size_t(std::max<std::int64_t>(
                           1, (q.start + q.tokens) / shape.ratio - q.start / shape.ratio));
    std::vector<std::uint16_t> out(rows * D, 0x5a5a);
    std::vector<std::int32_t> index(rows, 77), positions(rows, 77);
    const auto got = (decode ? backend.decode : backend.prefill)(requests, projected, ring_impl,
                                                                 shape, out, index, positions);
    auto want = model::compress_batch(requests, projected, ring_model, shape, decode, out.size(),
                                      index.size(), positions.size(), model::Gate::Score);
    if (got.ok() != want.ok())
      fail(got.ok() ? "impl accepted a refused call" : "impl refused an accepted call");
    if (!want) {
      if (!(got.error() == want.error()))
        fail((std::ostringstream() << got.error() << " vs " << want.error()).str());
      if (const auto d = props::ring_report(ring_model, ring_impl, shape); !d.empty())
        fail("refusal wrote the ring:\n" + d);
      continue;
    }
    ring_model = std::move(want.value().ring);
    if (const auto d = props::ring_report(ring_model, ring_impl, shape); !d.empty())
      fail("ring bytes:\n" + d);
    for (std::size_t i = 0; i < rows; ++i) {
      const model::Row& row = want.value().rows[i];
      if (index[i] != row.row || positions[i] != row.position)
        fail("row index or position " + std::to_string(i));
      for (std::size_t d = 0; d < D; ++d)
        if (model::exact(std::bit_cast<float>(std::uint32_t(out[i * D + d]) << 16)) != row.z[d].lo)
          fail("row " + std::to_string(i) + " value");
    }
    for (std::size_t i = 0; i < requests.size(); ++i)
      length[std::size_t(requests[i].state_slot)] += std::int64_t(accepted[i]);
  }
  return 0;
}
