// SPDX-License-Identifier: GPL-3.0-or-later
// A model checkpoint's tensors as stored on disk, found from the headers alone and memory-mapped:
// a Hugging Face folder's safetensors (one file or index-listed shards) or a GGUF file.
#pragma once

#include "core/common/result.h"
#include "core/io/ggml_types.h"
#include "core/io/mapped_file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace kvlens::lm {

/// One stored tensor: where its bytes are in a map and how they are stored.
struct CheckpointTensor {
    std::string name;
    std::optional<ggml::GgmlType> type;  ///< nullopt: a dtype no weight may have (storedType names it)
    std::string storedType;              ///< as the file names it ("BF16", "F64", "q4_K")
    std::vector<std::int64_t> shape;     ///< outermost first ([rows, cols] of a matrix), whatever the format
    const std::uint8_t* data = nullptr;  ///< the first payload byte, inside `file`
    std::uint64_t bytes = 0;
    std::string path;                    ///< the file, for messages
    std::shared_ptr<const io::MappedFile> file;
};

/// model.safetensors.index.json: which shard file holds each tensor.
struct WeightIndex {
    std::map<std::string, std::string> weightMap; ///< tensor name -> shard file name
    std::vector<std::string> shards;              ///< the distinct shard names, sorted
};

/// Caps for index files: the text and the counts.
inline constexpr std::uint64_t kMaxIndexBytes = 64ull << 20;
inline constexpr std::size_t kMaxIndexTensors = 1'000'000;

/// Parses model.safetensors.index.json text (pure; `label` starts every error). Needs an object
/// with a non-empty `weight_map` object of tensor name -> shard file name (`metadata` optional,
/// an object). A shard name must be a plain file name ending in ".safetensors": no '/', no '\\',
/// not "." or "..", no control bytes, valid UTF-8, at most 255 bytes. At most kMaxIndexTensors
/// entries. Duplicate keys are refused by the JSON reader.
Result<WeightIndex> parseWeightIndex(std::string_view json, const std::string& label);

enum class CheckpointFormat { HfFolder, Gguf };

/// Every tensor of a checkpoint, by name, after the file-level checks.
struct Checkpoint {
    CheckpointFormat format = CheckpointFormat::HfFolder;
    std::string describe;   ///< "DIR/model.safetensors", "DIR/model.safetensors.index.json", "FILE.gguf"
    std::map<std::string, CheckpointTensor> tensors;
};

/// The tensors of the Hugging Face folder `dir`: `model.safetensors` if present, else the shards
/// `model.safetensors.index.json` lists. Every shard is a plain file name inside `dir`, a regular
/// file, and does not resolve (through links) outside it; no tensor is held by two shards; the
/// index's tensors are in the shards it names. Headers only; the files are mapped, not read.
Result<Checkpoint> openHfCheckpoint(const std::string& dir);

} // namespace kvlens::lm
