// SPDX-License-Identifier: GPL-3.0-or-later
// Bounded, duplicate-free JSON parsing and non-recursive value descriptions.
#include "core/io/json_text.h"

#include "core/io/tensor_file.h"

#include <nlohmann/json.hpp>

#include <set>
#include <vector>

namespace kvlens::io {

using nlohmann::json;

std::string jsonNestingError(std::string_view text, int maxDepth)
{
    int depth = 0;
    bool inString = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > maxDepth)
                return "arrays and objects nested deeper than " + std::to_string(maxDepth) + " levels (at byte "
                       + std::to_string(i) + ")";
        } else if (c == ']' || c == '}') {
            depth = depth > 0 ? depth - 1 : 0;
        }
    }
    return {};
}

Result<json> parseJsonText(std::string_view text, int maxDepth)
{
    if (std::string nested = jsonNestingError(text, maxDepth); !nested.empty())
        return Error{"", std::move(nested)};
    std::vector<std::set<std::string>> seen;
    std::string duplicate;
    std::size_t duplicateDepth = 0;
    const json::parser_callback_t callback = [&](int, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::object_start) {
            seen.emplace_back();
        } else if (event == json::parse_event_t::object_end) {
            if (!seen.empty())
                seen.pop_back();
        } else if (event == json::parse_event_t::key && duplicate.empty() && !seen.empty()) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!seen.back().insert(key).second) {
                duplicate = key;
                duplicateDepth = seen.size();
            }
        }
        return true;
    };
    json value;
    try {
        value = json::parse(text.begin(), text.end(), callback);
    } catch (const json::exception& e) {
        // nlohmann's message quotes the last token read, which the input controls: keep it short
        // and free of control characters.
        std::string what = e.what();
        if (what.size() > 200)
            what = what.substr(0, 200) + "...";
        for (char& c : what)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                c = '?';
        return Error{"", "not valid JSON: " + what};
    }
    if (!duplicate.empty())
        return Error{"", "key " + quoteName(duplicate) + " is given twice in one object"
                             + (duplicateDepth == 1 ? std::string(" (at the top level)")
                                                    : " (at nesting level " + std::to_string(duplicateDepth) + ")")};
    return value;
}

std::string describeJson(const json& value)
{
    switch (value.type()) {
    case json::value_t::array:
        return "an array of " + std::to_string(value.size()) + (value.size() == 1 ? " element" : " elements");
    case json::value_t::object:
        return "an object of " + std::to_string(value.size()) + (value.size() == 1 ? " key" : " keys");
    case json::value_t::string:
        return "the string " + quoteName(value.get_ref<const std::string&>());
    case json::value_t::boolean:
        return value.get<bool>() ? "true" : "false";
    case json::value_t::null:
        return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
        return "the number " + value.dump();
    case json::value_t::binary:
    case json::value_t::discarded:
        break;
    }
    return std::string("a ") + value.type_name();
}

std::string dumpJson(const json& value, int indent)
{
    return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

bool isValidUtf8(std::string_view text)
{
    std::size_t i = 0;
    const std::size_t n = text.size();
    while (i < n) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t extra = 0;
        std::uint32_t code = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1;
            code = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2;
            code = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3;
            code = c & 0x07;
        } else {
            return false;
        }
        if (i + extra >= n)
            return false;
        for (std::size_t k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + k]);
            if ((cc & 0xC0) != 0x80)
                return false;
            code = (code << 6) | (cc & 0x3F);
        }
        // Overlong forms, surrogates and code points past U+10FFFF.
        if ((extra == 1 && code < 0x80) || (extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000)
            || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return false;
        i += extra + 1;
    }
    return true;
}

} // namespace kvlens::io
