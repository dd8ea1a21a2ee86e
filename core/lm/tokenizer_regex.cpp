// SPDX-License-Identifier: GPL-3.0-or-later
// PCRE2 behind the pre-tokenizers: compiling with Unicode classes, and bounded left-to-right matching.
#include "core/lm/tokenizer_regex.h"

#include "core/io/tensor_file.h"
#include "core/lm/tokenizer_unicode.h"

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
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    std::shared_ptr<SplitRegex> regex(new SplitRegex);
    regex->m_code = code;
    regex->m_what = what;
    return std::shared_ptr<const SplitRegex>(std::move(regex));
}

Status SplitRegex::findAll(std::string_view subject, RegexScratch& scratch, std::vector<RegexMatch>& out) const
{
    auto* code = static_cast<pcre2_code*>(m_code);
    auto* data = static_cast<pcre2_match_data*>(scratch.m_matchData);
    auto* context = static_cast<pcre2_match_context*>(scratch.m_context);
    const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
    const std::size_t n = subject.size();
    std::size_t start = 0;
    bool havePrevious = false;
    std::size_t previousEnd = 0;
    while (start <= n) {
        // The subject was checked as UTF-8 once, by the caller.
        const int rc = pcre2_match(code, text, n, start, PCRE2_NO_UTF_CHECK, data, context);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return Error{m_what, "matching gave up at byte " + std::to_string(start) + " of a "
                                     + std::to_string(n) + "-byte piece of text: " + pcre2Message(rc)};
        // rc == 0: the match succeeded but the ovector (one pair) cannot hold the pattern's groups.
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
        const std::size_t begin = ovector[0], end = ovector[1];
        if (begin > end || end > n) // \K inside a lookahead can report such a match: refuse it
            return Error{m_what, "the pattern reported a match ending before it starts (\\K in a lookaround)"};
        const bool empty = begin == end;
        if (!(empty && havePrevious && previousEnd == end))
            out.push_back({begin, end});
        havePrevious = true;
        previousEnd = end;
        if (!empty) {
            start = end;
            continue;
        }
        if (end >= n)
            break;
        std::size_t next = end;
        decodeUtf8(subject, next);
        start = next;
    }
    return Ok{};
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
