# The dosa mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
# dosa: the threshold one rank too high, the anchored residual dropped or shrunk,
# the aggregated deduction doubled, a bound equal to tau excluded (the model's: the
# CPU's float bound exceeds the exact one by its margin, so its `>=` against `>`
# differs only where a float lands on tau), the rounding margin dropped, survivors
# scoring exactly tau dropped from the merge, a screened key named by its place in
# its chunk, a key's norm short of one partial sum, the probe's first chunk
# screened again when it joins the batch, the seeds' second round skipped (those the
# first round's K-th score does not rule out left unscored), a seed bounded exactly at
# that score left out, the plan rule's anchor ties given to the higher head
mutant dosa model-threshold-one-rank-high model/dosa.cpp \
  's|  return sorted\[k - 1\];|  return sorted[k > 1 ? k - 2 : 0];|'
mutant dosa cpu-threshold-one-rank-high impl/cpu/dosa.cpp \
  's|      q.tau = q.chosen.back().first;  // the K-th best seed score|      q.tau = q.chosen[k > 1 ? k - 2 : 0].first;|'
mutant dosa cpu-anchor-tie-to-the-higher-head impl/cpu/dosa_plan.cpp \
  's|p \* p \* best_n > best_p \* best_p \* nj|p * p * best_n >= best_p * best_p * nj|'
mutant dosa model-residual-halved model/dosa.cpp \
  's|    c += exact(weights\[a.head\]) \* upper_sqrt(norm_sq(d));|    c += exact(weights[a.head]) * upper_sqrt(norm_sq(d) / 4);|'
mutant dosa cpu-residual-dropped impl/dosa_screen.hpp \
  's|         (norm_from_squares(squares, dim) + double(more + 2)|         (0 * norm_from_squares(squares, dim) + double(more + 2)|'
mutant dosa model-deduction-doubled model/dosa.cpp \
  's|  return {p - relu(deduction), residual, norm_sq(key)};|  return {p - 2 * relu(deduction), residual, norm_sq(key)};|'
mutant dosa cpu-deduction-doubled impl/dosa_screen.hpp \
  's|  if (!plan.aggregated.empty()) out\[count++\] = -1.0f;|  if (!plan.aggregated.empty()) out[count++] = -2.0f;|'
mutant dosa model-bound-at-tau-excluded model/dosa.cpp \
  's|  return gap > 0 \&\& u.residual \* u.residual \* u.key_norm_sq < gap \* gap;|  return gap >= 0 \&\& u.residual * u.residual * u.key_norm_sq <= gap * gap;|'
mutant dosa cpu-rounding-margin-dropped impl/dosa_screen.hpp \
  's|  return {up(up(up(s.c) \* sums) + up(error)),|  return {up(up(s.c) * sums),|'
mutant dosa model-survivor-at-tau-dropped model/dosa.cpp \
  's|    if (full_score(j) >= tau) candidates.push_back(std::int32_t(j));|    if (full_score(j) > tau) candidates.push_back(std::int32_t(j));|'
mutant dosa cpu-survivor-at-tau-dropped impl/cpu/dosa.cpp \
  's|          if (scores\[i\] >= q.tau) q.chosen.emplace_back(scores\[i\], ids\[i\]);|          if (scores[i] > q.tau) q.chosen.emplace_back(scores[i], ids[i]);|'
mutant dosa model-further-anchors-unbounded model/dosa.cpp \
  's|      p += exact(weights\[a.head\]) \* exact(m.beta) \* relu(dot(q(m.anchor), key));|      (void)m;|'
mutant dosa cpu-further-anchors-not-folded impl/dosa_screen.hpp \
  's|    for (const DosaTerm\& m : a.more) folded\[m.anchor\] += double(w\[a.head\]) \* double(m.beta);||'
mutant dosa cpu-merge-ties-to-the-higher-id impl/cpu/dosa_seeds.hpp \
  's|(a.first == b.first \&\& a.second < b.second)|(a.first == b.first \&\& a.second > b.second)|'
