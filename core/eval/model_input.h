// SPDX-License-Identifier: GPL-3.0-or-later
// The tokens a model run reads, as kvlens eval and kvlens capture take them: token ids from a .npy,
// or the model folder's tokenizer over a text file, streamed: read in blocks and tokenized only as far as the run needs.
#pragma once

#include "core/common/result.h"
#include "core/lm/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvlens::eval {

/// A text file is refused above this size (it is read in blocks, so memory does not grow with it:
/// the cap bounds the tokens of a run that asks for all of them).
inline constexpr std::uint64_t kMaxTextBytes = 256ull << 20;

struct ModelInput {
    std::vector<std::int32_t> tokens;
    std::unique_ptr<lm::Tokenizer> tokenizer; ///< the model's, or an ids tokenizer for a .npy
};

/// `tokensFile` (int32/int64 .npy) when given, else `textFile` (at most kMaxTextBytes) encoded by
/// the tokenizer in `modelDir` for a vocabulary of `vocab`. `maxTokens` > 0: only the first
/// maxTokens tokens (exactly those of the whole text's encoding), and the text is read and
/// tokenized no further than they need (lm::Tokenizer::encodeStream, blocks of
/// lm::kEncodeBlockBytes: memory is the tokens kept plus a block, whatever the text's size); a
/// .npy is cut to them. `cancelled` is polled between blocks and while one is tokenized
/// (Error::cancellation()). Errors name the file; ids are not checked against the vocabulary here.
Result<ModelInput> readModelInput(const std::string& modelDir, const std::string& textFile,
                                  const std::string& tokensFile, bool parseSpecialTokens, int vocab,
                                  std::size_t maxTokens = 0, const std::function<bool()>& cancelled = {});

} // namespace kvlens::eval
