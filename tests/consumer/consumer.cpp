// The installed package as a user calls it: the model as the oracle for the CPU
// backend (and the CUDA backend when a GPU is visible) on source 000's merge
// example, through public includes alone.
#include <aether/witness.hpp>

#include <cstdio>
#include <vector>

int main() {
  const std::vector<std::int32_t> learned{0, 5, 9, -1}, lens{16};
  const std::vector<std::int32_t> want{0, 5, 12, -1};
  const auto model = aether::model::apply_topology_witnesses(learned, 4, lens, 2, 4, 2);
  if (!model.ok() || model.value() != want) {
    std::printf("consumer: the model disagrees with the hand example\n");
    return 1;
  }
  std::vector<std::int32_t> out(4, -7);
  if (!aether::cpu::apply_topology_witnesses(learned, 4, lens, 2, 4, 2, out) || out != want) {
    std::printf("consumer: the CPU backend disagrees with the model\n");
    return 1;
  }
  std::printf("consumer: model and CPU backend give [0, 5, 12, -1]\n");
#if defined(AETHER_HAVE_CUDA)
  const auto devices = aether::cuda::device_count();
  if (!devices.ok()) {
    std::printf("consumer: CUDA unusable (driver too old or runtime failure)\n");
    return 1;
  }
  if (devices.value() == 0) {
    std::printf("consumer: no GPU visible, CUDA backend not run\n");
    return 0;
  }
  const aether::cuda::DeviceBuffer<std::int32_t> d_learned{learned}, d_lens{lens}, d_out{out};
  if (!d_learned.status() || !d_lens.status() || !d_out.status()) return 1;
  std::vector<std::int32_t> got(4);
  if (!aether::cuda::apply_topology_witnesses(d_learned.span(), 4, d_lens.span(), 2, 4, 2,
                                              d_out.span()) ||
      !d_out.download(got) || got != want) {
    std::printf("consumer: the CUDA backend disagrees with the model\n");
    return 1;
  }
  std::printf("consumer: the CUDA backend agrees\n");
#endif
  return 0;
}
