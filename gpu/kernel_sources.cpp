// SPDX-License-Identifier: GPL-3.0-or-later
// Kernel source lookup: embedded, or from KVLENS_KERNEL_DIR.
#include "gpu/kernel_sources.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kvlens::gpu {

Result<std::string> kernelSource(const std::string& name)
{
    if (const char* dir = std::getenv("KVLENS_KERNEL_DIR"); dir && *dir) {
        const std::string path = std::string(dir) + "/" + name + ".cl";
        std::ifstream in(path, std::ios::binary);
        if (!in)
            return Error{path, "cannot read the kernel file (KVLENS_KERNEL_DIR is set)"};
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }
    for (const auto& k : embeddedKernels())
        if (name == k.name)
            return std::string(k.source);
    return Error{name + ".cl", "no such kernel file is embedded"};
}

} // namespace kvlens::gpu
