//===- Device.cpp - Abstract device and buffer of the runtime -------------===//
//
// Out-of-line virtual destructors anchor the vtables in this library.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Device.h"

namespace kiln::rt {

Buffer::~Buffer() = default;
Device::~Device() = default;

} // namespace kiln::rt
