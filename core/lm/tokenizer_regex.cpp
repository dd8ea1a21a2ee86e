// SPDX-License-Identifier: GPL-3.0-or-later
// PCRE2 behind the pre-tokenizers: compiling with Unicode classes, and bounded left-to-right matching.
#include "core/lm/tokenizer_regex.h"

#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_unicode.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace kvlens::lm {

namespace {

/// PCRE2's heap limit for one search, in KiB (backtracking frames of the interpreter).
constexpr std::uint32_t kRegexHeapLimitKiB = 64 * 1024;
/// The JIT stack grows to this many bytes at most.
constexpr std::size_t kJitStackBytes = 1 << 20;

std::string pcre2Message(int code)
{
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
    if (n < 0)
        return "PCRE2 error " + std::to_string(code);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

} // namespace

SplitRegex::~SplitRegex()
{
    pcre2_code_free(static_cast<pcre2_code*>(m_code));
}

Result<std::shared_ptr<const SplitRegex>> SplitRegex::compile(std::string_view pattern, bool literal,
                                                              const std::string& what)
{
    if (pattern.size() > kMaxRegexPatternBytes)
        return Error{what, "the pattern is " + std::to_string(pattern.size()) + " bytes, above the cap of "
                               + std::to_string(kMaxRegexPatternBytes)};
    if (const auto bad = firstInvalidUtf8(pattern))
        return Error{what, "the pattern is not valid UTF-8 (byte " + std::to_string(*bad) + ")"};
    int errorCode = 0;
    PCRE2_SIZE errorOffset = 0;
    // PCRE2_LITERAL admits PCRE2_UTF but not PCRE2_UCP (which a literal does not need).
    const std::uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &errorCode,
                                     &errorOffset, nullptr);
    if (code == nullptr)
        return Error{what, "the pattern " + io::quoteName(pattern) + " does not compile: " + pcre2Message(errorCode)
                               + " (at byte " + std::to_string(errorOffset) + ")"};
    // JIT is an optimisation: where it fails (no JIT on this platform), the interpreter runs.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD); // findAll, findOpen
    std::shared_ptr<SplitRegex> regex(new SplitRegex);
    regex->m_code = code;
    regex->m_what = what;
    regex->m_pattern.assign(pattern);
    std::uint32_t lookbehind = 1, minLength = 0;
    if (pcre2_pattern_info(code, PCRE2_INFO_MAXLOOKBEHIND, &lookbehind) == 0
        && pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &minLength) == 0)
        regex->m_streamable = lookbehind == 0 && minLength > 0;
    return std::shared_ptr<const SplitRegex>(std::move(regex));
}

Result<int> SplitRegex::searchAt(std::string_view subject, std::size_t start, std::uint32_t options,
                                 RegexScratch& scratch, RegexMatch& match) const
{
    auto* data = static_cast<pcre2_match_data*>(scratch.m_matchData);
    // The subject was checked as UTF-8 once, by the caller.
    const int rc = pcre2_match(static_cast<pcre2_code*>(m_code), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                               subject.size(), start, options | PCRE2_NO_UTF_CHECK, data,
                               static_cast<pcre2_match_context*>(scratch.m_context));
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && rc != PCRE2_ERROR_PARTIAL)
        return Error{m_what, "the pattern " + io::quoteName(m_pattern) + ": matching gave up at byte " + std::to_string(start)
                                 + " of a " + std::to_string(subject.size()) + "-byte piece of text: " + pcre2Message(rc)};
    if (rc == PCRE2_ERROR_NOMATCH)
        return rc;
    // rc == 0: the match succeeded but the ovector (one pair) cannot hold the pattern's groups.
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    match = {ovector[0], ovector[1]};
    if (match.begin > match.end || match.end > subject.size()) // \K inside a lookahead can report such a match
        return Error{m_what, "the pattern " + io::quoteName(m_pattern)
                                 + " reported a match ending before it starts (\\K in a lookaround)"};
    return rc;
}

Status SplitRegex::findAll(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out,
                           const std::function<bool()>& cancelled) const
{
    const std::size_t n = subject.size();
    std::size_t start = 0;
    bool havePrevious = false;
    std::size_t previousEnd = 0;
    for (std::size_t searches = 1; start <= n; ++searches) {
        if (searches % kRegexPollEvery == 0 && cancelled && cancelled())
            return Error::cancellation(m_what);
        RegexMatch m;
        auto rc = searchAt(subject, start, 0, scratch, m);
        if (!rc)
            return rc.error();
        if (*rc == PCRE2_ERROR_NOMATCH)
            break;
        const bool empty = m.begin == m.end;
        if (!(empty && havePrevious && previousEnd == m.end))
            out.push_back(m);
        havePrevious = true;
        previousEnd = m.end;
        if (!empty) {
            start = m.end;
            continue;
        }
        if (m.end >= n)
            break;
        std::size_t next = m.end;
        decodeUtf8(subject, next);
        start = next;
    }
    return Ok{};
}

Status SplitRegex::findOpen(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out,
                            OpenEnd& end, const std::function<bool()>& cancelled) const
{
    // streamable(): no empty matches, so each search starts where the last match ended.
    std::size_t start = 0;
    for (std::size_t searches = 1;; ++searches) {
        if (searches % kRegexPollEvery == 0 && cancelled && cancelled())
            return Error::cancellation(m_what);
        RegexMatch m;
        auto rc = searchAt(subject, start, PCRE2_PARTIAL_HARD, scratch, m);
        if (!rc)
            return rc.error();
        if (*rc == PCRE2_ERROR_NOMATCH || *rc == PCRE2_ERROR_PARTIAL || m.begin == m.end) {
            end = {start, *rc == PCRE2_ERROR_NOMATCH ? subject.size() : std::max(start, m.begin)};
            return Ok{};
        }
        out.push_back(m);
        start = m.end;
    }
}

RegexScratch::RegexScratch()
{
    m_matchData = pcre2_match_data_create(1, nullptr);
    auto* context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context, kRegexMatchLimit);
    pcre2_set_heap_limit(context, kRegexHeapLimitKiB);
    m_jitStack = pcre2_jit_stack_create(32 * 1024, kJitStackBytes, nullptr);
    if (m_jitStack != nullptr)
        pcre2_jit_stack_assign(context, nullptr, static_cast<pcre2_jit_stack*>(m_jitStack));
    m_context = context;
}

RegexScratch::~RegexScratch()
{
    pcre2_match_data_free(static_cast<pcre2_match_data*>(m_matchData));
    pcre2_match_context_free(static_cast<pcre2_match_context*>(m_context));
    pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(m_jitStack));
}

} // namespace kvlens::lm
