#include "props/support/compress_gen.hpp"

#include <bit>
#include <cmath>

namespace aether::props {

namespace gen = rc::gen;

rc::Gen<Sequence> gen_grid_sequence(std::size_t n, std::size_t dim) {
  return gen::exec([n, dim] {
    Sequence s{dim, {}};
    const auto scores = *gen::container<std::vector<float>>(dim, gen::map(gen::inRange(-40, 41), [](int x) {
      return float(x) / 4;
    }));
    for (std::size_t p = 0; p < n; ++p) {
      s.projected.insert(s.projected.end(), scores.begin(), scores.end());
      for (std::size_t d = 0; d < dim; ++d) s.projected.push_back(float(*gen::inRange(-15, 16)));
    }
    return s;
  });
}

rc::Gen<Sequence> gen_float_sequence(std::size_t n, std::size_t dim) {
  return gen::exec([n, dim] {
    Sequence s{dim, {}};
    const auto score = gen::map(gen::inRange(-30000, 30001), [](int x) { return float(x) / 1000; });
    const auto latent = gen::map(gen::tuple(gen::inRange(-20, 21), gen::arbitrary<std::uint32_t>()),
                                 [](std::tuple<int, std::uint32_t> t) {
                                   const auto [e, bits] = t;
                                   return std::ldexp(std::bit_cast<float>((bits & 0x807fffffu) | 0x3f800000u), e);
                                 });
    const bool tied = *gen::inRange(0, 8) == 0;  // now and then a group with equal scores
    for (std::size_t p = 0; p < n; ++p) {
      for (std::size_t d = 0; d < dim; ++d) s.projected.push_back(tied ? 1.5f : *score);
      for (std::size_t d = 0; d < dim; ++d) s.projected.push_back(*latent);
    }
    return s;
  });
}

rc::Gen<std::vector<std::size_t>> gen_partition(std::size_t n) {
  return gen::exec([n] {
    std::vector<std::size_t> chunks;
    std::size_t left = n;
    while (left > 0) {
      const std::size_t len = *gen::inRange<std::size_t>(0, left + 1);
      chunks.push_back(len);
      left -= len;
    }
    return chunks;
  });
}

namespace {
// One single-request call on state slot 0; completed rows into run.rows.
Status<CompressError> step(const CompressBackend& backend, const CompressShape& shape, bool decode,
                           std::int64_t start, std::span<const float> positions, ImplRun& run,
                           std::size_t keep_rows = SIZE_MAX) {
  const CompressRequest q{0, start, std::int32_t(positions.size() / (2 * shape.dim))};
  const std::int64_t r = shape.ratio;
  const std::size_t out = decode ? std::size_t(q.tokens)
                                 : std::size_t(std::max<std::int64_t>(1, (start + q.tokens) / r - start / r));
  std::vector<std::uint16_t> rows(out * shape.dim, 0x5a5a);
  std::vector<std::int32_t> index(out, 0x5a5a5a5a), position(out, 0x5a5a5a5a);
  const auto call = decode ? backend.decode : backend.prefill;
  const auto status = call(std::span(&q, 1), positions, run.ring, shape, rows, index, position);
  if (!status) return status;
  run.reserved += out;
  for (std::size_t i = 0; i < out && i < keep_rows; ++i)
    if (index[i] >= 0)
      run.rows[index[i]] = std::vector<std::uint16_t>(rows.begin() + std::ptrdiff_t(i * shape.dim),
                                                      rows.begin() + std::ptrdiff_t((i + 1) * shape.dim));
  return Ok{};
}
}  // namespace

Result<ImplRun, CompressError> run_chunks(const CompressBackend& backend, const CompressShape& shape,
                                          const Sequence& seq, std::span<const std::size_t> chunks) {
  ImplRun run;
  run.ring.assign(shape.state_slots * shape.ring * 2 * shape.dim, 0.0f);
  std::size_t start = 0;
  for (std::size_t len : chunks) {
    if (auto st = step(backend, shape, false, std::int64_t(start), seq.positions(start, len), run); !st)
      return st.error();
    start += len;
  }
  return run;
}

Result<ImplRun, CompressError> run_verify(const CompressBackend& backend, const CompressShape& shape,
                                          const Sequence& seq, std::size_t prefix,
                                          std::span<const VerifyStep> steps) {
  ImplRun run;
  run.ring.assign(shape.state_slots * shape.ring * 2 * shape.dim, 0.0f);
  if (auto st = step(backend, shape, false, 0, seq.positions(0, prefix), run); !st) return st.error();
  std::size_t start = prefix;
  for (const VerifyStep& v : steps) {
    if (auto st = step(backend, shape, true, std::int64_t(start), v.draft, run, v.accepted); !st) return st.error();
    start += v.accepted;
  }
  return run;
}

std::vector<model::Position> model_positions(const Sequence& seq) {
  std::vector<model::Position> out;
  for (std::size_t p = 0; p < seq.size(); ++p) {
    model::Position pos;
    for (std::size_t d = 0; d < seq.dim; ++d) {
      pos.gate.push_back(model::exact(seq.projected[p * 2 * seq.dim + d]));
      pos.value.push_back(model::exact(seq.projected[p * 2 * seq.dim + seq.dim + d]));
    }
    out.push_back(pos);
  }
  return out;
}

std::vector<float> ring_positions(const ImplRun& run, const CompressShape& shape, std::int64_t first,
                                  std::int64_t last) {
  std::vector<float> out;
  const std::size_t width = 2 * shape.dim;
  for (std::int64_t p = first; p < last; ++p) {
    const std::size_t at = std::size_t(p) % shape.ring * width;
    out.insert(out.end(), run.ring.begin() + std::ptrdiff_t(at), run.ring.begin() + std::ptrdiff_t(at + width));
  }
  return out;
}

}  // namespace aether::props
