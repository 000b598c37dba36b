//===- Npy.cpp - NumPy .npy files, read and written -----------------------===//

#include "kiln/runtime/Npy.h"

#include "FileIO.h"

#include <cstdint>
#include <cstring>

using namespace kiln::rt;

namespace {
constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
/// Far more than any header NumPy writes; a file claiming more is corrupt.
constexpr size_t kMaxHeader = 1 << 20;

Status bad(const std::string &what, const std::string &problem) {
  return Status::invalidArgument(what + ": " + problem);
}

/// The value of `key` in the header dict, as written: "'<f4'", "False",
/// "(2, 3)".
bool field(const std::string &header, const std::string &key, std::string &value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return false;
  at = header.find(':', at);
  if (at == std::string::npos)
    return false;
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  size_t end = at;
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos)
      return false;
    ++end;
  } else if (at < header.size() && (header[at] == '\'' || header[at] == '"')) {
    end = header.find(header[at], at + 1);
    if (end == std::string::npos)
      return false;
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}')
      ++end;
  }
  value = header.substr(at, end - at);
  while (!value.empty() && value.back() == ' ')
    value.pop_back();
  return true;
}

bool elementOf(const std::string &descr, ElementType &element) {
  if (descr == "'<f4'" || descr == "\"<f4\"")
    element = ElementType::f32;
  else if (descr == "'<f2'" || descr == "\"<f2\"")
    element = ElementType::f16;
  else if (descr == "'<i4'" || descr == "\"<i4\"")
    element = ElementType::i32;
  else if (descr == "'|b1'" || descr == "\"|b1\"")
    element = ElementType::i1;
  else if (descr == "'<u2'" || descr == "\"<u2\"")
    element = ElementType::bf16; // numpy has no bfloat16: its bits as uint16

  else
    return false;
  return true;
}

const char *descrOf(ElementType element) {
  switch (element) {
  case ElementType::f32: return "<f4";
  case ElementType::f16: return "<f2";
  case ElementType::i32: return "<i4";
  case ElementType::i1: return "|b1";
  case ElementType::bf16: return "<u2";
  }
  return "<f4";
}

/// "(2, 3)", "(5,)", "()": the dimensions, each checked, their product
/// checked against overflow.
bool parseShape(const std::string &text, std::vector<int64_t> &shape, std::string &problem) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    problem = "the shape " + text + " is not a tuple";
    return false;
  }
  std::string inner = text.substr(1, text.size() - 2);
  size_t at = 0;
  uint64_t total = 1;
  while (at < inner.size()) {
    while (at < inner.size() && (inner[at] == ' ' || inner[at] == ','))
      ++at;
    if (at >= inner.size())
      break;
    size_t end = at;
    while (end < inner.size() && inner[end] >= '0' && inner[end] <= '9')
      ++end;
    if (end == at || end - at > 15) {
      problem = "the shape " + text + " has a dimension that is not a size";
      return false;
    }
    int64_t d = std::stoll(inner.substr(at, end - at));
    if (d && __builtin_mul_overflow(total, static_cast<uint64_t>(d), &total)) {
      problem = "the shape " + text + " has too many elements";
      return false;
    }
    shape.push_back(d);
    at = end;
  }
  if (total > (uint64_t(1) << 40)) {
    problem = "the shape " + text + " has too many elements";
    return false;
  }
  return true;
}
} // namespace

