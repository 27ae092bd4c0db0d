# The parallel mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
# parallel (impl/cpu/parallel.hpp): a share given every thread, not its part; a
# share's count left set on the calling thread after the call
mutant parallel share-given-every-thread impl/cpu/parallel.hpp \
  's|    } share(std::max<std::size_t>(1, hw / threads));|    } share(hw);|'
mutant parallel share-not-restored impl/cpu/parallel.hpp \
  's|      ~Share() { threads_of_this_share() = outer; }|      ~Share() {}|'
