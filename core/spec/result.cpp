// SPDX-License-Identifier: GPL-3.0-or-later
// Lookups on a ResultSet.
#include "core/spec/result.h"

namespace kvlens {

const TrialResult* ResultSet::find(int point, int scheme, int budget, int seedIndex) const
{
    for (const auto& t : trials)
        if (t.key.point == point && t.key.scheme == scheme && t.key.budget == budget && t.key.seedIndex == seedIndex)
            return &t;
    return nullptr;
}

int ResultSet::schemeIndex(std::string_view name) const
{
    for (std::size_t i = 0; i < schemes.size(); ++i)
        if (schemes[i].name == name)
            return static_cast<int>(i);
    return -1;
}

} // namespace kvlens
