#pragma once
// .npy files (NumPy format 1.0-3.0): float32 and float64, C order, little endian.
// Anything else is an Error naming the file and what is unsupported.

#include <string>

#include "core/tensor.h"

namespace tessel::runtime {

[[nodiscard]] Tensor read_npy(const std::string& path);
[[nodiscard]] Tensor parse_npy(const std::string& bytes, const std::string& what);
// Encodes as float32 for f32 (and f16/bf16) tensors, float64 for f64.
[[nodiscard]] std::string encode_npy(const Tensor& t);
// Atomic: no partial file is left on failure.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tessel::runtime
