// Uses the installed package as a user would: the model as an oracle for "their"
// kernel (here the CPU backend), through the shared comparison helper.
#include <cstdio>

#include "impl/cpu/witness.hpp"
#include "model/witness.hpp"
#include "props/support/compare.hpp"

int main() {
  const std::vector<std::int32_t> learned{0, 5, 9, -1}, lens{16};
  std::vector<std::int32_t> out(4, -7);
  const auto want = aether::model::apply_topology_witnesses(learned, 4, lens, 2, 4, 2);
  const auto got = aether::cpu::apply_topology_witnesses(learned, 4, lens, 2, 4, 2, out);
  const std::vector<std::int32_t> before(4, -7);
  const std::string report =
      aether::props::differential_report<std::int32_t>(want, got, before, out, "cpu");
  if (!report.empty()) {
    std::printf("consumer: %s\n", report.c_str());
    return 1;
  }
  std::printf("consumer: installed aether agrees with its model ([0, 5, 12, -1])\n");
  return 0;
}
