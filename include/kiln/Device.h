//===- Device.h - device handles of the Tensor API --------------*- C++ -*-===//
//
// A handle is resolved when it is made: every spelling ("default",
// "vulkan", "vulkan:0", KILN_DEVICE) becomes (execution API, logical
// ordinal) on this machine's adapters, and handles compare by that pair.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DEVICE_H
#define KILN_DEVICE_H

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// What runs a device's kernels.
enum class DeviceKind { cpu, vulkan, metal };

class Device {
public:
  /// KILN_DEVICE if set, else set_default_device's, else a discrete or
  /// integrated GPU, else the CPU device.
  static Device default_device();
  /// The host CPU: kernels JIT-compiled to native, vectorized, threaded code.
  static Device cpu();
  /// The Vulkan device `index`, or the preferred one when index < 0.
  static Device vulkan(int index = -1);
  /// Metal exists on Apple platforms only: elsewhere this throws DeviceError
  /// naming the devices that do exist.
  static Device metal(int index = 0);
  /// "default", "cpu", "vulkan", "vulkan:1". Throws DeviceError naming the devices
  /// that exist when the name is malformed or absent here.
  static Device parse(std::string_view name);

  /// "vulkan:0".
  std::string name() const;
  /// "vulkan", "cpu".
  const std::string &api() const { return api_; }
  DeviceKind kind() const { return kind_; }
  int index() const { return index_; }
  /// How the handle was written ("default", "vulkan", "vulkan:0").
  const std::string &written() const { return written_; }
  std::string adapter_name() const;
  /// The physical adapter (Vulkan deviceUUID; "host" for the CPU).
  std::string adapter_uuid() const;
  /// Where the adapter sits on the PCI bus, as nvidia-smi prints it
  /// ("0000:06:00.0"); empty for the CPU and where the driver does not say.
  std::string adapter_pci() const;

  /// Same execution API and logical device: the spelling does not matter.
  bool operator==(const Device &other) const {
    return kind_ == other.kind_ && index_ == other.index_;
  }
  bool operator!=(const Device &other) const { return !(*this == other); }

private:
  Device(DeviceKind kind, int index, std::string written);
  DeviceKind kind_;
  std::string api_;
  int index_;
  std::string written_;
};

/// Every device of this machine: cpu:0, then each Vulkan adapter
/// KILN_VIRTUAL_DEVICES times.
std::vector<Device> devices();

/// The default device for the rest of the process (KILN_DEVICE still wins
/// if it is set, as the environment is the user's last word).
void set_default_device(const Device &device);

} // namespace kiln

#endif // KILN_DEVICE_H
