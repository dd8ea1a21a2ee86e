// SPDX-License-Identifier: GPL-3.0-or-later
// Argument parsing and printing for `kvlens codebook`.
#include "app/codebook_command.h"

#include "core/quant/lloyd_max.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace kvlens::app {

namespace {

constexpr const char* kUsage =
    "usage: kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]\n"
    "  --law   beta: coordinate of a random unit vector in R^D (default); gauss: N(0, 1/D), or N(0, 1) without --dim\n"
    "  --dim   dimension D (beta: 3..65536, default 128; gauss: 1..65536, default: unit variance)\n"
    "  --bits  bits per coordinate, 1..8 (default 3)\n"
    "  --csv   print index,level,lower,upper rows instead of the table\n";

bool parseInt(const std::string& text, int& value)
{
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc() && ptr == end;
}

std::string fmt(const char* format, double v)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, v);
    return buffer;
}

} // namespace

int runCodebookCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)
{
    CodebookLaw law = CodebookLaw::Beta;
    int dim = -1;
    int bits = 3;
    bool csv = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto next = [&](const char* what) -> const std::string* {
            if (i + 1 >= args.size()) {
                err << "kvlens codebook: " << a << " needs " << what << "\n" << kUsage;
                return nullptr;
            }
            return &args[++i];
        };
        if (a == "--help" || a == "-h") {
            out << kUsage;
            return 0;
        } else if (a == "--law") {
            const std::string* v = next("a law (beta or gauss)");
            if (!v)
                return 2;
            const auto parsed = codebookLawFromName(*v);
            if (!parsed || *parsed == CodebookLaw::Empirical) {
                err << "kvlens codebook: --law must be beta or gauss, got '" << *v << "'\n";
                return 2;
            }
            law = *parsed;
        } else if (a == "--dim") {
            const std::string* v = next("a dimension");
            if (!v)
                return 2;
            if (!parseInt(*v, dim) || dim < 1 || dim > 65536) {
                err << "kvlens codebook: --dim must be an integer in [1, 65536], got '" << *v << "'\n";
                return 2;
            }
        } else if (a == "--bits") {
            const std::string* v = next("a bit count");
            if (!v)
                return 2;
            if (!parseInt(*v, bits) || bits < 1 || bits > 8) {
                err << "kvlens codebook: --bits must be an integer in [1, 8], got '" << *v << "'\n";
                return 2;
            }
        } else if (a == "--csv") {
            csv = true;
        } else {
            err << "kvlens codebook: unknown option '" << a << "'\n" << kUsage;
            return 2;
        }
    }
    if (law == CodebookLaw::Beta) {
        if (dim < 0)
            dim = 128;
        if (dim < 3) {
            err << "kvlens codebook: --dim must be in [3, 65536] for the beta law, got " << dim << "\n";
            return 2;
        }
    } else if (dim < 0) {
        dim = 0; // unit variance
    }

    const auto cb = cachedCodebook(law, dim, bits);
    const int levels = cb->levelCount();
    if (csv) {
        out << "index,level,lower,upper\n";
        for (int i = 0; i < levels; ++i) {
            const double lo = i == 0 ? -INFINITY : cb->thresholds[static_cast<std::size_t>(i - 1)];
            const double hi = i + 1 == levels ? INFINITY : cb->thresholds[static_cast<std::size_t>(i)];
            out << i << "," << fmt("%.17g", cb->levels[static_cast<std::size_t>(i)]) << "," << fmt("%.17g", lo)
                << "," << fmt("%.17g", hi) << "\n";
        }
        return 0;
    }

    std::string lawText = law == CodebookLaw::Beta
        ? "beta (coordinate of a random unit vector in R^" + std::to_string(dim) + ")"
        : (dim == 0 ? std::string("gauss, unit variance") : "gauss, variance 1/" + std::to_string(dim));
    out << "codebook: " << lawText << ", " << bits << " bits (" << levels << " levels)\n";
    out << "centroids: ";
    for (int i = 0; i < levels; ++i)
        out << (i ? " " : "") << fmt("%.4f", cb->levels[static_cast<std::size_t>(i)]);
    out << "\nthresholds:";
    for (double t : cb->thresholds)
        out << " " << fmt("%.4f", t);
    out << "\nmse: " << fmt("%.4g", cb->mse);
    if (law == CodebookLaw::Beta || dim > 0)
        out << " (dim * mse = " << fmt("%.5g", cb->mse * dim) << ")";
    else
        out << " per unit variance";
    out << "\ndesign: " << (cb->converged ? "converged" : "NOT converged") << " after " << cb->iterations
        << " iterations\n\n";
    out << "index       level       lower       upper\n";
    for (int i = 0; i < levels; ++i) {
        const double lo = i == 0 ? -INFINITY : cb->thresholds[static_cast<std::size_t>(i - 1)];
        const double hi = i + 1 == levels ? INFINITY : cb->thresholds[static_cast<std::size_t>(i)];
        out << fmt("%5.0f", i) << fmt(" %11.6f", cb->levels[static_cast<std::size_t>(i)]) << fmt(" %11.6f", lo)
            << fmt(" %11.6f", hi) << "\n";
    }
    return cb->converged ? 0 : 1;
}

} // namespace kvlens::app
