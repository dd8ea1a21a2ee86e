// SPDX-License-Identifier: GPL-3.0-or-later
// Token ids given directly, as a .npy of int32 or int64, for models without a tokenizer KVLens reads.
#pragma once

#include "core/common/result.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvlens::lm {

/// A token-id file is read whole below this size: 32 million int64 ids, a hundred times
/// WikiText-103's test set.
inline constexpr std::uint64_t kMaxTokenIdsFileBytes = 256ull << 20;

/// The ids in a whole .npy file held in `bytes` (header: io::parseNpyRawHeader). Accepted: dtype
/// '<i4' or '<i8' ('=' on this little-endian machine too), C order, shape (n,) or (1, n) with n >= 1,
/// a payload of exactly n items. Refused with an error naming `label` and what is wrong: other
/// dtypes (unsigned, float, big-endian), Fortran order, other shapes, no ids, a truncated or
/// over-long payload, an id below 0 or at least kMaxVocabSize (2^24; the first such index named).
Result<std::vector<std::int32_t>> parseTokenIdsNpy(std::span<const std::uint8_t> bytes, const std::string& label);

/// Reads `npyPath` (io::readRegularFile, at most `maxBytes`) and parses it.
Result<std::vector<std::int32_t>> readTokenIds(const std::string& npyPath,
                                               std::uint64_t maxBytes = kMaxTokenIdsFileBytes);

/// Refuses the first id outside [0, vocabSize), naming its index, the id and the range.
Status checkTokenIds(std::span<const std::int32_t> ids, std::int32_t vocabSize, const std::string& label);

} // namespace kvlens::lm
