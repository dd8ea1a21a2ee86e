// SPDX-License-Identifier: GPL-3.0-or-later
// Numeric comparisons for Qt Test that print actual, expected and tolerance on failure.
#pragma once

#include <QTest>

#include <cmath>
#include <string>

namespace kvlens::test {

/// |actual - expected| <= absTol + relTol * |expected|, with a message saying all four numbers.
inline bool approxEqual(double actual, double expected, double absTol, double relTol, std::string& message)
{
    const double diff = std::abs(actual - expected);
    const double allowed = absTol + relTol * std::abs(expected);
    if (diff <= allowed && std::isfinite(actual))
        return true;
    char buffer[256];
    std::snprintf(buffer, sizeof buffer, "actual %.10g, expected %.10g, |diff| %.3g > allowed %.3g (abs %.3g, rel %.3g)",
                  actual, expected, diff, allowed, absTol, relTol);
    message = buffer;
    return false;
}

} // namespace kvlens::test

/// Passes when |actual - expected| <= tol.
#define KVLENS_COMPARE_ABS(actual, expected, tol)                                                   \
    do {                                                                                            \
        std::string kvlensMessage_;                                                                 \
        if (!::kvlens::test::approxEqual((actual), (expected), (tol), 0.0, kvlensMessage_))         \
            QFAIL((std::string(#actual " vs " #expected ": ") + kvlensMessage_).c_str());           \
    } while (false)

/// Passes when |actual - expected| <= rel * |expected|.
#define KVLENS_COMPARE_REL(actual, expected, rel)                                                   \
    do {                                                                                            \
        std::string kvlensMessage_;                                                                 \
        if (!::kvlens::test::approxEqual((actual), (expected), 0.0, (rel), kvlensMessage_))         \
            QFAIL((std::string(#actual " vs " #expected ": ") + kvlensMessage_).c_str());           \
    } while (false)

/// Passes when `value` lies in [lo, hi]; prints all three otherwise.
#define KVLENS_VERIFY_IN_RANGE(value, lo, hi)                                                       \
    do {                                                                                            \
        const double kvlensV_ = (value), kvlensLo_ = (lo), kvlensHi_ = (hi);                        \
        if (!(kvlensV_ >= kvlensLo_ && kvlensV_ <= kvlensHi_))                                      \
            QFAIL(QByteArray(#value " = " + QByteArray::number(kvlensV_, 'g', 10) + " not in ["     \
                             + QByteArray::number(kvlensLo_, 'g', 10) + ", "                        \
                             + QByteArray::number(kvlensHi_, 'g', 10) + "]").constData());          \
    } while (false)