mutant dosa cpu-cold-prior-counts-a-representative-twice impl/cpu/dosa_plan.cpp \
  's|    if (t == last) continue;||'
mutant dosa cpu-group-member-bounded-against-the-first-tau impl/cpu/dosa.cpp \
  's|, chunk_norms\[i\], scale) >= double(q.tau))|, chunk_norms[i], scale) >= double(active[0]->tau))|'
mutant dosa cpu-screened-key-named-by-its-place impl/cpu/dosa.cpp \
  's|q.survivors.push_back(ids\[i\]);|q.survivors.push_back(std::int32_t(first + i));|'
mutant dosa cpu-norm-drops-a-partial-sum impl/dosa_screen.hpp \
  's|norm_from_squares((s\[0\] + s\[1\]) + (s\[2\] + s\[3\]), v.size())|norm_from_squares((s[0] + s[1]) + s[2], v.size())|'
mutant dosa cpu-probe-screens-its-first-chunk-twice impl/cpu/dosa.cpp \
  's|if (q.paid \&\& q.screened == first) active|if (q.paid) active|'
mutant dosa cpu-seeds-second-round-skipped impl/cpu/dosa_seeds.hpp \
  's|  if (!again.empty()) score_into_chosen(again);||'
mutant dosa cpu-seed-bounded-at-t-left-out impl/cpu/dosa_seeds.hpp \
  's|bounds\[i\] >= double(t)|bounds[i] > double(t)|'
mutant dosa cpu-decode-drops-keys-at-tau impl/cpu/dosa_plan.cpp \
  's|    if (scores\[j\] >= tau) ranked.emplace_back(scores\[j\], std::int32_t(j));|    if (scores[j] > tau) ranked.emplace_back(scores[j], std::int32_t(j));|'
# the decode path's fallback (a list past a quarter of a long row) ranking the row but
# for its last key
mutant dosa cpu-decode-fallback-drops-the-last-key impl/cpu/dosa_plan.cpp \
  's|  const std::int32_t end\[\] = {std::int32_t(scores.size())};|  const std::int32_t end[] = {std::int32_t(scores.size() - 1)};|'
# the shared id check (impl/dosa_ids.hpp) letting a repeated id through
mutant dosa ids-repeat-let-through impl/dosa_ids.hpp \
  's/if (!inside(id) || (seen\[std::size_t(id) \/ 64\] \& bit(id)) != 0) break;/if (!inside(id)) break;/'
# the generator's keys at 2^20 scaled in part, so that a grid row mixes 2^20 with
# units past float's 24 bits (the L1 properties' premise broken: caught by its own
# property before any L1 property meets it by chance)
mutant dosa gen-far-keys-scaled-in-part props/support/dosa_gen.cpp \
  's|for (std::size_t i = keys / 2 \* c.dim; i < c.keys.size(); ++i)|for (std::size_t i = c.keys.size() / 2; i < c.keys.size(); ++i)|'
# dosa on CUDA (staged): the seeds' select taking the last of the ties at tau, not
# the first, and dropping the last tie it takes,
# the anchored residual dropped and the aggregated deduction doubled (the shared
# preparation, as the device computes it), the margin without the tensor cores'
# error, survivors scoring exactly tau dropped, ties merged toward the higher id
cuda_mutant dosa cuda-seed-ties-to-the-higher-lane impl/cuda/dosa_threshold.cu \
  's|__popc(ballot \& ((1u << lane) - 1))|__popc(ballot >> lane) - 1|'
cuda_mutant dosa cuda-seed-select-drops-the-last-tie impl/cuda/dosa_threshold.cu \
  's|    if (tie \&\& order < taken) lanes|    if (tie \&\& order + 1 < taken) lanes|'
cuda_mutant dosa cuda-residual-dropped impl/cuda/dosa_prepare.cu \
  's|          dosa_screen::anchor_share(w\[a.head\], s, dim|          0 * dosa_screen::anchor_share(w[a.head], s, dim|'
cuda_mutant dosa cuda-deduction-doubled impl/dosa_screen.hpp \
  's|  if (!plan.aggregated.empty()) out\[count++\] = -1.0f;|  if (!plan.aggregated.empty()) out[count++] = -2.0f;|'
