// SPDX-License-Identifier: GPL-3.0-or-later
// Shared by the tensor fuzz targets: the slice reader must agree with the full decode.
#pragma once

#include "core/io/tensor_file.h"

#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace kvlens::fuzz {

/// After a successful full decode of `t` from the whole file `file`, reads the last row of its
/// first matrix with decodeTensorSlice and aborts unless it succeeds and equals that row of `full`
/// byte for byte (memcmp, so NaN payloads compare too).
inline void checkLastRowSlice(std::span<const std::uint8_t> file, const io::TensorInfo& t, const io::Tensor& full,
                              const char* label, const io::ReadLimits& limits)
{
    // An empty tensor (any dimension 0, a leading one included) has no first matrix to slice.
    if (t.shape.size() < 2 || t.elementCount() == 0 || t.fileBytes != file.size())
        return;
    const std::int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape.back();
    const io::SliceRequest s{std::vector<std::int64_t>(t.shape.size() - 2, 0), rows - 1, 1};
    const auto slice = io::decodeTensorSlice(file, t, s, label, limits);
    if (!slice || slice->data.size() != static_cast<std::size_t>(cols))
        std::abort();
    if (cols > 0
        && std::memcmp(slice->data.data(), full.data.data() + (rows - 1) * cols, static_cast<std::size_t>(cols) * 4) != 0)
        std::abort();
}

} // namespace kvlens::fuzz
