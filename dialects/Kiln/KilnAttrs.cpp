//===- KilnAttrs.cpp - #kiln.device ---------------------------------------===//

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace kiln;

FailureOr<DeviceAttr> kiln::parseDeviceName(MLIRContext *ctx, StringRef name) {
  auto [api, ordinalText] = name.split(':');
  if (api != "vulkan" && api != "cpu" && api != "metal")
    return failure();
  int64_t ordinal = 0;
  if (!ordinalText.empty() &&
      (ordinalText.getAsInteger(10, ordinal) || ordinal < 0))
    return failure();
  return DeviceAttr::get(ctx, api, ordinal, "", "");
}

std::string DeviceAttr::getName() const {
  return (getApi() + ":" + Twine(getOrdinal())).str();
}

bool DeviceAttr::isSameDevice(DeviceAttr other) const {
  return other && getApi() == other.getApi() &&
         getOrdinal() == other.getOrdinal();
}

Attribute DeviceAttr::parse(AsmParser &parser, Type) {
  std::string name;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseString(&name))
    return {};
  FailureOr<DeviceAttr> base = parseDeviceName(parser.getContext(), name);
  if (failed(base)) {
    parser.emitError(loc, "expected a device such as \"vulkan:0\" or \"cpu\", "
                          "got \"")
        << name << "\"";
    return {};
  }
  std::string adapter, written;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc keyLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    std::string *field = key == "adapter" ? &adapter
                         : key == "written" ? &written
                                            : nullptr;
    if (!field) {
      parser.emitError(keyLoc, "unknown device field '")
          << key << "', expected 'adapter' or 'written'";
      return {};
    }
    if (parser.parseString(field))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return DeviceAttr::get(parser.getContext(), base->getApi(),
                         base->getOrdinal(), adapter, written);
}

void DeviceAttr::print(AsmPrinter &printer) const {
  printer << "<\"" << getName() << "\"";
  if (!getAdapter().empty())
    printer << ", adapter = \"" << getAdapter() << "\"";
  if (!getWritten().empty())
    printer << ", written = \"" << getWritten() << "\"";
  printer << ">";
}