cuda_mutant dosa cuda-margin-without-tensor-core-error impl/cuda/dosa_prepare.cu \
  's|  return 48 \* ((dim + 15) / 16) + heads + 2;|  return 0 * (dim + heads);|'
cuda_mutant dosa cuda-survivor-at-tau-dropped impl/cuda/dosa_merge.cu \
  's|  return score >= c.tau\[t\];|  return score > c.tau[t];|'
cuda_mutant dosa cuda-ties-merged-to-the-higher-id impl/cuda/dosa_merge.cu \
  's|((1u << id_bits) - 1 - std::uint32_t(id))|std::uint32_t(id)|'
# decode on CUDA: keys scoring exactly tau left unlisted, tau one rank too high
cuda_mutant dosa cuda-decode-lists-above-tau-only impl/cuda/dosa_decode.cu \
  's|    const bool keep = j < n \&\& scores\[j\] >= least;|    const bool keep = j < n \&\& scores[j] > least;|'
cuda_mutant dosa cuda-decode-tau-one-rank-high impl/cuda/dosa_decode.cu \
  's|      AETHER_TRY(select_seeds(gathered, r, k, 1, tau, nullptr, stream));|      AETHER_TRY(select_seeds(gathered, r, k > 1 ? k - 1 : 1, 1, tau, nullptr, stream));|'
# decode on CUDA: a repeated recent id let through, a bad id's refusal coded as a
# score's, the ranking written despite a refusal
cuda_mutant dosa cuda-decode-repeated-id-let-through impl/cuda/dosa_decode.cu \
  's|    if (inside \&\& first\[id\] < i) atomicMin|    if (inside \&\& first[id] < 0u) atomicMin|'
cuda_mutant dosa cuda-decode-bad-id-coded-as-a-score impl/cuda/dosa_decode.cu \
  's|      atomicMin(verdict, kBadId \| i);|      atomicMin(verdict, i);|'
cuda_mutant dosa cuda-decode-ranks-despite-a-refusal impl/cuda/dosa_merge.cu \
  's|  if (verdict->refusal != kNoRefusal \|\| n > kMergeCapacity) return;|  if (n > kMergeCapacity) return;|'
# the radix select (the seeds' tau, the merge's K-th) counting keys of other
# prefixes, and the merge keeping only the candidates above its K-th
cuda_mutant dosa cuda-select-counts-other-prefixes impl/cuda/radix_select.cuh \
  's|      if ((key \& high) == want) atomicAdd|      if ((key \& high) >= want) atomicAdd|'
cuda_mutant dosa cuda-merge-drops-the-kth impl/cuda/dosa_merge.cu \
  's|    ids\[i\] = keys\[i\] >= least ?|    ids[i] = keys[i] > least ?|'
# the gates the wrong way round (a fallback ranks stale rows; a pruned batch merges
# unscored seeds)
cuda_mutant dosa cuda-gate-inverted impl/cuda/gate.cuh \
  's|  return gate.low <= v \&\& v <= gate.high;|  return !(gate.low <= v \&\& v <= gate.high);|'
# too few seeds refused before the plans the probe did not need are checked (a bad
# plan then goes unnamed)
cuda_mutant dosa cuda-too-few-seeds-before-later-plans impl/cuda/dosa.cu \
  's|return after_plans(de::TooFewSeeds{seed_count, k});|return de::TooFewSeeds{seed_count, k};|'
# the bound test's finds written without their block's place in the list (every
# block's over the first block's)
cuda_mutant dosa cuda-screen-block-place-dropped impl/cuda/dosa_kernels.cu \
  's|(t0 + i) \* stride + block_base\[i\] + warp_base|(t0 + i) * stride + warp_base|'
# the scorer's grouped scores (DoSA's screens, four to a scorer query) all stored as
# each query's first
cuda_mutant dosa cuda-grouped-scores-not-counted impl/cuda/indexer_scores.cu \
  's|      flush(total, t \* scores_per_query + i);|      flush(total, t * scores_per_query);|'
