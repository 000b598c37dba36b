//===- DeviceName.h - the one grammar of device names -----------*- C++ -*-===//
//
// "cpu", "cpu:0", "vulkan", "vulkan:3", "metal", "metal:0": an API and an
// optional ordinal (up to six digits). The runtime's registry, the Tensor
// API's Device::parse and the compiler's #kiln.device all read names with
// this one parser, and pass the typed DeviceName on; what each then accepts
// (one CPU device, Vulkan's ordinals here, no Metal off Apple) is theirs to
// say. Header-only: the MLIR dialect reads names without linking the
// runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICENAME_H
#define KILN_RUNTIME_DEVICENAME_H

#include <optional>
#include <string>
#include <string_view>

namespace kiln::rt {

enum class DeviceApi { cpu, vulkan, metal };

inline const char *deviceApiName(DeviceApi api) {
  switch (api) {
  case DeviceApi::cpu: return "cpu";
  case DeviceApi::vulkan: return "vulkan";
  case DeviceApi::metal: return "metal";
  }
  return "cpu";
}

struct DeviceName {
  DeviceApi api = DeviceApi::cpu;
  /// The ordinal written, if any ("vulkan" alone: the first, or the
  /// preferred one where the caller chooses).
  std::optional<int> ordinal;
  /// "vulkan:3"; "vulkan:0" for "vulkan".
  std::string str() const {
    return std::string(deviceApiName(api)) + ":" + std::to_string(ordinal.value_or(0));
  }
};

/// The API alone ("vulkan"), or none.
inline std::optional<DeviceApi> parseDeviceApi(std::string_view text) {
  for (DeviceApi api : {DeviceApi::cpu, DeviceApi::vulkan, DeviceApi::metal})
    if (text == deviceApiName(api))
      return api;
  return std::nullopt;
}

/// The name parsed, or none when it is not of the grammar above.
inline std::optional<DeviceName> parseDeviceName(std::string_view text) {
  size_t colon = text.find(':');
  std::optional<DeviceApi> api = parseDeviceApi(text.substr(0, colon));
  if (!api)
    return std::nullopt;
  DeviceName name{*api, std::nullopt};
  if (colon == std::string_view::npos)
    return name;
  std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 6)
    return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  name.ordinal = value;
  return name;
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_DEVICENAME_H
