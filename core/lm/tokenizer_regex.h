// SPDX-License-Identifier: GPL-3.0-or-later
// The pre-tokenizers' regular expressions (PCRE2, Unicode classes, lookahead) with limits that keep a hostile pattern or text from hanging.
#pragma once

#include "core/common/result.h"

#include <cstddef>
#include <cstdint>
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
/// each search is bounded so, though a hostile pattern can still make a long text slow.
inline constexpr std::uint32_t kRegexMatchLimit = 10'000'000;

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
    /// empty match right at the end of the previous match is skipped. Refused (naming `what` and the
    /// byte offset) when PCRE2 gives up: the match limit, its heap limit, or the JIT stack.
    Status findAll(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out) const;

    const std::string& what() const { return m_what; }

private:
    SplitRegex() = default;
    friend class RegexScratch;
    void* m_code = nullptr; // pcre2_code_8*
    std::string m_what;
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
