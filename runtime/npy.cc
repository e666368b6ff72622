#include "runtime/npy.h"

#include <charconv>
#include <cstring>
#include <regex>

#include "core/checked.h"
#include "core/error.h"
#include "core/io.h"

namespace tessel::runtime {

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) fail(what, ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(what, ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    fail(what, ": unsupported .npy version ", major);
  }
  if (bytes.size() < header_start + header_len) fail(what, ": truncated .npy header");
  std::string header = bytes.substr(header_start, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    fail(what, ": .npy header has no 'descr'");
  std::string descr = m[1];
  DType dtype;
  std::size_t elem = 0;
  if (descr == "<f4" || descr == "=f4") {
    dtype = DType::f32;
    elem = 4;
  } else if (descr == "<f8" || descr == "=f8") {
    dtype = DType::f64;
    elem = 8;
  } else {
    fail(what, ": unsupported dtype '", descr, "' (tessel reads little-endian float32 '<f4' and float64 '<f8')");
  }
  if (!std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*(True|False)")))
    fail(what, ": .npy header has no 'fortran_order'");
  if (m[1] == "True") fail(what, ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    fail(what, ": .npy header has no 'shape'");
  // The shape tuple as numpy writes it: non-negative decimal integers separated by
  // commas, optionally a trailing comma ("()", "(3,)", "(2, 3)"). Anything else (-1, 2.0,
  // 0x2, 'a', an empty item) is an error, never read loosely.
  Shape shape;
  const std::string dims = m[1];
  std::size_t pos = 0;
  auto skip_spaces = [&] {
    while (pos < dims.size() && (dims[pos] == ' ' || dims[pos] == '\t')) ++pos;
  };
  skip_spaces();
  while (pos < dims.size()) {
    const std::size_t start = pos;
    while (pos < dims.size() && dims[pos] >= '0' && dims[pos] <= '9') ++pos;
    const std::string d = dims.substr(start, pos - start);
    skip_spaces();
    if (d.empty() || (pos < dims.size() && dims[pos] != ','))
      fail(what, ": .npy header: shape (", dims, ") is not a tuple of non-negative integers");
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
    if (ec != std::errc() || end != d.data() + d.size()) fail(what, ": .npy shape size ", d, " does not fit 64 bits");
    shape.push_back(v);
    if (pos < dims.size()) ++pos;  // the comma
    skip_spaces();
  }
  if (shape.size() == 1 && dims.find(',') == std::string::npos)
    fail(what, ": .npy header: shape (", dims, ") is not a tuple (a one-element tuple ends in a comma)");
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) fail(what, ": rank ", shape.size(), " exceeds ", kMaxRank);
  // The declared size against the bytes present, before anything is allocated: a
  // 128-byte file may declare 2^30 elements.
  std::int64_t need = 0;
  try {
    need = checked_mul(elements(shape), static_cast<std::int64_t>(elem), "bytes of data");
  } catch (const Error& e) {
    fail(what, ": .npy header: ", e.what());
  }
  const std::size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < static_cast<std::size_t>(need))
    fail(what, ": truncated data: ", bytes.size() - data_start, " bytes for shape ", to_string(shape), " (need ", need, ")");
  Tensor t(shape, dtype);
  const char* p = bytes.data() + data_start;
  for (std::int64_t i = 0; i < t.size(); ++i) {
    if (elem == 4) {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      t.data[i] = f;
    } else {
      std::memcpy(&t.data[i], p + i * 8, 8);
    }
  }
  return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

std::string encode_npy(const Tensor& t) {
  const bool f64 = t.dtype == DType::f64;
  std::string shape;  // Python tuple syntax: (), (4,), (2, 3)
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ',';
  std::string header = std::string("{'descr': '") + (f64 ? "<f8" : "<f4") + "', 'fortran_order': False, 'shape': (" +
                       shape + "), }";
  std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  const std::size_t elem = f64 ? 8 : 4;
  std::string data(static_cast<std::size_t>(t.size()) * elem, '\0');
  for (std::int64_t i = 0; i < t.size(); ++i) {
    if (f64) {
      std::memcpy(&data[i * 8], &t.data[i], 8);
    } else {
      float f = static_cast<float>(t.data[i]);
      std::memcpy(&data[i * 4], &f, 4);
    }
  }
  return out + data;
}

void write_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, encode_npy(t)); }

}  // namespace tessel::runtime
