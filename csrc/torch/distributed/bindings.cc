// Python bindings of tpu_dist: torch_pjrt._C._new_process_group_tpu, which
// torch_pjrt/distributed.py registers with torch.distributed.
#include <torch/csrc/utils/pybind.h>

#include "torch/distributed/process_group.h"

namespace torch_pjrt::glue::distributed {

void bind(pybind11::module& m) {
  namespace py = pybind11;
  // The result reaches Python as a torch.distributed Backend; `host` is the
  // ProcessGroupGloo that torch built for the group.
  m.def(
      "_new_process_group_tpu",
      [](c10::intrusive_ptr<c10d::Backend> host, int rank, int size) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<ProcessGroupTpu>(std::move(host), rank, size);
      },
      py::arg("host"), py::arg("rank"), py::arg("size"));
}

}  // namespace torch_pjrt::glue::distributed
