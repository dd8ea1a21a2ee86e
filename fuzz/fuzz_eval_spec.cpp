// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: eval specs (kvlens eval's spec.json) from arbitrary JSON text; an accepted spec
// written and read again must write the same text (relative paths become absolute once).
#include "core/spec/eval_spec.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)kvlens::isEvalSpecText(text);
    const auto spec = kvlens::evalSpecFromJson(text);
    if (!spec)
        return 0;
    (void)kvlens::checkEvalSpec(*spec);
    const std::string once = kvlens::evalSpecToJson(*spec);
    const auto again = kvlens::evalSpecFromJson(once);
    if (!again || kvlens::evalSpecToJson(*again) != once)
        std::abort();
    return 0;
}
