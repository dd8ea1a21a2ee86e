// SPDX-License-Identifier: GPL-3.0-or-later
// Reading untrusted JSON (specs, manifests, safetensors headers): bounded nesting, no duplicate
// keys, and messages that describe a bad value by its type and size instead of dumping it.
#pragma once

#include "core/common/result.h"

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace kvlens::io {

/// Arrays and objects nested deeper than this are refused before nlohmann::json sees the text:
/// every format KVLens reads needs fewer than ten levels, and printing or comparing a value
/// recurses once per level.
inline constexpr int kMaxJsonDepth = 64;

/// Where `text` first nests arrays and objects deeper than `maxDepth` ("nested deeper than 64
/// levels at byte 1234"), or an empty string when it does not. One pass, aware of strings and
/// escapes; says nothing else about validity.
std::string jsonNestingError(std::string_view text, int maxDepth = kMaxJsonDepth);

/// Parses `text` as JSON: nesting capped at `maxDepth`, and a key given twice in one object
/// refused (nlohmann::json would silently keep the last). The error's field is empty; its message
/// says what is wrong and where (byte offset, or the duplicated key quoted).
Result<nlohmann::json> parseJsonText(std::string_view text, int maxDepth = kMaxJsonDepth);

/// A one-line description of a value for error messages: "an array of 3 elements", "an object
/// of 2 keys", "the string 'abc'" (quoted as quoteName does), "the number 1e+308", "true",
/// "false", "null". Never recursive, never throws (invalid UTF-8 is escaped).
std::string describeJson(const nlohmann::json& value);

/// value.dump(indent) with invalid UTF-8 replaced by U+FFFD instead of throwing; for writing
/// values that came from outside (file names in paths).
std::string dumpJson(const nlohmann::json& value, int indent = -1);

/// True when `text` is well-formed UTF-8.
bool isValidUtf8(std::string_view text);

} // namespace kvlens::io
