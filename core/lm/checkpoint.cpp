// SPDX-License-Identifier: GPL-3.0-or-later
// Opening checkpoints: a Hugging Face folder's safetensors shards found and mapped from their headers.
#include "core/lm/checkpoint.h"

#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/tensor_file.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

namespace kvlens::lm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool isPlainShardName(const std::string& name)
{
    if (name.empty() || name.size() > 255 || name == "." || name == "..")
        return false;
    for (const char c : name)
        if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            return false;
    return io::isValidUtf8(name);
}

/// `name` inside `dir`: a regular file (after following links) that resolves inside `dir`.
Result<std::string> shardPath(const std::string& dir, const std::string& name, const std::string& label)
{
    std::error_code ec;
    const fs::path folder = fs::canonical(dir, ec);
    if (ec)
        return Error{dir, "cannot resolve the model folder: " + ec.message()};
    const fs::path path = fs::path(dir) / name;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        return Error{label, "shard " + io::quoteName(name) + " does not exist in " + dir};
    if (!fs::is_regular_file(status))
        return Error{label, "shard " + io::quoteName(name) + " is not a regular file"};
    const fs::path resolved = fs::canonical(path, ec);
    if (ec)
        return Error{label, "shard " + io::quoteName(name) + " cannot be resolved: " + ec.message()};
    if (resolved.parent_path() != folder)
        return Error{label, "shard " + io::quoteName(name) + " resolves to " + io::quoteName(resolved.string())
                                + ", outside the model folder"};
    return path.string();
}

std::optional<ggml::GgmlType> weightType(io::DType dtype)
{
    switch (dtype) {
    case io::DType::F32: return ggml::GgmlType::F32;
    case io::DType::F16: return ggml::GgmlType::F16;
    case io::DType::BF16: return ggml::GgmlType::BF16;
    default: return std::nullopt;
    }
}

/// Maps `path` and adds its tensors; `heldBy` (tensor -> shard) refuses a tensor in two shards.
Status addShard(Checkpoint& cp, const std::string& path, const std::string& shard,
                std::map<std::string, std::string>& heldBy)
{
    auto info = io::inspectTensorFile(path);
    if (!info)
        return info.error();
    auto mapped = io::MappedFile::open(path);
    if (!mapped)
        return mapped.error();
    auto file = std::make_shared<const io::MappedFile>(std::move(*mapped));
    if (!info->tensors.empty() && file->size() != info->tensors.front().fileBytes)
        return Error{path, "the file changed while it was opened (its size is not the one its header was read from)"};
    for (io::TensorInfo& t : info->tensors) {
        if (const auto it = heldBy.find(t.name); it != heldBy.end())
            return Error{cp.describe, "tensor " + io::quoteName(t.name) + " is held by two shards, "
                                          + io::quoteName(it->second) + " and " + io::quoteName(shard)};
        heldBy[t.name] = shard;
        CheckpointTensor c;
        c.name = t.name;
        c.type = weightType(t.dtype);
        c.storedType = std::string(io::dtypeName(t.dtype));
        c.shape = t.shape;
        c.data = file->data() + t.dataOffset;
        c.bytes = t.dataBytes;
        c.path = path;
        c.file = file;
        const std::string name = c.name;
        cp.tensors[name] = std::move(c);
    }
    return Ok{};
}

Status checkIndexAgainstShards(const Checkpoint& cp, const WeightIndex& index,
                               const std::map<std::string, std::string>& heldBy)
{
    for (const auto& [tensor, shard] : index.weightMap) {
        const auto it = heldBy.find(tensor);
        if (it == heldBy.end())
            return Error{cp.describe, "tensor " + io::quoteName(tensor) + " is mapped to shard " + io::quoteName(shard)
                                          + ", which does not hold it (no shard does)"};
        if (it->second != shard)
            return Error{cp.describe, "tensor " + io::quoteName(tensor) + " is mapped to shard " + io::quoteName(shard)
                                          + " but held by " + io::quoteName(it->second)};
    }
    return Ok{};
}

} // namespace

Result<WeightIndex> parseWeightIndex(std::string_view text, const std::string& label)
{
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{label, parsed.error().message};
    const json& root = *parsed;
    if (!root.is_object())
        return Error{label, "index is " + io::describeJson(root) + ", not a JSON object"};
    if (const auto it = root.find("metadata"); it != root.end() && !it->is_object() && !it->is_null())
        return Error{label, "'metadata' is " + io::describeJson(*it) + ": it must be an object"};
    const auto map = root.find("weight_map");
    if (map == root.end())
        return Error{label, "'weight_map' is missing: it must map each tensor name to its shard file"};
    if (!map->is_object() || map->empty())
        return Error{label, "'weight_map' is " + io::describeJson(*map) + ": it must be a non-empty object"};
    if (map->size() > kMaxIndexTensors)
        return Error{label, "'weight_map' has " + std::to_string(map->size()) + " entries, more than "
                                + std::to_string(kMaxIndexTensors)};
    WeightIndex index;
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : map->items()) {
        if (!shard.is_string())
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " is " + io::describeJson(shard)
                                    + ": it must be a shard file name"};
        const auto& name = shard.get_ref<const std::string&>();
        if (!isPlainShardName(name))
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " names shard " + io::quoteName(name)
                                    + ": a shard must be a plain file name inside the model folder (no '/', no "
                                      "'..', no control characters)"};
        constexpr std::string_view kExt = ".safetensors";
        if (name.size() <= kExt.size() || name.compare(name.size() - kExt.size(), kExt.size(), kExt) != 0)
            return Error{label, "'weight_map' entry " + io::quoteName(tensor) + " names shard " + io::quoteName(name)
                                    + ": shards must be .safetensors files"};
        index.weightMap[tensor] = name;
        shards.insert(name);
    }
    index.shards.assign(shards.begin(), shards.end());
    return index;
}

Result<Checkpoint> openHfCheckpoint(const std::string& dir)
{
    Checkpoint cp;
    cp.format = CheckpointFormat::HfFolder;
    std::error_code ec;
    const std::string single = dir + "/model.safetensors";
    const std::string indexPath = dir + "/model.safetensors.index.json";
    std::map<std::string, std::string> heldBy; // tensor -> shard whose header holds it
    if (fs::exists(fs::path(single), ec)) {
        cp.describe = single;
        auto path = shardPath(dir, "model.safetensors", single);
        if (!path)
            return path.error();
        if (auto s = addShard(cp, *path, "model.safetensors", heldBy); !s)
            return s.error();
        return cp;
    }
    if (!fs::exists(fs::path(indexPath), ec))
        return Error{dir, "no model.safetensors and no model.safetensors.index.json in the folder"};
    cp.describe = indexPath;
    auto text = io::readRegularFile(indexPath, kMaxIndexBytes);
    if (!text)
        return text.error();
    auto index = parseWeightIndex(*text, indexPath);
    if (!index)
        return index.error();
    for (const std::string& shard : index->shards) {
        auto path = shardPath(dir, shard, indexPath);
        if (!path)
            return path.error();
        if (auto s = addShard(cp, *path, shard, heldBy); !s)
            return s.error();
    }
    if (auto s = checkIndexAgainstShards(cp, *index, heldBy); !s)
        return s.error();
    return cp;
}

} // namespace kvlens::lm
