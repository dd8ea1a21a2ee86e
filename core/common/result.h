// SPDX-License-Identifier: GPL-3.0-or-later
// A value-or-error return type for user-reachable failures (bad specs, bad files, solver trouble).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kvlens {

/// Why an operation stopped: refused input (the default), a cancellation the caller asked for, or a
/// failure while running (I/O, memory). Callers branch on the kind, never on the message text.
enum class ErrorKind { Refused, Cancelled, Failed };

/// A user-facing failure. `field` names what was wrong (a spec field such as
/// "regime.nu", a file path, a tensor name); `message` is one line a user can act on.
struct Error {
    std::string field;
    std::string message;
    ErrorKind kind = ErrorKind::Refused;

    /// "field: message", or just the message when no field applies.
    std::string text() const { return field.empty() ? message : field + ": " + message; }
    bool cancelled() const { return kind == ErrorKind::Cancelled; }

    /// The error a cancelled operation returns (`where` names the stage, may be empty).
    static Error cancellation(std::string where = {}) { return Error{std::move(where), "cancelled", ErrorKind::Cancelled}; }
};

/// Either a T or an Error; the way core reports anything a user can cause, instead of throwing.
template <class T>
class Result {
public:
    Result(T value) : m_data(std::move(value)) {}
    Result(Error error) : m_data(std::move(error)) {}

    bool ok() const { return m_data.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { assert(ok() && "Result::value() on an error"); return std::get<0>(m_data); }
    const T& value() const& { assert(ok() && "Result::value() on an error"); return std::get<0>(m_data); }
    T&& value() && { assert(ok() && "Result::value() on an error"); return std::get<0>(std::move(m_data)); }
    const Error& error() const { assert(!ok() && "Result::error() on a value"); return std::get<1>(m_data); }

    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

private:
    std::variant<T, Error> m_data;
};

/// Result for operations that return nothing but can fail.
struct Ok {};
using Status = Result<Ok>;

} // namespace kvlens
