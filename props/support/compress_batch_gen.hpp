// The compression batch calls of the agreement checks and properties: random
// prefill and decode calls on random rings, refusals among them.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <ostream>
#include <vector>

#include "api/compress.hpp"
#include "props/support/compress_gen.hpp"

namespace aether::props {

// A random batch call (prefill or decode) on a random ring: a few requests (now and
// then a duplicate or out-of-range slot, a negative start), NaN now and then in
// the inputs or the ring, now and then a wrong output length or an undersized ring;
// in a third of the calls several of these at once.
struct BatchCall {
  CompressShape shape;
  bool decode = false;
  std::vector<CompressRequest> requests;
  std::vector<float> projected, ring;
  std::size_t rows = 0;  // output rows the caller provides (usually the right count)
  std::size_t index_rows = 0, position_rows = 0;  // lengths of row_index and positions
};
void showValue(const BatchCall& call, std::ostream& os);
// `grid`: equal scores per channel and small integer latents (L1), r in {1, 2, 4}.
rc::Gen<BatchCall> gen_batch_call(bool grid);

}  // namespace aether::props
