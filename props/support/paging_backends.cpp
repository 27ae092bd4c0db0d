#include "props/support/paging_backends.hpp"

#include "impl/cpu/paging.hpp"
#include "model/paging.hpp"
#include "props/support/model_adapter.hpp"
#include "props/support/property.hpp"

namespace aether::props {

namespace {
// A model conversion behind the impl signature: its result written into out.
template <class Convert>
auto model_into(Convert convert) {
  return
      [convert](auto rows, auto k, auto counts, auto tables, auto per, auto b, auto r, auto out) {
        return write_into(convert(rows, k, counts, tables, per, b, r), out,
                          [](std::size_t expected, std::size_t actual) {
                            return PagingError{paging_error::ShapeMismatch{expected, actual}};
                          });
      };
}
}  // namespace

PagingBackend model_paging_backend() {
  return {"model", model_into([](auto... a) { return model::paged_slots(a...); }),
          model_into([](auto... a) { return model::paged_slots_masked(a...); })};
}

PagingBackend cpu_paging_backend() {
  return {"cpu", [](auto... a) { return cpu::paged_slots(a...); },
          [](auto... a) { return cpu::paged_slots_masked(a...); }};
}

std::vector<PagingBackend> all_paging_backends() {
  std::vector<PagingBackend> backends{model_paging_backend(), cpu_paging_backend()};
#ifdef AETHER_HAVE_CUDA
  if (gpu_present()) {
    backends.push_back(cuda_paging_backend());
    backends.push_back(cuda_queued_paging_backend());
  }
#endif
  return backends;
}

}  // namespace aether::props
