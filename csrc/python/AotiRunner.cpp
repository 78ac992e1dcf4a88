// AOTInductor's model runner for the mytorch device (torch._inductor.aoti_load_package on a package compiled for
// mytorch; docs/compile.md, "AOTInductor"). Registered under the device's name with torch's public
// RegisterAOTIModelRunner hook.
//
// The compiled model's runtime (torch/csrc/inductor/aoti_runtime/model_base.h, in the package's .so) parses its
// device from "cpu|cuda|xpu|mps" only, so the runner creates it as a "cpu" model: its generated kernels are C++
// over host memory, as on sim, and its buffers are allocated on the mytorch device (the wrapper names
// PrivateUse1 and the current device). Its constants cannot be loaded by that runtime (they are mytorch
// tensors), so a mytorch package is compiled without them (aot_inductor.package_constants_in_so=False) and the
// loader is handed the weights, on the device (mytorch.backend.inductor.load_package).
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include "csrc/core/Runtime.h"

namespace mytorch {
namespace {

class AOTIModelContainerRunnerMytorch : public torch::inductor::AOTIModelContainerRunner {
 public:
  AOTIModelContainerRunnerMytorch(const std::string& model_so_path, size_t num_models, const std::string& device_str,
                                  const std::string& bin_dir, bool run_single_threaded) try
      : AOTIModelContainerRunner(model_so_path, num_models, hostDevice(device_str), bin_dir, run_single_threaded) {
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "could not load this AOTInductor package on mytorch (", e.what(),
                "). A package for mytorch "
                "keeps its weights apart: compile it with mytorch.backend.inductor.aoti_compile_and_package and load "
                "it with mytorch.backend.inductor.aoti_load_package (docs/compile.md)");
  }

 protected:
  // A package without its weights would run on missing constants (a crash): it is refused until they are loaded.
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles, void* stream_handle) override {
    if (!weights_checked_) {
      const auto names = getConstantNamesToOriginalFQNs();
      const auto loaded = extract_constants_map(/*use_inactive=*/false);
      for (const auto& entry : names) {
        const std::string& fqn = entry.second;
        auto it = loaded.find(fqn);  // keyed by the original name
        TORCH_CHECK(it != loaded.end() && it->second.defined(), "this AOTInductor package for mytorch has no weight '",
                    fqn,
                    "' loaded: compile it with aot_inductor.package_constants_on_disk_format='pickle_weights' and "
                    "load it with mytorch.backend.inductor.aoti_load_package (or pass the weights to "
                    "load_constants(..., user_managed=True)); docs/compile.md");
      }
      weights_checked_ = true;
    }
    return AOTIModelContainerRunner::run_impl(input_handles, stream_handle);
  }

 private:
  bool weights_checked_ = false;

  static std::string hostDevice(const std::string& device_str) {
    TORCH_CHECK(rt::kind_name() == std::string("sim"),
                "AOTInductor packages for mytorch run on the sim runtime "
                "(C++ kernels over host memory), but this process runs the ",
                rt::kind_name(), " runtime");
    TORCH_CHECK(device_str.rfind("mytorch", 0) == 0,
                "the mytorch AOTInductor runner expected a mytorch device, "
                "but got '",
                device_str, "'");
    return "cpu";
  }
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create(const std::string& model_so_path, size_t num_models,
                                                                  const std::string& device_str,
                                                                  const std::string& bin_dir,
                                                                  const bool run_single_threaded) {
  return std::make_unique<AOTIModelContainerRunnerMytorch>(model_so_path, num_models, device_str, bin_dir,
                                                           run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner registration("mytorch", &create);

} // namespace
} // namespace mytorch
