// SPDX-License-Identifier: GPL-3.0-or-later
// glibc mallopt settings: no mmap for large blocks, no trimming of the heap top.
#include "core/common/memory.h"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvlens {

void retainFreedMemory()
{
#if defined(__GLIBC__)
    static std::once_flag once;
    std::call_once(once, [] {
        mallopt(M_MMAP_THRESHOLD, 1 << 30); // blocks below 1 GiB come from the heap and are reused
        mallopt(M_TRIM_THRESHOLD, 1 << 30); // keep up to 1 GiB of freed heap instead of unmapping it
    });
#endif
}

} // namespace kvlens
