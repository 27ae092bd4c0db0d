# The sharing mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
# sharing: refinement checked the wrong way round, a source's ownership not
# required, the YOCO boundary ignored, a setting left out of the match, a shared
# object counted once per reader
mutant sharing model-refinement-reversed model/sharing.cpp \
  's|      if (coarse\[std::size_t(fine\[l\])\] != coarse\[l\])|      if (fine[std::size_t(coarse[l])] != fine[l])|'
mutant sharing cpu-refinement-reversed impl/cpu/sharing.cpp \
  's|      if (coarse\[std::size_t(maps.maps\[m\]\[l\])\] != coarse\[l\])|      if (maps.maps[m][std::size_t(coarse[l])] != maps.maps[m][l])|'
mutant sharing model-owner-not-required model/sharing.cpp \
  's|      if (map\[std::size_t(s)\] != s) return|      if (false) return|'
mutant sharing model-yoco-ignored model/sharing.cpp \
  's|    if (s < boundary) return|    if (s < 0) return|'
mutant sharing cpu-kv-dim-not-matched impl/cpu/sharing.cpp \
  's|s.ratio, s.block_size, s.kv_dim},|s.ratio, s.block_size, 0},|'
mutant sharing cpu-shared-object-counted-per-reader impl/cpu/sharing.cpp \
  's|      if (maps.maps\[m\]\[l\] == std::int32_t(l)) {|      if (maps.maps[m][l] >= 0) {|'
