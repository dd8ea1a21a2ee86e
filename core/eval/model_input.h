// SPDX-License-Identifier: GPL-3.0-or-later
// The tokens a model run reads, as kvlens eval and kvlens capture take them: token ids from a .npy,
// or the model folder's tokenizer over a text file.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvlens::eval {

struct ModelInput {
    std::vector<std::int32_t> tokens;
    std::unique_ptr<lm::Tokenizer> tokenizer; ///< the model's, or an ids tokenizer for a .npy
};

/// `tokensFile` (int32/int64 .npy) when given, else `textFile` (at most 256 MiB) encoded by the
/// tokenizer in `modelDir` for a vocabulary of `vocab`. Errors name the file; ids are not checked
/// against the vocabulary here.
Result<ModelInput> readModelInput(const std::string& modelDir, const std::string& textFile,
                                  const std::string& tokensFile, bool parseSpecialTokens, int vocab,
                                  std::size_t maxTokens = 0, const std::function<bool()>& cancelled = {});

} // namespace kvlens::eval
