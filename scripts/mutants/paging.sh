# The paging mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
# paging: offset, valid count, table bound, negative blocks and the slot bound; the masked conversion refusing, its table bound
mutant paging cpu-offset-plus-one impl/cpu/paging.cpp \
  's|slot = block \* bc + j % bc;|slot = block * bc + j % bc + 1;|'
mutant paging cpu-valid-count-inclusive impl/cpu/paging.cpp \
  's|if (i < valid \&\& j >= 0|if (i <= valid \&\& j >= 0|'
mutant paging model-table-bound model/paging.cpp \
  's|std::uint64_t(j / bc) >= table.size())|std::uint64_t(j / bc) > table.size())|'
mutant paging model-masked-refuses model/paging.cpp \
  's|      else if (!masked)$|      else|'
mutant paging cpu-negative-blocks-fit impl/cpu/paging.cpp \
  's|  return block >= 0 \&\& block <= |  return block <= |'
mutant paging cpu-slot-bound-off-by-one impl/cpu/paging.cpp \
  's|(std::numeric_limits<std::int32_t>::max() - offset) / bc;|(std::numeric_limits<std::int32_t>::max() - offset) / bc + 1;|'
mutant paging cpu-masked-table-bound impl/cpu/paging.cpp \
  's|std::uint64_t(j / bc) < blocks_per_request) {|std::uint64_t(j / bc) <= blocks_per_request) {|'

mutant paging cpu-output-length-checked-first impl/cpu/paging.cpp \
  's|^  if (ratio <= 0 \|\| block_tokens <= 0 \|\| block_tokens % ratio != 0)$|  if (out_size != lanes) return pe::ShapeMismatch{lanes, out_size};\n&|'
mutant paging cpu-table-checked-before-lanes impl/cpu/paging.cpp \
  's|^  if (lanes != requests \* k) return pe::ShapeMismatch{requests \* k, lanes};|  if (table_size != requests * blocks_per_request) return pe::ShapeMismatch{requests * blocks_per_request, table_size};\n&|'

cuda_mutant paging cuda-refusal-not-recorded impl/cuda/paging.cu \
  's|    atomicMin(refusal, lowest);||'
cuda_mutant paging cuda-refused-lane-written-as-minus-one impl/cuda/paging_lanes.cuh \
  's|                       : KeepRefused \&\& taken \&\& !good ? j\[base + u\]\[e\]|                       : false ? j[base + u][e]|'
cuda_mutant paging cuda-pass-skips-a-block impl/cuda/paging.cu \
  's|  for (int u = 0; u < kQuads; ++u) load_quad<Vector>(rows, quad_of(blockIdx.x, u), g.lanes, j\[u\]);|  for (int u = 0; u < kQuads; ++u) load_quad<Vector>(rows, quad_of(blockIdx.x \| 1, u), g.lanes, j[u]);|'
cuda_mutant paging cuda-pass-skips-its-last-quad impl/cuda/paging.cu \
  's|  for (int u = 0; u < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j\[u\]);|  for (int u = 0; u + 1 < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j[u]);|'
cuda_mutant paging cuda-wide-slot-bound-off-by-one impl/cuda/paging_lanes.cuh \
  's|  if (block < 0 \|\| block > (kMaxSlot - offset) / g.bc) {|  if (block < 0 \|\| block > (kMaxSlot - offset) / g.bc + 1) {|'
cuda_mutant paging cuda-row-at-the-table-end-taken impl/cuda/paging.cu \
  's|std::min<std::uint64_t>(blocks_per_request \* bc, kRowLimit)|std::min<std::uint64_t>(blocks_per_request * bc + 1, kRowLimit)|'
cuda_mutant paging cuda-divisor-rounds-down impl/cuda/paging_lanes.cuh \
  's|((std::uint64_t(1) << l) - d) / d + 1);|((std::uint64_t(1) << l) - d) / d);|'
cuda_mutant paging cuda-quad-lanes-swapped impl/cuda/paging.cu \
  's|j\[0\] = v.x, j\[1\] = v.y|j[0] = v.y, j[1] = v.x|'
