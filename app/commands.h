// SPDX-License-Identifier: GPL-3.0-or-later
// The command table: one row per subcommand and per main mode (the window, --batch, --reproduce,
// ...), each with its options, whether it needs a QApplication and the function that runs it.
#pragma once

#include "app/cli.h"
#include "widgets/figure_export.h"

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace kvlens::app {

/// Whether a row needs a QApplication: figures are drawn with Qt's widgets and fonts, the window
/// is one; the rest is plain C++.
enum class NeedsApplication {
    No,         ///< codebook, capture, --list-devices, --version
    ForFigures, ///< merge, compare, eval, --batch: unless --no-figures
    Yes,        ///< the window, --reproduce (its report embeds figures whatever --no-figures says)
};

/// One row of the command table.
struct Command {
    std::string word;     ///< a subcommand's word ("eval"); empty for a main mode, which its options select
    std::string label;    ///< a main mode as hints list it ("--batch EVAL.json", "the window")
    std::string refusal;  ///< a main mode in refusals: "an evaluation (EVAL.json)" does not take --shard
    std::string usage;    ///< the synopsis ("kvlens compare DIR_A DIR_B --out DIR [...]")
    std::string summary;  ///< what it does, for kvlens --help and the command's own --help
    cli::Syntax syntax;
    NeedsApplication application = NeedsApplication::No;
    bool headless = true; ///< draws nothing on a screen (all but the window): the offscreen platform will do
    /// Options the row does not take yet but will (refused with "yet": --shard for an evaluation).
    std::vector<std::string> notYet;
    std::function<int(const cli::Arguments&, std::ostream& out, std::ostream& err)> run;

    /// True when this run needs a QApplication (ForFigures: unless --no-figures).
    bool needsApplication(const cli::Arguments& args) const;
    /// "kvlens eval" for a subcommand, "kvlens" for a main mode: how refusals and hints name it.
    std::string prefix() const;
};

/// The subcommands (codebook, capture, eval, merge, compare), in the order --help lists them.
const std::vector<Command>& subcommands();
/// The main modes, chosen by an option rather than a word: the window (name ""), --batch on an
/// experiment spec, --batch on an eval spec, --reproduce, --list-devices, --version.
const std::vector<Command>& modes();
/// Every option a main mode takes (their union), for reading before the mode is known.
const cli::Syntax& mainSyntax();

/// What the command line asks for, read and checked: the row and its arguments; or, with no row,
/// the exit status after --help, --version's text or a refusal (already printed).
struct Invocation {
    const Command* command = nullptr;
    cli::Arguments arguments;
    std::vector<std::string> qtArguments; ///< Qt's own (-platform NAME, -style S ...), for the QApplication
    int exitStatus = 0;
};

/// Reads `words` (argv without the program): a subcommand's row by its word, else the main mode the
/// options select; prints --help (the overview, or the command's options) on `out`, and a refusal
/// on `err` in one line (`kvlens CMD: --option: message`). Qt's own options are taken out only for
/// rows that may create a QApplication.
Invocation readCommandLine(const std::vector<std::string>& words, std::ostream& out, std::ostream& err);

/// `kvlens NAME WORDS...` for a subcommand or `kvlens WORDS...` for a main mode (NAME empty),
/// read and run as main does but without creating a QApplication: for rows that need none (and tests).
int runCommandLine(const std::string& name, const std::vector<std::string>& words, std::ostream& out,
                   std::ostream& err);

/// The figure options (--width, --dpi, --font-family, --font-size) as export options. Without
/// figures (`figures` false) any of them is refused: it would do nothing. Checking the font family
/// needs the QApplication.
Result<widgets::ExportOptions> figureOptions(const cli::Arguments& args, bool figures);

} // namespace kvlens::app
