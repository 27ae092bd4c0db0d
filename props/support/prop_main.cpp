// main() of every property binary: 10,000 cases per property unless RC_PARAMS
// says otherwise, and replay lines that name this binary.
#include <cstdlib>

#include "props/support/property.hpp"

int main(int argc, char** argv) {
  // Before RapidCheck first reads its configuration.
  setenv("RC_PARAMS", "max_success=10000", /*overwrite=*/0);
  aether::props::set_program_path(argv[0]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