StatusOr<NpyArray> kiln::rt::parseNpy(const uint8_t *bytes, size_t size, const std::string &what) {
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0)
    return bad(what, "not a .npy file (no \\x93NUMPY magic at the start)");
  uint8_t major = bytes[6];
  size_t headerSize = 0, headerAt = 0;
  if (major == 1) {
    headerSize = bytes[8] | (size_t(bytes[9]) << 8);
    headerAt = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return bad(what, "the file ends inside its header");
    headerSize = bytes[8] | (size_t(bytes[9]) << 8) | (size_t(bytes[10]) << 16) |
                 (size_t(bytes[11]) << 24);
    headerAt = 12;
  } else {
    return bad(what, ".npy format version " + std::to_string(major) +
                         " is not supported (1, 2 and 3 are)");
  }
  if (headerSize > kMaxHeader || headerAt + headerSize > size)
    return bad(what, "the header claims " + std::to_string(headerSize) +
                         " bytes, more than the file holds");
  std::string header(reinterpret_cast<const char *>(bytes + headerAt), headerSize);
  std::string descr, order, shapeText;
  if (!field(header, "descr", descr) || !field(header, "fortran_order", order) ||
      !field(header, "shape", shapeText))
    return bad(what, "the header lacks 'descr', 'fortran_order' or 'shape': " + header);
  NpyArray array;
  // int64 (NumPy's and PyTorch's default integers: token ids) is read as
  // the int32 Kiln computes integers in, each value checked to fit.
  bool wide = descr == "'<i8'" || descr == "\"<i8\"";
  if (wide)
    array.type.element = ElementType::i32;
  else if (!elementOf(descr, array.type.element))
    return bad(what, "dtype " + descr +
                         " is not supported: save it as float32 ('<f4'), float16 ('<f2'), "
                         "int32 ('<i4'), int64 ('<i8'), bool ('|b1') or bfloat16 as its "
                         "uint16 bits ('<u2'), little-endian");
  if (order != "False")
    return bad(what, "the array is in Fortran order: save it in C order "
                     "(numpy.ascontiguousarray)");
  std::string problem;
  if (!parseShape(shapeText, array.type.shape, problem))
    return bad(what, problem);
  uint64_t dataBytes = array.type.bytes() * (wide ? 2 : 1);
  size_t dataAt = headerAt + headerSize;
  if (size - dataAt != dataBytes)
    return bad(what, "shape " + shapeText + " of " +
                         (wide ? std::string("int64") : elementTypeName(array.type.element)) +
                         " needs " + std::to_string(dataBytes) + " bytes of data, the file has " +
                         std::to_string(size - dataAt));
  if (!wide) {
    array.data.assign(bytes + dataAt, bytes + size);
    return array;
  }
  array.data.resize(size_t(dataBytes / 2));
  for (size_t i = 0; i < array.data.size() / 4; ++i) {
    int64_t v;
    std::memcpy(&v, bytes + dataAt + 8 * i, 8);
    if (v < INT32_MIN || v > INT32_MAX)
      return bad(what, "int64 element " + std::to_string(i) + " holds " + std::to_string(v) +
                           ", outside the int32 that Kiln computes integers in");
    int32_t narrow = int32_t(v);
    std::memcpy(&array.data[4 * i], &narrow, 4);
  }
  return array;
}

StatusOr<NpyArray> kiln::rt::readNpy(const std::string &path) {
  StatusOr<std::vector<uint8_t>> bytes = readFile(path);
  if (!bytes.isOk())
    return bytes.status();
  return parseNpy(bytes->data(), bytes->size(), path);
}

std::vector<uint8_t> kiln::rt::formatNpy(const NpyArray &array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.type.shape.size(); ++i)
    shape += std::to_string(array.type.shape[i]) + (array.type.shape.size() == 1 ? "," : "") +
             (i + 1 < array.type.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descrOf(array.type.element) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with spaces and a newline so the data starts 64-byte aligned.
  bool wide = header.size() + 11 > 65535;
  size_t prefix = wide ? 12 : 10;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(wide ? 2 : 1);
  out.push_back(0);
  size_t n = header.size();
  out.push_back(uint8_t(n & 0xFF));
  out.push_back(uint8_t((n >> 8) & 0xFF));
  if (wide) {
    out.push_back(uint8_t((n >> 16) & 0xFF));
    out.push_back(uint8_t((n >> 24) & 0xFF));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

Status kiln::rt::writeNpy(const std::string &path, const NpyArray &array) {
  return writeFile(path, formatNpy(array));
}

Status kiln::rt::writeNpyFiles(const std::vector<std::pair<std::string, NpyArray>> &files) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> bytes;
  for (const auto &[path, array] : files)
    bytes.push_back({path, formatNpy(array)});
  return writeFiles(bytes);
}
