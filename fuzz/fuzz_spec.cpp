// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: experiment specs from arbitrary JSON text, and the write-then-read round trip of accepted ones.
#include "core/spec/spec_json.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto spec = kvlens::specFromJson(text);
    if (!spec)
        return 0;
    // spec_json.h promises specFromJson(specToJson(s)) == s for a normalized spec.
    const auto again = kvlens::specFromJson(kvlens::specToJson(*spec));
    if (!again || !(*again == *spec))
        std::abort();
    return 0;
}
