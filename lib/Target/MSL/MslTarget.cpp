//===- MslTarget.cpp - the metal target: MSL from Kiln's SPIR-V -----------===//

#include "lib/Target/MSL/MslTarget.h"
#include "kiln/Compiler/Target.h"

#include "kiln/Errors.h"
#include "kiln/runtime/DeviceName.h"

#include <spirv_cross/spirv_cross_c.h>

using namespace kiln;

const rt::AdapterInfo &kiln::metalProfile() {
  return findTargetProfile(TargetApi::metal, "apple")->gpu;
}

namespace {
/// Owns a SPIRV-Cross context (and everything made from it).
struct Context {
  spvc_context ctx = nullptr;
  Context() {
    if (spvc_context_create(&ctx) != SPVC_SUCCESS)
      throw CompileError("SPIRV-Cross: cannot create a context");
  }
  ~Context() { spvc_context_destroy(ctx); }
  [[noreturn]] void fail(const char *what) const {
    throw CompileError(std::string("SPIRV-Cross: ") + what + ": " +
                       spvc_context_get_last_error_string(ctx));
  }
};
} // namespace

rt::MslCode kiln::translateToMsl(const rt::SpirvCode &code) {
  Context c;
  spvc_parsed_ir ir = nullptr;
  if (spvc_context_parse_spirv(c.ctx, code.words.data(), code.words.size(), &ir) != SPVC_SUCCESS)
    c.fail("parsing a kernel");
  spvc_compiler compiler = nullptr;
  if (spvc_context_create_compiler(c.ctx, SPVC_BACKEND_MSL, ir, SPVC_CAPTURE_MODE_TAKE_OWNERSHIP,
                                   &compiler) != SPVC_SUCCESS)
    c.fail("creating the MSL compiler");
  spvc_compiler_options options = nullptr;
  if (spvc_compiler_create_compiler_options(compiler, &options) != SPVC_SUCCESS ||
      spvc_compiler_options_set_uint(options, SPVC_COMPILER_OPTION_MSL_VERSION,
                                     SPVC_MAKE_MSL_VERSION(2, 1, 0)) != SPVC_SUCCESS ||
      spvc_compiler_install_compiler_options(compiler, options) != SPVC_SUCCESS)
    c.fail("setting MSL 2.1");
  // Binding b of descriptor set 0 is [[buffer(b)]]: the order the runtime
  // binds the kernel's arguments in (bindingOrder).
  for (uint32_t b = 0; b < code.bindingOrder.size(); ++b) {
    spvc_msl_resource_binding binding;
    spvc_msl_resource_binding_init(&binding);
    binding.stage = SpvExecutionModelGLCompute;
    binding.desc_set = 0;
    binding.binding = b;
    binding.msl_buffer = b;
    if (spvc_compiler_msl_add_resource_binding(compiler, &binding) != SPVC_SUCCESS)
      c.fail("mapping a buffer");
  }
  const char *source = nullptr;
  if (spvc_compiler_compile(compiler, &source) != SPVC_SUCCESS)
    c.fail("translating a kernel to MSL");
  rt::MslCode msl;
  msl.source = source;
  msl.entryPoint = spvc_compiler_get_cleansed_entry_point_name(
      compiler, code.entryPoint.c_str(), SpvExecutionModelGLCompute);
  for (unsigned i = 0; i < 3; ++i)
    msl.threadgroup[i] =
        spvc_compiler_get_execution_mode_argument_by_index(compiler, SpvExecutionModeLocalSize, i);
  msl.groups = code.groups;
  msl.bindingOrder = code.bindingOrder;
  return msl;
}

std::shared_ptr<rt::Program> kiln::toMetalProgram(const rt::Program &vulkan) {
  auto metal = std::make_shared<rt::Program>(vulkan);
  // The same devices' ordinals, on Metal ("vulkan:0" -> "metal:0").
  auto onMetal = [](const std::string &name) {
    std::optional<rt::DeviceName> parsed = rt::parseDeviceName(name);
    if (!parsed || parsed->api != rt::DeviceApi::vulkan)
      return name;
    parsed->api = rt::DeviceApi::metal;
    return parsed->str();
  };
  for (std::string &device : metal->devices)
    device = onMetal(device);
  for (rt::ProgramKernel &kernel : metal->kernels) {
    // "kernel 3 (vulkan:0)" -> "kernel 3 (metal:0)".
    if (size_t open = kernel.name.rfind('('); open != std::string::npos &&
                                              kernel.name.back() == ')')
      kernel.name = kernel.name.substr(0, open + 1) +
                    onMetal(kernel.name.substr(open + 1, kernel.name.size() - open - 2)) + ")";
    if (kernel.spirv)
      kernel.msl = std::make_shared<rt::MslCode>(translateToMsl(*kernel.spirv));
    kernel.spirv.reset();
  }
  return metal;
}
