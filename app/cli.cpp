// SPDX-License-Identifier: GPL-3.0-or-later
// The option reader: every command's words are read and refused here, one way, one line each.
#include "app/cli.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace kvlens::app::cli {

namespace {

std::string formatReal(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

/// "a, b or c".
std::string listInWords(const std::vector<std::string>& items)
{
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i)
        out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
    return out;
}

/// "two", for counts in messages ("needs two run directories").
std::string countInWords(int n)
{
    static const char* const kWords[] = {"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};
    return n >= 0 && n <= 10 ? kWords[n] : std::to_string(n);
}

bool isBlank(const std::string& text)
{
    return std::all_of(text.begin(), text.end(), [](unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

/// A word the reader takes for an option (not a value, not a positional): "--x", "-x", but not "-" or "-1".
bool looksLikeOption(const std::string& word)
{
    if (word.size() < 2 || word[0] != '-')
        return false;
    return !(std::isdigit(static_cast<unsigned char>(word[1])) || word[1] == '.');
}

/// The value of `option` checked against its kind, or why not.
Status checkValue(const Option& option, const std::string& value)
{
    if (value.empty() || isBlank(value))
        return Error{option.name, "needs a value (" + option.valueName + ")"};
    switch (option.kind) {
    case ValueKind::Integer:
        if (auto v = parseInteger(option.name, value, option.intLo, option.intHi); !v)
            return v.error();
        break;
    case ValueKind::Real:
        if (auto v = parseReal(option.name, value, option.realLo, option.realHi, option.realLoOpen); !v)
            return v.error();
        break;
    case ValueKind::Choice:
        if (std::find(option.choices.begin(), option.choices.end(), value) == option.choices.end())
            return Error{option.name, "must be " + listInWords(option.choices) + ", got '" + value + "'"};
        break;
    case ValueKind::None:
    case ValueKind::Text:
        break;
    }
    return Ok{};
}

/// The count of positional words checked against what the command takes.
Status checkPositionals(const Positionals& p, int count, const std::string& command)
{
    if (count < p.min) {
        if (p.min == p.max)
            return Error{"", "needs " + countInWords(p.min) + " " + p.what + ", got " + std::to_string(count)};
        if (count == 0)
            return Error{"", "no " + p.what + " given (see " + command + " --help)"};
        return Error{"", "needs at least " + countInWords(p.min) + " " + p.what + ", got " + std::to_string(count)};
    }
    if (p.max >= 0 && count > p.max)
        return Error{"", p.min == p.max ? "needs " + countInWords(p.max) + " " + p.what + ", got " + std::to_string(count)
                                        : "takes at most " + countInWords(p.max) + " " + p.what + ", got "
                                              + std::to_string(count)};
    return Ok{};
}

} // namespace

std::string Option::allowed() const
{
    switch (kind) {
    case ValueKind::Integer:
        return "an integer in [" + std::to_string(intLo) + ", " + std::to_string(intHi) + "]";
    case ValueKind::Real:
        return std::string("a number in ") + (realLoOpen ? "(" : "[") + formatReal(realLo) + ", " + formatReal(realHi) + "]";
    case ValueKind::Choice:
        return listInWords(choices);
    case ValueKind::None:
    case ValueKind::Text:
        break;
    }
    return {};
}

Option Option::isRequired() const
{
    Option o = *this;
    o.required = true;
    return o;
}

Option Option::isRepeatable() const
{
    Option o = *this;
    o.repeatable = true;
    return o;
}

Option Option::isHidden() const
{
    Option o = *this;
    o.hidden = true;
    return o;
}

Option Option::withAlias(std::string shortName) const
{
    Option o = *this;
    o.alias = std::move(shortName);
    return o;
}

Option flag(std::string name, std::string help)
{
    Option o;
    o.name = std::move(name);
    o.help = std::move(help);
    return o;
}

Option text(std::string name, std::string valueName, std::string help)
{
    Option o = flag(std::move(name), std::move(help));
    o.valueName = std::move(valueName);
    o.kind = ValueKind::Text;
    return o;
}

Option integer(std::string name, std::string valueName, long long lo, long long hi, std::string help)
{
    Option o = text(std::move(name), std::move(valueName), std::move(help));
    o.kind = ValueKind::Integer;
    o.intLo = lo;
    o.intHi = hi;
    return o;
}

Option real(std::string name, std::string valueName, double lo, double hi, std::string help, bool loOpen)
{
    Option o = text(std::move(name), std::move(valueName), std::move(help));
    o.kind = ValueKind::Real;
    o.realLo = lo;
    o.realHi = hi;
    o.realLoOpen = loOpen;
    return o;
}

Option choice(std::string name, std::vector<std::string> choices, std::string help, std::string valueName)
{
    if (valueName.empty())
        for (const std::string& c : choices)
            valueName += (valueName.empty() ? "" : "|") + c;
    Option o = text(std::move(name), std::move(valueName), std::move(help));
    o.kind = ValueKind::Choice;
    o.choices = std::move(choices);
    return o;
}

const Option* Syntax::find(std::string_view name) const
{
    for (const Option& o : options)
        if (o.name == name || (!o.alias.empty() && o.alias == name))
            return &o;
    return nullptr;
}

bool Arguments::has(std::string_view option) const
{
    return std::any_of(m_options.begin(), m_options.end(), [&](const auto& entry) { return entry.first == option; });
}

std::string Arguments::value(std::string_view option, std::string fallback) const
{
    for (const auto& [name, values] : m_options)
        if (name == option && !values.empty())
            return values.back();
    return fallback;
}

std::vector<std::string> Arguments::values(std::string_view option) const
{
    for (const auto& [name, values] : m_options)
        if (name == option)
            return values;
    return {};
}

long long Arguments::integer(std::string_view option, long long fallback) const
{
    if (!has(option))
        return fallback;
    auto v = parseInteger(option, value(option), std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max());
    return v ? *v : fallback;
}

double Arguments::real(std::string_view option, double fallback) const
{
    if (!has(option))
        return fallback;
    auto v = parseReal(option, value(option), -HUGE_VAL, HUGE_VAL);
    return v ? *v : fallback;
}

std::vector<std::string> Arguments::given() const
{
    std::vector<std::string> names;
    for (const auto& entry : m_options)
        names.push_back(entry.first);
    return names;
}

Result<Arguments> read(const Syntax& syntax, const std::vector<std::string>& words, const std::string& command)
{
    Arguments a;
    std::optional<Error> refused; // the first refusal; --help later on still wins
    auto refuse = [&](Error e) {
        if (!refused)
            refused = std::move(e);
    };
    bool optionsEnded = false;
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& word = words[i];
        if (!optionsEnded && (word == "--help" || word == "-h")) {
            a.m_help = true;
            continue;
        }
        if (!optionsEnded && word == "--") {
            optionsEnded = true;
            continue;
        }
        if (optionsEnded || !looksLikeOption(word)) {
            if (syntax.positionals.max == 0 && !refused)
                refuse(Error{"", "unexpected argument '" + word + "' (options start with --; see " + command + " --help)"});
            a.m_positionals.push_back(word);
            continue;
        }
        const std::size_t eq = word.rfind("--", 0) == 0 ? word.find('=') : std::string::npos;
        const std::string name = word.substr(0, eq);
        const Option* option = syntax.find(name);
        if (!option) {
            refuse(Error{name, "unknown option (see " + command + " --help)"});
            continue;
        }
        std::string value;
        if (!option->takesValue()) {
            if (eq != std::string::npos)
                refuse(Error{option->name, "takes no value, got '" + word.substr(eq + 1) + "'"});
        } else if (eq != std::string::npos) {
            value = word.substr(eq + 1);
        } else if (i + 1 >= words.size()) {
            refuse(Error{option->name, "needs a value (" + option->valueName + ")"});
            continue;
        } else if (const std::string& next = words[i + 1]; syntax.find(next) || next == "--help" || next == "-h") {
            // `--out --quiet` forgot the directory; taking "--quiet" as one would hide that.
            refuse(Error{option->name, "needs a value (" + option->valueName + "), got the option " + next});
            continue;
        } else {
            value = words[++i];
        }
        if (option->takesValue())
            if (auto ok = checkValue(*option, value); !ok)
                refuse(ok.error());
        auto entry = std::find_if(a.m_options.begin(), a.m_options.end(), [&](const auto& e) { return e.first == option->name; });
        if (entry != a.m_options.end() && !option->repeatable) {
            refuse(Error{option->name, "is given twice; give it once"});
            continue;
        }
        if (entry == a.m_options.end())
            entry = a.m_options.insert(a.m_options.end(), {option->name, {}});
        if (option->takesValue())
            entry->second.push_back(value);
    }
    if (a.m_help)
        return a;
    if (refused)
        return *refused;
    if (auto ok = checkPositionals(syntax.positionals, static_cast<int>(a.m_positionals.size()), command); !ok)
        return ok.error();
    for (const Option& o : syntax.options)
        if (o.required && !a.has(o.name))
            return Error{"", o.name + " " + o.valueName + " is required"};
    return a;
}

Result<long long> parseInteger(std::string_view option, std::string_view text, long long lo, long long hi)
{
    long long v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
        return Error{std::string(option), "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi)
                                              + "], got '" + std::string(text) + "'"};
    return v;
}

Result<double> parseReal(std::string_view option, std::string_view text, double lo, double hi, bool loOpen)
{
    double v = 0.0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    const bool inRange = std::isfinite(v) && (loOpen ? v > lo : v >= lo) && v <= hi;
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !inRange)
        return Error{std::string(option), std::string("must be a number in ") + (loOpen ? "(" : "[") + formatReal(lo) + ", "
                                              + formatReal(hi) + "], got '" + std::string(text) + "'"};
    return v;
}

std::string wrap(std::string_view text, int indent, int width)
{
    std::string out;
    int column = indent; // the first line starts there too, after whatever precedes it
    std::size_t at = 0;
    while (at < text.size()) {
        const std::size_t end = std::min(text.find(' ', at), text.size());
        const std::string_view word = text.substr(at, end - at);
        if (column > indent && column + 1 + static_cast<int>(word.size()) > width) {
            out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
            column = indent;
        } else if (column > indent) {
            out += ' ';
            ++column;
        }
        out += word;
        column += static_cast<int>(word.size());
        at = end + 1;
    }
    return out;
}

std::string optionsHelp(const Syntax& syntax, const std::function<std::string(const Option&)>& note)
{
    constexpr int kIndent = 26;
    std::string out;
    auto entry = [&](std::string left, const std::string& help) {
        left = "  " + left;
        if (left.size() + 2 > kIndent)
            left += "\n" + std::string(kIndent, ' ');
        else
            left.append(kIndent - left.size(), ' ');
        out += left + wrap(help, kIndent) + "\n";
    };
    if (!syntax.positionals.valueName.empty())
        entry(syntax.positionals.valueName, syntax.positionals.help);
    for (const Option& o : syntax.options) {
        if (o.hidden)
            continue;
        std::string left = (o.alias.empty() ? "" : o.alias + ", ") + o.name;
        if (o.takesValue())
            left += " " + o.valueName;
        std::string help = o.help;
        const bool choicesShown = o.kind == ValueKind::Choice && o.valueName.find('|') != std::string::npos;
        if (o.kind == ValueKind::Integer || o.kind == ValueKind::Real || (o.kind == ValueKind::Choice && !choicesShown))
            help += "; " + o.allowed();
        if (o.repeatable)
            help += "; may be given more than once";
        if (note)
            help += note(o);
        entry(left, help);
    }
    entry("-h, --help", "print this help and exit");
    return out;
}

} // namespace kvlens::app::cli
