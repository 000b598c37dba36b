//===- VulkanContext.cpp - Instance, adapters and logical devices ---------===//
//
// A context owns one VkInstance (with the validation layer and a messenger
// when asked), the adapter list, and the logical devices it creates on
// demand. get()'s context is a function-local static: created once, thread-
// safely, and destroyed at exit (devices whose buffers are still alive are
// leaked then rather than destroyed under them; see DeviceState.cpp).
//
// Threading: device() locks the context mutex; the rest is immutable after
// creation. The messenger callback may run on any thread and only touches
// an atomic counter and stderr.
//
//===----------------------------------------------------------------------===//

#include "AdapterInfo.h"
#include "CooperativeMatrix.h"
#include "CudaInterop.h"
#include "DeviceState.h"
#include "VulkanUtil.h"

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace kiln::rt {

static constexpr const char *kValidationLayer = "VK_LAYER_KHRONOS_validation";
static constexpr size_t kMaxVirtualDevices = 64;

std::atomic<uint64_t> processValidationMessages{0};

struct VulkanContext::State {
  ~State();

  ContextOptions options;
  // Heap-allocated so that it can be leaked with a leaked device.
  std::unique_ptr<ContextShared> shared = std::make_unique<ContextShared>();
  uint32_t apiVersion = VK_API_VERSION_1_0;
  VkInstance instance = VK_NULL_HANDLE;
  bool validation = false;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroyMessenger = nullptr;
  std::vector<VkPhysicalDevice> physical;
  std::vector<AdapterInfo> adapters;

  std::mutex mutex;
  std::vector<std::unique_ptr<VulkanDevice>> devices; // one slot per ordinal
};

VulkanContext::State::~State() {
  devices.clear();
  // A leaked VkDevice needs its instance (and its messenger's counter).
  if (shared->deviceLeaked) {
    (void)shared.release();
    return;
  }
  if (messenger && destroyMessenger)
    destroyMessenger(instance, messenger, nullptr);
  if (instance)
    vkDestroyInstance(instance, nullptr);
}

static Status noDevice(const std::string &detail) {
  return Status::unavailable(
      "no Vulkan device found: install a Vulkan driver (on Debian: "
      "apt-get install mesa-vulkan-drivers) or set KILN_DEVICE to "
      "another device (" +
      detail + ")");
}

/// Warnings and errors only. Validation and performance findings are about
/// Kiln's use of Vulkan and are counted; general ones (the loader saying it
/// found no driver, say) are printed but not counted.
static VKAPI_ATTR VkBool32 VKAPI_CALL onDebugMessage(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity,
    VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *userData) {
  constexpr VkDebugUtilsMessageSeverityFlagsEXT reported =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  if (!(severity & reported))
    return VK_FALSE;
  const char *message =
      data && data->pMessage ? data->pMessage : "(no message)";
  if (!(types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT))) {
    std::fprintf(stderr, "kiln: vulkan: %s\n", message);
    return VK_FALSE;
  }
  ++static_cast<ContextShared *>(userData)->validationMessages;
  ++processValidationMessages;
  std::fprintf(stderr, "kiln: vulkan validation: %s\n", message);
  // Never abort the call that triggered it: the message is the report.
  return VK_FALSE;
}

static bool hasLayer(const char *name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS)
    return false;
  for (const VkLayerProperties &layer : layers)
    if (std::strcmp(layer.layerName, name) == 0)
      return true;
  return false;
}

/// Whether the loader, or `layer` if given, offers instance extension `name`.
static bool hasInstanceExtension(const char *layer, const char *name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &count, nullptr) !=
      VK_SUCCESS)
    return false;
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateInstanceExtensionProperties(layer, &count,
                                             extensions.data()) != VK_SUCCESS)
    return false;
  for (const VkExtensionProperties &extension : extensions)
    if (std::strcmp(extension.extensionName, name) == 0)
      return true;
  return false;
}

/// The newest API version up to 1.3 that the loader supports: Kiln uses
/// nothing newer, and asking for more than the loader has fails on 1.0.
static uint32_t instanceApiVersion() {
  auto enumerateVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  uint32_t loader = VK_API_VERSION_1_0;
  if (!enumerateVersion || enumerateVersion(&loader) != VK_SUCCESS)
    return VK_API_VERSION_1_0;
  if (loader >= VK_API_VERSION_1_3)
    return VK_API_VERSION_1_3;
  return VK_MAKE_API_VERSION(0, VK_API_VERSION_MAJOR(loader),
                             VK_API_VERSION_MINOR(loader), 0);
}

