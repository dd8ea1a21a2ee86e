// SPDX-License-Identifier: GPL-3.0-or-later
// The one option reader of the command line: a command's options as a table, read, checked and
// described for --help the same way for every command (git's and llama.cpp's option tables).
#pragma once

#include "core/common/result.h"

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvlens::app::cli {

/// What an option's value must be; the reader checks it, so a command reads only valid values.
enum class ValueKind {
    None,    ///< a flag: no value
    Text,    ///< any non-empty text (a path, a list the command parses)
    Integer, ///< an integer in [intLo, intHi]
    Real,    ///< a number in [realLo, realHi] ((realLo, realHi] with realLoOpen)
    Choice,  ///< one of `choices`
};

/// One row of a command's option table: how the option is spelled, what value it takes, its line
/// in --help, and whether it may be given more than once.
struct Option {
    std::string name;       ///< "--out"
    std::string valueName;  ///< "DIR" in the help text; empty for a flag
    std::string help;       ///< what it does, for --help
    ValueKind kind = ValueKind::None;
    long long intLo = 0, intHi = 0;
    double realLo = 0.0, realHi = 0.0;
    bool realLoOpen = false;
    std::vector<std::string> choices;
    std::string alias;        ///< a short spelling ("-v"), or empty
    bool repeatable = false;  ///< every value is kept (--meta KEY=VALUE ...); otherwise a repeat is refused
    bool required = false;    ///< refused when absent ("--out DIR is required")
    bool hidden = false;      ///< read but left out of --help (options for tests)

    bool takesValue() const { return kind != ValueKind::None; }
    /// The allowed values in words: "an integer in [1, 8]", "beta or gauss", "" for text and flags.
    std::string allowed() const;

    /// Copies with one property changed, for building tables: text("--out", ...).isRequired().
    Option isRequired() const;
    Option isRepeatable() const;
    Option isHidden() const;
    Option withAlias(std::string shortName) const;
};

/// A flag (`--quiet`).
Option flag(std::string name, std::string help);
/// An option taking any non-empty text (`--out DIR`).
Option text(std::string name, std::string valueName, std::string help);
/// An option taking an integer in [lo, hi].
Option integer(std::string name, std::string valueName, long long lo, long long hi, std::string help);
/// An option taking a real number in [lo, hi], or (lo, hi] when `loOpen`.
Option real(std::string name, std::string valueName, double lo, double hi, std::string help, bool loOpen = false);
/// An option taking one of `choices`; its value name lists them ("beta|gauss") unless `valueName`
/// is given (a long list: "ID", and --help lists the choices).
Option choice(std::string name, std::vector<std::string> choices, std::string help, std::string valueName = {});

/// The words of a command that are not options: how many it takes and what they are.
struct Positionals {
    std::string valueName;  ///< "DIR_A DIR_B", "DIR_0 ... DIR_{n-1}" in the help text; empty: none taken
    std::string what;       ///< "run directories", for messages ("needs two run directories, got 1")
    std::string help;       ///< their line in --help
    int min = 0;
    int max = 0;            ///< < 0: no limit
};

/// A command's whole syntax: its options and positional words.
struct Syntax {
    std::vector<Option> options;
    Positionals positionals;

    /// The option spelled `name` (or its alias), or null.
    const Option* find(std::string_view name) const;
};

/// What the reader found: each option's values in the order given, and the positional words.
/// Values of Integer, Real and Choice options were checked against their range when read.
class Arguments {
public:
    /// True when the option was given.
    bool has(std::string_view option) const;
    /// The option's value (a repeatable option: its last), or `fallback` when it was not given.
    std::string value(std::string_view option, std::string fallback = {}) const;
    /// Every value of the option in the order given (empty when not given).
    std::vector<std::string> values(std::string_view option) const;
    /// An Integer option's value, or `fallback`.
    long long integer(std::string_view option, long long fallback) const;
    /// A Real option's value, or `fallback`.
    double real(std::string_view option, double fallback) const;
    /// The positional words, in order.
    const std::vector<std::string>& positionals() const { return m_positionals; }
    /// The options given, each once, in the order first given.
    std::vector<std::string> given() const;
    /// --help or -h was among the options: print the usage, exit 0.
    bool helpRequested() const { return m_help; }

private:
    friend Result<Arguments> read(const Syntax&, const std::vector<std::string>&, const std::string&);
    std::vector<std::pair<std::string, std::vector<std::string>>> m_options;
    std::vector<std::string> m_positionals;
    bool m_help = false;
};

/// Reads `words` (the words after the command) against `syntax`. Refused, naming the option: an
/// unknown option (pointing to `command --help`), an option given twice that is not repeatable, a
/// missing or empty value (or the next option where a value belongs), a flag given a value, a value
/// outside its kind's range; and too few or too many positional words, a required option missing.
/// `--help` or `-h` anywhere wins over every refusal (helpRequested). `--` ends the options;
/// `--name=value` is `--name value`. `command` names the command in hints ("kvlens eval").
Result<Arguments> read(const Syntax& syntax, const std::vector<std::string>& words, const std::string& command);

/// `text` as an integer in [lo, hi], or an Error naming `option` and the range:
/// "--ctx: must be an integer in [4, 131072], got '0'".
Result<long long> parseInteger(std::string_view option, std::string_view text, long long lo, long long hi);
/// `text` as a real number in [lo, hi] ((lo, hi] with `loOpen`), or an Error naming `option` and the range.
Result<double> parseReal(std::string_view option, std::string_view text, double lo, double hi, bool loOpen = false);

/// The options of `syntax` for --help: one entry per option (hidden ones left out), its spelling and
/// value, then its help, allowed values and `note(option)` (when given) wrapped at 100 columns
/// under a 26-column indent.
std::string optionsHelp(const Syntax& syntax, const std::function<std::string(const Option&)>& note = {});
/// `text` wrapped at `width` columns for a place that starts at column `indent`: every line after
/// the first is indented by `indent` spaces.
std::string wrap(std::string_view text, int indent, int width = 100);

} // namespace kvlens::app::cli
