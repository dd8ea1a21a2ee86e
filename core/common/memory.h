// SPDX-License-Identifier: GPL-3.0-or-later
// Process-wide allocator tuning for the trial loop.
#pragma once

namespace kvlens {

/// Keeps freed large blocks in the heap instead of returning them to the system, so the
/// next trial's buffers reuse already-touched pages: first touch of fresh memory costs about
/// 11 us per 4 KiB page on the reference machine (shared/PERF-NOTES.md), which made page
/// faults a visible share of a trial. glibc only; a no-op elsewhere. Idempotent.
void retainFreedMemory();

} // namespace kvlens
