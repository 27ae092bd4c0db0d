// The heads' noise levels that both DoSA benchmarks' break-even sweeps step through
// (parallel heads, pruning forced on): from an exact single anchor (noise 0, under
// 0.3% survivors) to nearly every key surviving, at L 32768 and at 131072 (a longer
// context keeps fewer of its keys at the same noise). Shared, so that both backends
// time the same workloads.
#pragma once

namespace aether::bench {

inline constexpr float kBreakevenNoise[] = {0.0f,   0.002f, 0.005f, 0.01f, 0.02f,
                                            0.025f, 0.03f,  0.05f,  0.1f};

}  // namespace aether::bench
