// SPDX-License-Identifier: GPL-3.0-or-later
// `kvlens codebook`: its options and the printed codebook.
#include "app/codebook_command.h"

#include <cmath>
#include <cstdio>
#include <ostream>

namespace kvlens::app {

namespace {

std::string fmt(const char* format, double v)
{
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, v);
    return buffer;
}

} // namespace

cli::Syntax codebookSyntax()
{
    return {{cli::choice("--law", {"beta", "gauss"},
                         "beta: coordinate of a random unit vector in R^D (default); gauss: N(0, 1/D), or N(0, 1) "
                         "without --dim"),
             cli::integer("--dim", "D", 1, 65536, "dimension D (beta: at least 3, default 128; gauss: default unit variance)"),
             cli::integer("--bits", "B", 1, 8, "bits per coordinate (default 3)"),
             cli::flag("--csv", "print index,level,lower,upper rows instead of the table")},
            {}};
}

Result<CodebookOptions> codebookOptionsFrom(const cli::Arguments& args)
{
    CodebookOptions o;
    o.law = *codebookLawFromName(args.value("--law", "beta")); // beta or gauss: the reader checked it
    o.bits = static_cast<int>(args.integer("--bits", 3));
    o.csv = args.has("--csv");
    o.dim = static_cast<int>(args.integer("--dim", o.law == CodebookLaw::Beta ? 128 : 0));
    if (o.law == CodebookLaw::Beta && o.dim < 3)
        return Error{"--dim", "must be in [3, 65536] for the beta law, got " + std::to_string(o.dim)};
    return o;
}

int runCodebook(const CodebookOptions& options, std::ostream& out, std::ostream&)
{
    const CodebookLaw law = options.law;
    const int dim = options.dim, bits = options.bits;
    const bool csv = options.csv;
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