StatusOr<std::unique_ptr<VulkanContext>>
VulkanContext::create(const ContextOptions &options) {
  if (options.virtualDevices < 1 || options.virtualDevices > kMaxVirtualDevices)
    return Status::invalidArgument(
        "virtualDevices is " + std::to_string(options.virtualDevices) +
        ": expected 1 to " + std::to_string(kMaxVirtualDevices));
  // Vulkan's loader, opened here (volk's dlopen of libvulkan.so.1), not
  // linked: without it the machine has no Vulkan device, and the CPU runs.
  static const VkResult loader = volkInitialize();
  if (loader != VK_SUCCESS)
    return noDevice("the Vulkan loader (libvulkan.so.1) is not installed; on Debian: "
                    "apt-get install libvulkan1 and a driver (mesa-vulkan-drivers)");
  auto state = std::make_unique<State>();
  state->options = options;
  state->apiVersion = instanceApiVersion();

  std::vector<const char *> layers;
  std::vector<const char *> extensions;
  bool debugUtils = false;
  bool syncValidation = false;
  if (options.validation) {
    if (hasLayer(kValidationLayer)) {
      layers.push_back(kValidationLayer);
      state->validation = true;
      debugUtils =
          hasInstanceExtension(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
          hasInstanceExtension(kValidationLayer,
                               VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      if (debugUtils)
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      syncValidation = hasInstanceExtension(
          kValidationLayer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      if (syncValidation)
        extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    } else {
      std::fprintf(
          stderr,
          "kiln: warning: Vulkan validation was requested but %s is not "
          "installed (on Debian: apt-get install vulkan-validationlayers); "
          "continuing without validation\n",
          kValidationLayer);
    }
  }
  // Lists portability drivers (MoltenVK) too; they are real devices.
  VkInstanceCreateFlags flags = 0;
  if (hasInstanceExtension(nullptr, "VK_KHR_portability_enumeration")) {
    extensions.push_back("VK_KHR_portability_enumeration");
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  VkDebugUtilsMessengerCreateInfoEXT messengerInfo{};
  messengerInfo.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messengerInfo.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messengerInfo.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messengerInfo.pfnUserCallback = onDebugMessage;
  messengerInfo.pUserData = state->shared.get();

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = state->apiVersion;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  // Chained messenger: also reports on vkCreateInstance/vkDestroyInstance.
  const void *chain = nullptr;
  if (debugUtils) {
    messengerInfo.pNext = chain;
    chain = &messengerInfo;
  }
  // Synchronization validation checks the runtime's barriers, the part of
  // Vulkan usage most likely to be wrong yet pass on a forgiving driver.
  VkValidationFeatureEnableEXT syncFeature =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT validationFeatures{};
  validationFeatures.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  validationFeatures.enabledValidationFeatureCount = 1;
  validationFeatures.pEnabledValidationFeatures = &syncFeature;
  if (syncValidation) {
    validationFeatures.pNext = chain;
    chain = &validationFeatures;
  }
  info.pNext = chain;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (VkResult result = vkCreateInstance(&info, nullptr, &state->instance);
      result != VK_SUCCESS) {
    state->instance = VK_NULL_HANDLE;
    if (result == VK_ERROR_INCOMPATIBLE_DRIVER ||
        result == VK_ERROR_INITIALIZATION_FAILED)
      return noDevice("vkCreateInstance: " + vkResultName(result));
    return vkFailure(result, "vkCreateInstance");
  }
  // Instance and device functions through the loader's dispatch, which
  // serves every instance and device of the process.
  volkLoadInstance(state->instance);

  if (debugUtils) {
    auto createMessenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(state->instance,
                              "vkCreateDebugUtilsMessengerEXT"));
    state->destroyMessenger =
        reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(state->instance,
                                  "vkDestroyDebugUtilsMessengerEXT"));
    if (createMessenger && state->destroyMessenger)
      if (VkResult result = createMessenger(state->instance, &messengerInfo,
                                            nullptr, &state->messenger);
          result != VK_SUCCESS)
        return vkFailure(result, "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t count = 0;
  VkResult result =
      vkEnumeratePhysicalDevices(state->instance, &count, nullptr);
  if (result == VK_SUCCESS && count) {
    state->physical.resize(count);
    result = vkEnumeratePhysicalDevices(state->instance, &count,
                                        state->physical.data());
    state->physical.resize(count);
  }
  if (result != VK_SUCCESS && result != VK_INCOMPLETE)
    return noDevice("vkEnumeratePhysicalDevices: " + vkResultName(result));
  if (state->physical.empty())
    return noDevice("the Vulkan loader lists no physical device");
  {
    // Numbered in a stable order, not the loader's (adapterOrder).
    std::vector<AdapterInfo> listed;
    for (VkPhysicalDevice physical : state->physical)
      listed.push_back(describeAdapter(physical, state->apiVersion));
    std::vector<VkPhysicalDevice> physical;
    for (size_t i : adapterOrder(listed)) {
      physical.push_back(state->physical[i]);
      state->adapters.push_back(std::move(listed[i]));
    }
    state->physical = std::move(physical);
  }
  for (size_t a = 0; a < state->physical.size(); ++a) {
    VkPhysicalDevice physical = state->physical[a];
    AdapterInfo &adapter = state->adapters[a];
    uint32_t apiVersion = std::min(state->apiVersion, adapter.apiVersion);
    adapter.cooperativeMatrixF16 =
        hasF16CooperativeMatrix(state->instance, physical, apiVersion);
    // bf16 and workgroup-scope matrices build on the f16 ones.
    if (adapter.cooperativeMatrixF16) {
      adapter.cooperativeMatrixBF16 = hasBF16CooperativeMatrix(state->instance, physical);
      WorkgroupCooperativeMatrix workgroup =
          queryWorkgroupCooperativeMatrix(state->instance, physical);
      adapter.workgroupMatrixInvocations = workgroup.invocations;
      std::copy(workgroup.granularity, workgroup.granularity + 3,
                adapter.workgroupMatrixGranularity);
      adapter.workgroupMatrixMaxDimension = workgroup.maxDimension;
      adapter.workgroupMatrixReservedShared = workgroup.reservedSharedBytes;
      adapter.workgroupMatrixTensorAddressing = workgroup.tensorAddressing;
    }
    // PTX kernels through CUDA on NVIDIA GPUs that export memory to it
    // (the driver starts only when a kernel asks: cudaCapability()).
    adapter.cudaCandidate = adapter.vendorId == 0x10DE &&
                            hasDeviceExtension(physical, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) &&
                            cudaDriverLoadable();
  }
  // Linked GPUs (device groups): what a copy between them could use.
  if (state->apiVersion >= VK_API_VERSION_1_1) {
    uint32_t groups = 0;
    if (vkEnumeratePhysicalDeviceGroups(state->instance, &groups, nullptr) == VK_SUCCESS) {
      std::vector<VkPhysicalDeviceGroupProperties> list(groups);
      for (auto &g : list)
        g.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES;
      if (vkEnumeratePhysicalDeviceGroups(state->instance, &groups, list.data()) == VK_SUCCESS)
        for (uint32_t g = 0; g < groups; ++g)
          for (uint32_t d = 0; d < list[g].physicalDeviceCount; ++d)
            for (size_t a = 0; a < state->physical.size(); ++a)
              if (state->physical[a] == list[g].physicalDevices[d])
                state->adapters[a].deviceGroupSize = list[g].physicalDeviceCount;
    }
  }
  state->devices.resize(state->adapters.size() * options.virtualDevices);
  return std::unique_ptr<VulkanContext>(new VulkanContext(std::move(state)));
}

StatusOr<VulkanContext *> VulkanContext::get() {
  static StatusOr<std::unique_ptr<VulkanContext>> global =
      []() -> StatusOr<std::unique_ptr<VulkanContext>> {
    StatusOr<ContextOptions> options = ContextOptions::fromEnvironment();
    if (!options.isOk())
      return options.status();
    return create(*options);
  }();
  if (!global.isOk())
    return global.status();
  return global->get();
}

VulkanContext::VulkanContext(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

VulkanContext::~VulkanContext() = default;

const std::vector<AdapterInfo> &VulkanContext::adapters() const {
  return state_->adapters;
}

size_t VulkanContext::numDevices() const { return state_->devices.size(); }

size_t VulkanContext::virtualDevicesPerAdapter() const {
  return state_->options.virtualDevices;
}

const AdapterInfo &VulkanContext::adapterOf(size_t ordinal) const {
  assert(ordinal < numDevices() && "device ordinal out of range");
  return state_->adapters[ordinal / state_->options.virtualDevices];
}

StatusOr<VulkanDevice *> VulkanContext::device(size_t ordinal) {
  State &s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (ordinal >= s.devices.size()) {
    std::string list;
    for (size_t i = 0; i < s.devices.size(); ++i)
      list += (i ? ", vulkan:" : "vulkan:") + std::to_string(i) + " (" +
              s.adapters[i / s.options.virtualDevices].name + ")";
    return Status::notFound(
        "there is no device vulkan:" + std::to_string(ordinal) +
        "; the Vulkan devices are " + list);
  }
  if (!s.devices[ordinal]) {
    size_t adapter = ordinal / s.options.virtualDevices;
    DeviceSetup setup{s.instance,           s.apiVersion, s.physical[adapter],
                      &s.adapters[adapter], ordinal,      s.shared.get()};
    StatusOr<std::unique_ptr<VulkanDevice::State>> created =
        createDeviceState(setup);
    if (!created.isOk())
      return created.status();
    s.devices[ordinal].reset(new VulkanDevice(std::move(*created)));
  }
  return s.devices[ordinal].get();
}

std::vector<VulkanDevice *> VulkanContext::createdDevices() {
  State &s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<VulkanDevice *> created;
  for (const auto &device : s.devices)
    if (device)
      created.push_back(device.get());
  return created;
}

size_t VulkanContext::preferredOrdinal() const {
  for (AdapterInfo::Type type :
       {AdapterInfo::Type::Discrete, AdapterInfo::Type::Integrated})
    for (size_t i = 0; i < state_->adapters.size(); ++i)
      if (state_->adapters[i].type == type)
        return i * state_->options.virtualDevices;
  return 0;
}

bool VulkanContext::validationEnabled() const { return state_->validation; }

uint64_t VulkanContext::validationMessages() const {
  return state_->shared->validationMessages.load();
}

uint64_t VulkanContext::validationMessagesInProcess() {
  return processValidationMessages.load();
}

} // namespace kiln::rt
