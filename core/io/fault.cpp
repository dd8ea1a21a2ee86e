// SPDX-License-Identifier: GPL-3.0-or-later
// KVLENS_FAULT: "stop:NAME" or "enospc:FILE".
#include "core/io/fault.h"

#include <csignal>
#include <cstdlib>
#include <string>

namespace kvlens::io {

namespace {

std::string_view faultSpec()
{
    const char* value = std::getenv("KVLENS_FAULT");
    return value ? std::string_view(value) : std::string_view();
}

} // namespace

void faultPoint(std::string_view name)
{
    const std::string_view spec = faultSpec();
    if (spec.substr(0, 5) == "stop:" && spec.substr(5) == name)
        std::raise(SIGSTOP);
}

bool faultFailsWrite(std::string_view fileName)
{
    const std::string_view spec = faultSpec();
    return spec.substr(0, 7) == "enospc:" && spec.substr(7) == fileName;
}

} // namespace kvlens::io
