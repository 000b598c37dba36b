//===- KilnAttrs.cpp - #kiln.device and #kiln.target ----------------------===//

#include "dialects/Kiln/KilnDialect.h"

#include "kiln/runtime/DeviceName.h"

#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace kiln;

FailureOr<DeviceAttr> kiln::parseDeviceName(MLIRContext *ctx, StringRef name) {
  std::optional<rt::DeviceName> parsed = rt::parseDeviceName(std::string_view(name));
  if (!parsed)
    return failure();
  return DeviceAttr::get(ctx, rt::deviceApiName(parsed->api), parsed->ordinal.value_or(0), "",
                         "");
}

std::string DeviceAttr::getName() const {
  return (getApi() + ":" + Twine(getOrdinal())).str();
}

TargetApi DeviceAttr::kind() const {
  // Parsed when the attribute was made: one of the APIs.
  return symbolizeTargetApi(getApi()).value_or(TargetApi::cpu);
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

TargetAttr kiln::getTarget(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto target = op->getAttrOfType<TargetAttr>(kTargetAttrName))
      return target;
  return {};
}

namespace {
/// The integer fields of #kiln.target, in the order they print.
struct TargetInts {
  int64_t subgroup = 0, workgroup = 0, shared = 0, bindings = 0, loops = 0, units = 0, ptx = 0,
          ptxShared = 0;
  int64_t groups[3] = {0, 0, 0};
  std::pair<const char *, int64_t *> fields[8] = {
      {"subgroup", &subgroup}, {"workgroup", &workgroup}, {"shared", &shared},
      {"bindings", &bindings}, {"loops", &loops},         {"units", &units},
      {"ptx", &ptx},           {"ptx_shared", &ptxShared}};
};
} // namespace

Attribute TargetAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  StringRef apiName;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&apiName))
    return {};
  std::optional<TargetApi> api = symbolizeTargetApi(apiName);
  if (!api) {
    parser.emitError(loc, "unknown target api '") << apiName << "', expected cpu, vulkan, "
                                                                "metal or cuda";
    return {};
  }
  std::string profile, cpu;
  (void)parser.parseOptionalComma();
  // An optional profile name right after the api.
  if (succeeded(parser.parseOptionalString(&profile)))
    (void)parser.parseOptionalComma();
  TargetInts ints;
  TargetFeatures features = TargetFeatures::none;
  StringRef key;
  while (succeeded(parser.parseOptionalKeyword(&key))) {
    SMLoc keyLoc = parser.getCurrentLocation();
    if (parser.parseEqual())
      return {};
    bool known = false;
    for (auto &[name, field] : ints.fields)
      if (key == name) {
        known = true;
        if (parser.parseInteger(*field))
          return {};
        if (*field < 0) {
          parser.emitError(keyLoc, "target field '") << key << "' must not be negative";
          return {};
        }
      }
    if (key == "groups") {
      known = true;
      int dim = 0;
      auto parseCount = [&]() -> ParseResult {
        SMLoc at = parser.getCurrentLocation();
        int64_t count = 0;
        if (parser.parseInteger(count))
          return failure();
        if (dim == 3 || count < 0)
          return parser.emitError(at, "groups takes three counts, x, y and z, none negative");
        ints.groups[dim++] = count;
        return success();
      };
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseCount))
        return {};
      if (dim != 3) {
        parser.emitError(keyLoc, "groups takes three counts, x, y and z");
        return {};
      }
    }
    if (key == "cpu") {
      known = true;
      if (parser.parseString(&cpu))
        return {};
    }
    if (key == "features") {
      known = true;
      auto parseOne = [&]() -> ParseResult {
        StringRef name;
        SMLoc at = parser.getCurrentLocation();
        if (parser.parseKeyword(&name))
          return failure();
        std::optional<TargetFeatures> feature = symbolizeTargetFeatures(name);
        if (!feature)
          return parser.emitError(at, "unknown target feature '")
                 << name << "', expected f16, int64, coop_f16 or coop_bf16";
        features = features | *feature;
        return success();
      };
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
        return {};
    }
    if (!known) {
      parser.emitError(keyLoc, "unknown target field '") << key << "'";
      return {};
    }
    if (failed(parser.parseOptionalComma()))
      break;
  }
  if (parser.parseGreater())
    return {};
  return TargetAttr::get(ctx, *api, profile, ints.subgroup, ints.workgroup, ints.shared,
                         ints.bindings, ints.loops, ints.units, ints.groups[0], ints.groups[1],
                         ints.groups[2], features, ints.ptx,
                         ints.ptxShared, cpu);
}

void TargetAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyTargetApi(getApi());
  if (!getProfile().empty())
    printer << ", \"" << getProfile() << "\"";
  TargetInts ints;
  ints.subgroup = getSubgroup();
  ints.workgroup = getWorkgroup();
  ints.shared = getShared();
  ints.bindings = getBindings();
  ints.loops = getLoops();
  ints.units = getUnits();
  ints.ptx = getPtx();
  ints.ptxShared = getPtxShared();
  for (auto &[name, field] : ints.fields)
    if (*field)
      printer << ", " << name << " = " << *field;
  if (getGroupsX() || getGroupsY() || getGroupsZ())
    printer << ", groups = [" << getGroupsX() << ", " << getGroupsY() << ", " << getGroupsZ()
            << "]";
  if (getFeatures() != TargetFeatures::none)
    printer << ", features = [" << stringifyTargetFeatures(getFeatures()) << "]";
  if (!getCpu().empty())
    printer << ", cpu = \"" << getCpu() << "\"";
  printer << ">";
}
