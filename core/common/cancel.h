// SPDX-License-Identifier: GPL-3.0-or-later
// Cooperative cancellation for the long loops that run after a run's trials (statistics, advisor, writers).
#pragma once

#include <exception>
#include <functional>
#include <utility>

namespace kvlens {

/// Thrown by CancelToken::check() when a stop was requested; the command that owns the token
/// catches it and exits with its interrupt status (never caught as a failure).
struct Cancelled : std::exception {
    const char* what() const noexcept override { return "cancelled"; }
};

/// A stop request a loop polls: the headless commands bind it to SIGINT/SIGTERM, the window to a
/// newer request. Default-constructed, it never fires. Polling is one call of the function (an
/// atomic load in practice), cheap enough for every resample or permutation.
class CancelToken {
public:
    CancelToken() = default;
    explicit CancelToken(std::function<bool()> poll) : m_poll(std::move(poll)) {}

    bool requested() const { return m_poll && m_poll(); }
    /// Throws Cancelled when a stop was requested.
    void check() const
    {
        if (requested())
            throw Cancelled{};
    }

private:
    std::function<bool()> m_poll;
};

} // namespace kvlens
