// .npy files (kiln-run's inputs and outputs): round trips of every dtype,
// a file as NumPy writes it, and every malformed header a clear error.

#include "kiln/runtime/Npy.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace kiln::rt;

namespace {
std::vector<uint8_t> fileWithHeader(const std::string &header, size_t dataBytes,
                                    uint8_t major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  std::string padded = header;
  padded.append((64 - (10 + padded.size() + 1) % 64) % 64, ' ');
  padded += '\n';
  out.push_back(uint8_t(padded.size() & 0xFF));
  out.push_back(uint8_t(padded.size() >> 8));
  out.insert(out.end(), padded.begin(), padded.end());
  out.resize(out.size() + dataBytes, 0x3F);
  return out;
}

std::string errorOf(const std::vector<uint8_t> &bytes) {
  StatusOr<NpyArray> parsed = parseNpy(bytes.data(), bytes.size(), "x.npy");
  return parsed.isOk() ? std::string("(parsed)") : parsed.status().message();
}

TEST(Npy, EveryDtypeRoundTrips) {
  for (ElementType element : {ElementType::f32, ElementType::f16, ElementType::i32, ElementType::i1,
                              ElementType::bf16}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3}, {0, 4}, {2, 1, 3}}) {
      NpyArray array;
      array.type = {shape, element};
      array.data.resize(array.type.bytes());
      for (size_t i = 0; i < array.data.size(); ++i)
        array.data[i] = element == ElementType::i1 ? uint8_t(i % 2) : uint8_t(i * 7);
      std::vector<uint8_t> bytes = formatNpy(array);
      EXPECT_EQ((bytes.size() - array.data.size()) % 64, 0u) << "data is 64-byte aligned";
      StatusOr<NpyArray> back = parseNpy(bytes.data(), bytes.size(), "round trip");
      ASSERT_TRUE(back.isOk()) << back.status().toString();
      EXPECT_EQ(back->type.shape, shape);
      EXPECT_EQ(back->type.element, element);
      EXPECT_EQ(back->data, array.data);
    }
  }
}

// NumPy has no bfloat16: bf16 tensors are their bits as uint16.
TEST(Npy, Bfloat16IsItsBitsAsUint16) {
  StatusOr<NpyArray> parsed = parseNpy(
      fileWithHeader("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 6).data(),
      fileWithHeader("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 6).size(),
      "x.npy");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->type.element, ElementType::bf16);
  NpyArray array;
  array.type = {{1}, ElementType::bf16};
  array.data = {0x80, 0x3F}; // 1.0
  std::vector<uint8_t> bytes = formatNpy(array);
  EXPECT_NE(std::string(bytes.begin(), bytes.end()).find("'<u2'"), std::string::npos);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // numpy.save of numpy.arange(6, dtype=numpy.float32).reshape(2, 3): the
  // header exactly as NumPy 1.24 pads it.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::vector<uint8_t> bytes = fileWithHeader(header, 0);
  for (int i = 0; i < 6; ++i) {
    float v = float(i);
    uint8_t raw[4];
    std::memcpy(raw, &v, 4);
    bytes.insert(bytes.end(), raw, raw + 4);
  }
  StatusOr<NpyArray> array = parseNpy(bytes.data(), bytes.size(), "arange.npy");
  ASSERT_TRUE(array.isOk()) << array.status().toString();
  EXPECT_EQ(array->type.shape, (std::vector<int64_t>{2, 3}));
  float last;
  std::memcpy(&last, array->data.data() + 20, 4);
  EXPECT_EQ(last, 5.0f);
}

TEST(Npy, MalformedFilesAreClearErrors) {
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(errorOf(fileWithHeader(ok, 8)), "(parsed)");
  EXPECT_NE(errorOf({}).find("not a .npy file"), std::string::npos);
  EXPECT_NE(errorOf({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}).find("not a .npy file"), std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader(ok, 8, 9)).find("version 9 is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16))
                .find("dtype '<f8' is not supported: save it as float32"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8))
                .find("'>f4' is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8))
                .find("Fortran order"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader(ok, 4)).find("needs 8 bytes of data, the file has 4"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8))
                .find("not a size"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader(
                        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }",
                        8))
                .find("too many elements"),
            std::string::npos);
  EXPECT_NE(errorOf(fileWithHeader("{'descr': '<f4'}", 8)).find("lacks"), std::string::npos);
  // Truncated anywhere: an error, never a read past the end.
  std::vector<uint8_t> good = fileWithHeader(ok, 8);
  for (size_t cut = 0; cut < good.size(); ++cut) {
    std::vector<uint8_t> truncated(good.begin(), good.begin() + cut);
    EXPECT_NE(errorOf(truncated), "(parsed)") << "cut at " << cut;
  }
  // A header length past the end of the file.
  std::vector<uint8_t> lying = good;
  lying[8] = 0xFF;
  lying[9] = 0xFF;
  EXPECT_NE(errorOf(lying).find("more than the file holds"), std::string::npos);
  EXPECT_FALSE(readNpy("/nonexistent/x.npy").isOk());
}
} // namespace

// int64 (NumPy's default integers, PyTorch's token ids) is read as int32,
// every value checked to fit.
TEST(Npy, Int64IsReadAsInt32WhereItFits) {
  std::vector<uint8_t> bytes =
      fileWithHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 0);
  for (int64_t v : {int64_t(7), int64_t(-2), int64_t(INT32_MAX)})
    bytes.insert(bytes.end(), reinterpret_cast<uint8_t *>(&v), reinterpret_cast<uint8_t *>(&v) + 8);
  StatusOr<NpyArray> parsed = parseNpy(bytes.data(), bytes.size(), "ids.npy");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->type.element, ElementType::i32);
  EXPECT_EQ(parsed->type.shape, std::vector<int64_t>{3});
  int32_t values[3];
  ASSERT_EQ(parsed->data.size(), sizeof values);
  std::memcpy(values, parsed->data.data(), sizeof values);
  EXPECT_EQ(values[0], 7);
  EXPECT_EQ(values[1], -2);
  EXPECT_EQ(values[2], INT32_MAX);

  int64_t big = int64_t(1) << 40;
  std::memcpy(&bytes[bytes.size() - 8], &big, 8);
  EXPECT_EQ(errorOf(bytes), "x.npy: int64 element 2 holds 1099511627776, outside the int32 "
                            "that Kiln computes integers in");
  bytes.pop_back();
  EXPECT_NE(errorOf(bytes).find("shape (3,) of int64 needs 24 bytes of data, the file has 23"),
            std::string::npos) << errorOf(bytes);
}
