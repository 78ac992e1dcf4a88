// Python bindings of the process group: mytorch._C._distributed.ProcessGroupMytorch, a subclass of torch's
// c10d Backend binding (so torch.distributed can register it), created by python/mytorch/distributed/__init__.py.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "csrc/distributed/Paths.h"
#include "csrc/distributed/ProcessGroupMytorch.hpp"
#include "csrc/distributed/SymmetricMemory.h"
#include "mytorch/comm.h"

namespace py = pybind11;

namespace mytorch::dist {

// Called after torch.distributed is imported: pybind11 must already know c10d::Backend.
void initDistributedBindings(py::module& parent) {
  withoutGil() = [](const std::function<void()>& f) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release release;
      f();
    } else {
      f();
    }
  };
  auto m = parent.def_submodule("_distributed", "mytorch's c10d process group");
  py::module::import("torch.distributed");
  py::class_<ProcessGroupMytorch, c10d::Backend, c10::intrusive_ptr<ProcessGroupMytorch>>(m, "ProcessGroupMytorch")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const c10::intrusive_ptr<c10d::Backend>& host,
                       const std::string& groupName) {
             return c10::make_intrusive<ProcessGroupMytorch>(store, rank, size, timeout, host, groupName);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("host"),
           py::arg("group_name"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("checking", &ProcessGroupMytorch::checking)
      .def_property_readonly("uses_nccl", &ProcessGroupMytorch::usesNccl)
      .def_property_readonly("uses_symmetric_memory", &ProcessGroupMytorch::usesSymmetricMemory)
      // torch.distributed's split_group deep-copies `options` (None: the backend's own, getBackendOptions).
      .def_property_readonly("options", [](const ProcessGroupMytorch&) { return py::none(); })
      // new_group on a rank outside the new group, when the default group is bound to a device: its part of
      // the parent's ncclCommSplit (python/mytorch/distributed/__init__.py splits the members' side).
      .def(
          "perform_nocolor_split",
          [](ProcessGroupMytorch& pg, const c10::Device&) { (void)pg.split(nullptr, {}, nullptr); },
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_split_members",
          [](ProcessGroupMytorch& pg, const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
             std::chrono::milliseconds timeout, const std::string& name) {
            auto o = c10::make_intrusive<c10d::Backend::Options>("mytorch", timeout);
            o->group_name = name;
            return c10::static_intrusive_pointer_cast<ProcessGroupMytorch>(pg.split(store, ranks, o));
          },
          py::call_guard<py::gil_scoped_release>());
  m.def("nccl_version", [] { return comm::version(); });
  m.def("_quiesce_watchdogs_for_exit", [] { quiesceWatchdogsForExit(); }, py::call_guard<py::gil_scoped_release>());
  registerSymmetricMemoryAllocator();
}

} // namespace mytorch::dist
