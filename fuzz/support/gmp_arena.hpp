// GMP's limbs from free lists in the fuzz targets. The models allocate a few limbs
// for every rational they touch; under ASan each malloc records its stack, and in
// the ring fuzzer that recording would be a third of every run. GMP itself is not
// instrumented, so ASan checked nothing in those blocks; our code never touches
// limbs directly. Single-threaded, like libFuzzer's runs.
#pragma once

namespace aether::fuzz {

// Routes GMP's allocations through the free lists from now on (call once, before
// the first rational).
void use_gmp_arena();

}  // namespace aether::fuzz
