// Vocabulary of C1/C2 compression and its state ring (source 003 A.1-A.3, A.5):
// the batch description shared by the model and the backends, and the refusals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <variant>

#include "api/result.hpp"

namespace aether {

// One request's step: its row of the state ring, the first new position s (every
// position before s has been processed: by earlier chunks, or by verify steps whose
// accepted prefix ended there), and the number of new positions.
struct CompressRequest {
  std::int32_t state_slot = 0;
  std::int64_t start = 0;
  std::int32_t tokens = 0;
};

// ratio r (1 = C1, 2 = C2; any r >= 1 in the model), latent dimension D, ring
// entries S per state slot, state slots. The ring is [slots, S, 2, D] fp32: entry
// p mod S holds position p's score row then its latent row.
struct CompressShape {
  std::int64_t ratio = 2;
  std::size_t dim = 512;
  std::size_t ring = 7;
  std::size_t state_slots = 1;
};

// S * 2 * D * 4 bytes per state slot (7 * 2 * 512 * 4 = 28672).
constexpr std::size_t state_payload_bytes(std::size_t ring, std::size_t dim) {
  return ring * 2 * dim * 4;
}

// The smallest ring a step of at most qmax new positions needs: decode r + qmax - 1
// (the r - 1 old inputs of a pending group survive qmax new writes, docs/compress.md
// proves it and that one less fails), prefill r (a group's inputs are in the ring or
// the chunk; the chunk keeps its last S positions).
constexpr std::int64_t ring_needed(std::int64_t ratio, std::int64_t qmax, bool decode) {
  return decode ? ratio + qmax - 1 : ratio;
}
constexpr bool ring_capacity_ok(std::size_t ring, std::int64_t ratio, std::int64_t qmax) {
  return std::int64_t(ring) >= ring_needed(ratio, qmax, true);
}

#if defined(__CUDACC__)
#define AETHER_RING_HD __host__ __device__
#else
#define AETHER_RING_HD
#endif
// The float index of the entry holding position p of state slot `slot` in a ring of
// S entries of `width` = 2 D floats: entry p mod S. Positions are below 2^31 (calls
// refuse more), so the remainder is taken in 32 bits where S allows: on the GPU a
// 64-bit remainder is a hundred-odd instructions.
AETHER_RING_HD constexpr std::size_t ring_entry_offset(std::int64_t slot, std::int64_t p,
                                                       std::size_t S, std::size_t width) {
  const std::size_t within =
      S > 0x7fffffffu ? std::size_t(p) : std::size_t(std::uint32_t(p) % std::uint32_t(S));
  return (std::size_t(slot) * S + within) * width;
}
#undef AETHER_RING_HD

// Completed rows of a chunk [s, e): nc = floor(e / r) - floor(s / r).
constexpr std::int64_t completed_in_chunk(std::int64_t start, std::int64_t end,
                                          std::int64_t ratio) {
  return end / ratio - start / ratio;
}

namespace compress_error {
// r < 1, or D = 0, or a ring of no entries.
struct BadShape {
  std::int64_t ratio;
  std::size_t dim, ring;
  friend bool operator==(const BadShape&, const BadShape&) = default;
};
// A buffer of the wrong length.
struct ShapeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const ShapeMismatch&, const ShapeMismatch&) = default;
};
// A request with a state slot outside the ring, a slot another request of the batch
// also uses, a negative start or token count, or positions past INT32_MAX.
struct BadRequest {
  std::size_t request;
  friend bool operator==(const BadRequest&, const BadRequest&) = default;
};
// The ring cannot hold what the step needs: decode S < r + qmax - 1 (qmax: the
// batch's largest step), prefill S < r.
struct RingTooSmall {
  std::size_t ring;
  std::int64_t needed;
  friend bool operator==(const RingTooSmall&, const RingTooSmall&) = default;
};
// Where a non-finite value was found: the step's projected inputs, or the old ring
// entries it reads.
enum class Input { Projected, Ring };
inline std::ostream& operator<<(std::ostream& os, Input input) {
  return os << (input == Input::Projected ? "projected" : "ring");
}
// NaN or an infinity in `input` at flat index `index`.
struct NonFiniteInput {
  Input input;
  std::size_t index;
  friend bool operator==(const NonFiniteInput&, const NonFiniteInput&) = default;
};
// CUDA only: the runtime reported an error (cudaError_t value).
struct DeviceFailure {
  int code;
  friend bool operator==(const DeviceFailure&, const DeviceFailure&) = default;
};

using CompressError =
    std::variant<BadShape, ShapeMismatch, BadRequest, RingTooSmall, NonFiniteInput, DeviceFailure>;

inline std::ostream& operator<<(std::ostream& os, const CompressError& e) {
  if (auto* p = std::get_if<BadShape>(&e))
    return os << "BadShape{ratio=" << p->ratio << ", dim=" << p->dim << ", ring=" << p->ring << "}";
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<BadRequest>(&e))
    return os << "BadRequest{request=" << p->request << "}";
  if (auto* p = std::get_if<RingTooSmall>(&e))
    return os << "RingTooSmall{ring=" << p->ring << ", needed=" << p->needed << "}";
  if (auto* p = std::get_if<NonFiniteInput>(&e))
    return os << "NonFiniteInput{input=" << p->input << ", index=" << p->index << "}";
  return os << "DeviceFailure{code=" << std::get<DeviceFailure>(e).code << "}";
}
}  // namespace compress_error

using compress_error::CompressError;

}  // namespace aether
