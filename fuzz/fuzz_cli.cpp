// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer target: the command line's option reader (app/cli.h) on arbitrary words, and what it promises of what it accepts.
#include "app/cli.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace cli = kvlens::app::cli;

/// One option of every kind, as the command table uses them.
const cli::Syntax& syntax()
{
    static const cli::Syntax s{{cli::flag("--quiet", "f"), cli::text("--out", "DIR", "t").isRequired(),
                                cli::integer("--n", "N", -5, 1LL << 40, "i"), cli::real("--x", "X", 0.0, 20.0, "r", true),
                                cli::choice("--law", {"beta", "gauss"}, "c"), cli::text("--meta", "K=V", "m").isRepeatable(),
                                cli::flag("--version", "v").withAlias("-v")},
                               {"DIR", "directories", "p", 0, 3}};
    return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    // Words separated by NUL, as argv holds them.
    std::vector<std::string> words(1);
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0)
            words.emplace_back();
        else
            words.back() += static_cast<char>(data[i]);
    }
    const auto read = cli::read(syntax(), words, "kvlens fuzz");
    if (!read) {
        if (read.error().text().empty())
            std::abort(); // a refusal always says why
        return 0;
    }
    if (read->helpRequested())
        return 0;
    // What an accepted reading promises: the required option, values in range, no repeats, at most 3 words.
    if (!read->has("--out") || read->value("--out").empty() || read->positionals().size() > 3)
        std::abort();
    for (const std::string& name : read->given())
        if (name != "--meta" && read->values(name).size() > 1)
            std::abort();
    if (read->has("--n")) {
        const long long n = read->integer("--n", -100);
        if (n < -5 || n > (1LL << 40))
            std::abort();
    }
    if (read->has("--x")) {
        const double x = read->real("--x", -1.0);
        if (!(x > 0.0 && x <= 20.0))
            std::abort();
    }
    if (read->has("--law") && read->value("--law") != "beta" && read->value("--law") != "gauss")
        std::abort();
    return 0;
}
