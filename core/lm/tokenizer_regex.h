// SPDX-License-Identifier: GPL-3.0-or-later
// The pre-tokenizers' regular expressions (PCRE2, Unicode classes, lookahead) with limits that keep a hostile pattern or text from hanging.
#pragma once

#include "core/common/result.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvlens::lm {

/// Longest pattern accepted (the pre-tokenizer patterns in use are under 200 bytes).
inline constexpr std::size_t kMaxRegexPatternBytes = 4096;
/// PCRE2's match limit for one search (backtracking steps), Oniguruma's default retry limit (what
/// Hugging Face's tokenizers runs under). The pre-tokenizer patterns in use take a few steps per
/// character of a match, more only where a pattern backs off over a run of white space (Llama 3's
/// \s*[\r\n]+ walks back over every space of a run with no newline): runs of a few million
/// spaces are refused. A catastrophic pattern such as (a+)+$ hits the limit in well under a second;
/// each search is bounded so, and a cancellation is polled between searches, so a hostile pattern
/// can make a long text slow but never deaf to a cancel.
inline constexpr std::uint32_t kRegexMatchLimit = 10'000'000;
/// findAll polls its cancellation callback every this many searches.
inline constexpr std::size_t kRegexPollEvery = 256;

/// One match: bytes [begin, end) of the subject.
struct RegexMatch {
    std::size_t begin = 0;
    std::size_t end = 0;
};

class RegexScratch;

/// A compiled pattern, with UTF-8 and Unicode properties (PCRE2_UTF | PCRE2_UCP: \p{L}, \p{N},
/// and \s, \w over all of Unicode) and JIT-compiled where the platform allows. Immutable: shared by
/// threads, each with its own RegexScratch. PCRE2's \s counts U+0085 (NEL) and not U+FEFF, as
/// Oniguruma (Hugging Face tokenizers: \s is 9-13, U+0085, Zs, Zl, Zp) and Python's regex (GPT-2's
/// encoder.py) do; JavaScript ports differ on both, so their ids differ from these where such
/// characters meet white space. One known difference from Oniguruma: PCRE2 10.42 also counts U+180E
/// (MONGOLIAN VOWEL SEPARATOR, Cf since Unicode 6.3) as white space.
class SplitRegex {
public:
    ~SplitRegex();
    SplitRegex(const SplitRegex&) = delete;
    SplitRegex& operator=(const SplitRegex&) = delete;

    /// Compiles `pattern` (a regular expression, or a literal string when `literal`). Refused with
    /// an error naming `what` (the JSON key it came from): longer than kMaxRegexPatternBytes, not
    /// valid UTF-8, or not compilable (PCRE2's message and the offset).
    static Result<std::shared_ptr<const SplitRegex>> compile(std::string_view pattern, bool literal,
                                                             const std::string& what);

    /// Appends to `out` every match in `subject` (well-formed UTF-8), left to right, the way
    /// Oniguruma's find_iter (what Hugging Face tokenizers uses) walks a string: each search starts
    /// where the previous match ended; an empty match moves the next search one character on, and an
    /// empty match right at the end of the previous match is skipped. Refused (naming `what`, the
    /// pattern and the byte offset) when PCRE2 gives up: the match limit, its heap limit, or the JIT
    /// stack. `cancelled` (may be empty) is polled every kRegexPollEvery searches.
    Status findAll(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out,
                   const std::function<bool()>& cancelled = {}) const;

    /// Where findOpen stopped: positions [gapFrom, gapTo) of the subject start no match whatever
    /// follows it; from gapTo on (gapTo == the subject's size when nothing was found) a match may
    /// start once more text is known.
    struct OpenEnd {
        std::size_t gapFrom = 0;
        std::size_t gapTo = 0;
    };
    /// findAll for a subject that more text may follow (PCRE2_PARTIAL_HARD): appends the matches
    /// that no continuation can change, and stops at the first search whose outcome depends on what
    /// follows (a match that reached the end, a lookahead past it). Only for streamable() patterns.
    Status findOpen(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out, OpenEnd& end,
                    const std::function<bool()>& cancelled = {}) const;
    /// True when restarting the search at the end of a match (or where a match starts after a gap)
    /// gives the same later matches as continuing: the pattern looks behind no character (PCRE2's
    /// maximum lookbehind is 0: no \b, no (?<=)) and never matches the empty string.
    bool streamable() const { return m_streamable; }

    const std::string& what() const { return m_what; }

private:
    SplitRegex() = default;
    friend class RegexScratch;
    /// One search from `start`; rc as pcre2_match returns it, the match in `match`.
    Result<int> searchAt(std::string_view subject, std::size_t start, std::uint32_t options, RegexScratch& scratch,
                         RegexMatch& match) const;

    void* m_code = nullptr; // pcre2_code_8*
    std::string m_what;
    std::string m_pattern;
    bool m_streamable = false;
};

/// Per-thread matching state (PCRE2 match data, match context with the limits, JIT stack): create
/// one per encode call.
class RegexScratch {
public:
    RegexScratch();
    ~RegexScratch();
    RegexScratch(const RegexScratch&) = delete;
    RegexScratch& operator=(const RegexScratch&) = delete;

private:
    friend class SplitRegex;
    void* m_matchData = nullptr; // pcre2_match_data_8*
    void* m_context = nullptr;   // pcre2_match_context_8*
    void* m_jitStack = nullptr;  // pcre2_jit_stack_8*
};

} // namespace kvlens::lm
