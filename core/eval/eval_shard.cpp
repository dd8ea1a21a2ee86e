// SPDX-License-Identifier: GPL-3.0-or-later
// eval_shard.bin and manifest.json: an evaluation's results, written and read back bit for bit, and
// the merge of a run's shards.
#include "core/eval/eval_shard.h"

#include "core/common/hash.h"
#include "core/io/json_text.h"
#include "core/spec/eval_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <set>

namespace kvlens::eval {

using nlohmann::json;

namespace {

constexpr std::string_view kMagic = "KVLEVAL1";
constexpr std::uint32_t kFormatVersion = 2; // 2: where the forward ran (EvalResult::forward), after the forward timings
constexpr const char* kManifestFormat = "kvlens-eval-shard";

/// Little-endian writer.
class Writer {
public:
    void u32(std::uint32_t v) { raw(v); }
    void i32(std::int32_t v) { raw(static_cast<std::uint32_t>(v)); }
    void u64(std::uint64_t v) { raw(v); }
    void f32(float v) { raw(std::bit_cast<std::uint32_t>(v)); }
    void f64(double v) { raw(std::bit_cast<std::uint64_t>(v)); }
    void text(const std::string& s)
    {
        u64(s.size());
        m_out += s;
    }
    std::string& out() { return m_out; }

private:
    template <class T>
    void raw(T v)
    {
        for (std::size_t i = 0; i < sizeof(T); ++i)
            m_out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    std::string m_out;
};

/// Little-endian reader over untrusted bytes: every read and every count is checked against what is left.
class Reader {
public:
    Reader(std::string_view bytes, const std::string& label) : m_bytes(bytes), m_label(label) {}

    bool ok() const { return m_error.empty(); }
    const std::string& error() const { return m_error; }

    std::uint32_t u32() { return static_cast<std::uint32_t>(raw(4)); }
    std::int32_t i32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(raw(4))); }
    std::uint64_t u64() { return raw(8); }
    float f32() { return std::bit_cast<float>(static_cast<std::uint32_t>(raw(4))); }
    double f64() { return std::bit_cast<double>(raw(8)); }
    std::string text()
    {
        const std::uint64_t n = u64();
        if (!ok() || n > left()) {
            fail("a string of " + std::to_string(n) + " bytes runs past the end");
            return {};
        }
        std::string s(m_bytes.substr(m_at, static_cast<std::size_t>(n)));
        m_at += static_cast<std::size_t>(n);
        return s;
    }
    /// A count of items needing at least `minBytes` each: refused when the bytes left cannot hold them.
    std::size_t count(std::uint64_t minBytes, std::uint64_t limit, const char* what)
    {
        const std::uint64_t n = u64();
        if (ok() && (n > limit || n * std::max<std::uint64_t>(1, minBytes) > left()))
            fail(std::string(what) + ": " + std::to_string(n) + " entries cannot fit the " + std::to_string(left())
                 + " bytes left");
        return ok() ? static_cast<std::size_t>(n) : 0;
    }
    void fail(const std::string& message)
    {
        if (m_error.empty())
            m_error = message + " (at byte " + std::to_string(m_at) + ")";
    }
    std::uint64_t left() const { return m_bytes.size() - m_at; }
    std::size_t at() const { return m_at; }

private:
    std::uint64_t raw(std::size_t n)
    {
        if (!ok() || left() < n) {
            fail("the file ends early");
            return 0;
        }
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v |= static_cast<std::uint64_t>(static_cast<unsigned char>(m_bytes[m_at + i])) << (8 * i);
        m_at += n;
        return v;
    }
    std::string_view m_bytes;
    std::string m_label;
    std::size_t m_at = 0;
    std::string m_error;
};

constexpr std::uint64_t kMaxItems = 1ull << 32;

void writeTop(Writer& w, const TopTokens& top)
{
    for (const TopToken& t : top) {
        w.i32(t.token);
        w.f32(t.probability);
    }
}

TopTokens readTop(Reader& r)
{
    TopTokens top{};
    for (TopToken& t : top) {
        t.token = r.i32();
        t.probability = r.f32();
    }
    return top;
}

void writeConfiguration(Writer& w, const ConfigurationResult& c)
{
    w.i32(c.scheme);
    w.i32(c.budget);
    w.i32(c.seedIndex);
    w.text(c.name);
    w.f64(c.bitsK);
    w.f64(c.bitsV);
    w.f64(c.cacheShareK);
    w.f64(c.cacheShareV);
    w.text(c.queryConversion);
    w.u64(c.tokens.size());
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
        const lm::TokenStat& t = c.tokens[i];
        w.f64(t.nllBase);
        w.f64(t.nllQ);
        w.f64(t.kld);
        w.f64(t.deltaP);
        w.i32(t.topBase);
        w.i32(t.topQ);
        writeTop(w, i < c.top.size() ? c.top[i] : TopTokens{});
        for (const float p : i < c.proxies.size() ? c.proxies[i] : TokenProxies{})
            w.f32(p);
    }
}

/// Bytes of one token of a configuration: four doubles, two ids, five (id, p), seven proxies.
constexpr std::uint64_t kConfigTokenBytes = 4 * 8 + 2 * 4 + kTopTokens * 8 + kTokenProxyCount * 4;

ConfigurationResult readConfiguration(Reader& r)
{
    ConfigurationResult c;
    c.scheme = r.i32();
    c.budget = r.i32();
    c.seedIndex = r.i32();
    c.name = r.text();
    c.bitsK = r.f64();
    c.bitsV = r.f64();
    c.cacheShareK = r.f64();
    c.cacheShareV = r.f64();
    c.queryConversion = r.text();
    const std::size_t n = r.count(kConfigTokenBytes, kMaxItems, "configuration tokens");
    c.tokens.resize(n);
    c.top.resize(n);
    c.proxies.resize(n);
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
        lm::TokenStat& t = c.tokens[i];
        t.nllBase = r.f64();
        t.nllQ = r.f64();
        t.kld = r.f64();
        t.deltaP = r.f64();
        t.topBase = r.i32();
        t.topQ = r.i32();
        c.top[i] = readTop(r);
        for (float& p : c.proxies[i])
            p = r.f32();
    }
    return c;
}

void writeBody(Writer& w, const EvalResult& e)
{
    w.text(e.modelSummary);
    w.text(e.tokenizer);
    for (int v : {e.layers, e.kvHeads, e.headDim, e.vocab, e.calibrationTokens, e.shardIndex, e.shardCount, e.threads})
        w.i32(v);
    w.u32(e.bos ? 1u : 0u);
    w.i32(e.bos.value_or(0));
    w.u64(e.modelHash);
    w.u64(e.tokensHash);
    w.f64(e.elapsedMs);
    w.f64(e.forwardMs);
    w.u64(static_cast<std::uint64_t>(e.forwardTokens));
    w.text(e.forward);
    w.u64(e.chunkIndices.size());
    for (int c : e.chunkIndices)
        w.i32(c);
    w.u64(e.scored.size());
    for (std::size_t i = 0; i < e.scored.size(); ++i) {
        const ScoredToken& s = e.scored[i];
        w.i32(s.chunk);
        w.i32(s.position);
        w.i32(s.token);
        w.i32(s.next);
        w.text(i < e.tokenText.size() ? e.tokenText[i] : std::string());
        writeTop(w, i < e.topBase.size() ? e.topBase[i] : TopTokens{});
        w.f64(i < e.referenceNll.size() ? e.referenceNll[i] : 0.0);
    }
    w.u64(e.configurations.size());
    for (const ConfigurationResult& c : e.configurations)
        writeConfiguration(w, c);
    w.u64(e.attribution.size());
    for (std::size_t a = 0; a < e.attribution.size(); ++a) {
        const AttributionRow& row = e.attribution[a];
        w.i32(row.configuration);
        w.i32(row.layer);
        w.i32(row.kvHead);
        w.i32(static_cast<std::int32_t>(row.path));
        const auto& tokens = a < e.attributionTokens.size() ? e.attributionTokens[a] : std::vector<AttributionToken>{};
        w.u64(tokens.size());
        for (const AttributionToken& t : tokens) {
            w.f64(t.kld);
            w.u32(t.sameTop ? 1u : 0u);
        }
    }
}

void readScored(Reader& r, EvalResult& e)
{
    const std::size_t n = r.count(16 + 8 + kTopTokens * 8 + 8, kMaxItems, "scored tokens");
    e.scored.resize(n);
    e.tokenText.resize(n);
    e.topBase.resize(n);
    e.referenceNll.resize(n);
    for (std::size_t i = 0; i < n && r.ok(); ++i) {
        ScoredToken& s = e.scored[i];
        s.chunk = r.i32();
        s.position = r.i32();
        s.token = r.i32();
        s.next = r.i32();
        e.tokenText[i] = r.text();
        e.topBase[i] = readTop(r);
        e.referenceNll[i] = r.f64();
    }
}

void readAttribution(Reader& r, EvalResult& e)
{
    const std::size_t rows = r.count(24, kMaxItems, "attribution rows");
    e.attribution.resize(rows);
    e.attributionTokens.resize(rows);
    for (std::size_t a = 0; a < rows && r.ok(); ++a) {
        AttributionRow& row = e.attribution[a];
        row.configuration = r.i32();
        row.layer = r.i32();
        row.kvHead = r.i32();
        const std::int32_t path = r.i32();
        if (path < 0 || path > 2)
            r.fail("attribution row " + std::to_string(a) + " has path " + std::to_string(path) + " (0, 1 or 2)");
        row.path = static_cast<AttributionPath>(std::clamp(path, 0, 2));
        if (row.configuration < 0 || static_cast<std::size_t>(row.configuration) >= e.configurations.size())
            r.fail("attribution row " + std::to_string(a) + " names configuration " + std::to_string(row.configuration));
        if (row.layer < 0 || row.layer >= e.layers || row.kvHead < -1 || row.kvHead >= e.kvHeads)
            r.fail("attribution row " + std::to_string(a) + " names layer " + std::to_string(row.layer) + ", head "
                   + std::to_string(row.kvHead) + " outside the model");
        const std::size_t tokens = r.count(12, kMaxItems, "attribution tokens");
        e.attributionTokens[a].resize(tokens);
        for (AttributionToken& t : e.attributionTokens[a]) {
            t.kld = r.f64();
            t.sameTop = r.u32() != 0;
        }
    }
}

void readBody(Reader& r, EvalResult& e)
{
    e.modelSummary = r.text();
    e.tokenizer = r.text();
    for (int* v : {&e.layers, &e.kvHeads, &e.headDim, &e.vocab, &e.calibrationTokens, &e.shardIndex, &e.shardCount, &e.threads})
        *v = r.i32();
    if (r.ok() && (e.layers < 1 || e.kvHeads < 1 || e.headDim < 1 || e.vocab < 1 || e.shardCount < 1 || e.shardIndex < 0
                   || e.shardIndex >= e.shardCount))
        r.fail("the model's sizes or the shard are out of range");
    const bool hasBos = r.u32() != 0;
    const std::int32_t bos = r.i32();
    if (hasBos)
        e.bos = bos;
    e.modelHash = r.u64();
    e.tokensHash = r.u64();
    e.elapsedMs = r.f64();
    e.forwardMs = r.f64();
    e.forwardTokens = static_cast<long long>(r.u64() & 0x7fffffffffffffffULL);
    e.forward = r.text();
    const std::size_t chunks = r.count(4, kMaxItems, "chunks");
    e.chunkIndices.resize(chunks);
    for (int& c : e.chunkIndices)
        c = r.i32();
    readScored(r, e);
    const std::size_t configurations = r.count(kConfigTokenBytes, 1 << 20, "configurations");
    for (std::size_t c = 0; c < configurations && r.ok(); ++c)
        e.configurations.push_back(readConfiguration(r));
    readAttribution(r, e);
}

/// The per-token arrays must all describe the same scored positions, in chunk order.
Status checkConsistency(const EvalResult& e, const std::string& label)
{
    for (std::size_t i = 1; i < e.chunkIndices.size(); ++i)
        if (e.chunkIndices[i] <= e.chunkIndices[i - 1])
            return Error{label, "chunk indices are not increasing"};
    for (const ConfigurationResult& c : e.configurations)
        if (c.tokens.size() != e.scored.size())
            return Error{label, "configuration '" + c.name + "' holds " + std::to_string(c.tokens.size())
                                    + " tokens, the run scored " + std::to_string(e.scored.size())};
    for (const auto& tokens : e.attributionTokens)
        if (tokens.size() != e.scored.size())
            return Error{label, "an attribution row holds " + std::to_string(tokens.size()) + " tokens, the run scored "
                                    + std::to_string(e.scored.size())};
    for (const ScoredToken& s : e.scored)
        if (!std::binary_search(e.chunkIndices.begin(), e.chunkIndices.end(), s.chunk))
            return Error{label, "a scored token names chunk " + std::to_string(s.chunk) + ", which the run did not score"};
    return Ok{};
}

std::string hex(std::uint64_t v)
{
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

} // namespace

std::uint64_t evalSpecHash(const EvalSpec& spec)
{
    EvalSpec neutral = spec;
    neutral.modelDir = "-";
    neutral.textFile = spec.textFile.empty() ? "" : "-";
    neutral.tokensFile = spec.tokensFile.empty() ? "" : "-";
    neutral.threads = 0;
    neutral.memoryLimitMb = 0.0;
    return fnv1a64(evalSpecToJson(neutral, -1));
}

std::uint64_t evalSettingsHash(const EvalSpec& spec)
{
    EvalSpec neutral = spec;
    neutral.schemes.clear();
    neutral.budgets.clear();
    neutral.firstSeed = 0;
    neutral.seedCount = 1;
    neutral.name.clear();
    return evalSpecHash(neutral);
}

std::uint64_t tokensHash(const std::vector<std::int32_t>& tokens)
{
    Fnv1a h;
    h.u64(tokens.size());
    for (const std::int32_t t : tokens)
        h.i64(t);
    return h.value();
}

std::string encodeEvalShard(const EvalResult& result)
{
    Writer w;
    w.out() += kMagic;
    w.u32(kFormatVersion);
    writeBody(w, result);
    w.u64(fnv1a64(w.out()));
    return std::move(w.out());
}

Status decodeEvalShard(std::string_view bytes, const std::string& label, EvalResult& into)
{
    if (bytes.size() < kMagic.size() + 4 + 8 || bytes.substr(0, kMagic.size()) != kMagic)
        return Error{label, "not an eval shard file (no KVLEVAL1 header)"};
    const std::string_view body = bytes.substr(0, bytes.size() - 8);
    Reader tail(bytes.substr(bytes.size() - 8), label);
    if (tail.u64() != fnv1a64(body))
        return Error{label, "checksum mismatch: the file is damaged or was changed"};
    Reader r(body.substr(kMagic.size()), label);
    const std::uint32_t version = r.u32();
    if (version != kFormatVersion)
        return Error{label, "format version " + std::to_string(version) + " is not supported (this build reads 1)"};
    EvalResult e;
    e.spec = into.spec;
    readBody(r, e);
    if (!r.ok())
        return Error{label, r.error()};
    if (r.left() != 0)
        return Error{label, std::to_string(r.left()) + " bytes follow the data"};
    if (auto s = checkConsistency(e, label); !s)
        return s;
    into = std::move(e);
    return Ok{};
}

std::string evalManifestJson(const EvalResult& result, const EvalIdentity& identity, std::uint64_t checksum)
{
    json j;
    j["format"] = kManifestFormat;
    j["format_version"] = 1;
    j["program_version"] = identity.programVersion;
    j["spec_hash"] = hex(identity.specHash);
    j["model_hash"] = hex(identity.modelHash);
    j["tokens_hash"] = hex(identity.tokensHash);
    j["threads"] = identity.threads;
    j["shard"] = json{{"index", result.shardIndex}, {"count", result.shardCount}};
    j["chunks"] = result.chunkIndices;
    j["configurations"] = result.configurations.size();
    j["checksum"] = hex(checksum);
    return io::dumpJson(j, 2);
}

bool isEvalManifest(std::string_view text)
{
    auto parsed = io::parseJsonText(text);
    return parsed && parsed->is_object() && parsed->value("format", std::string()) == kManifestFormat;
}

Result<EvalManifest> parseEvalManifest(std::string_view text, const std::string& label)
{
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{label, parsed.error().message};
    const json& j = *parsed;
    auto hexField = [&](const char* key, std::uint64_t& out) -> Status {
        const auto it = j.find(key);
        if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().size() != 16)
            return Error{label, std::string("'") + key + "' must be 16 hex digits"};
        const std::string& s = it->get_ref<const std::string&>();
        out = 0;
        for (const char c : s) {
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return Error{label, std::string("'") + key + "' must be 16 hex digits"};
            out = out * 16 + static_cast<std::uint64_t>(d);
        }
        return Ok{};
    };
    if (!j.is_object() || j.value("format", std::string()) != kManifestFormat)
        return Error{label, "not an eval manifest (its 'format' is not kvlens-eval-shard)"};
    EvalManifest m;
    for (const auto& [key, out] : {std::pair<const char*, std::uint64_t*>{"spec_hash", &m.identity.specHash},
                                   {"model_hash", &m.identity.modelHash},
                                   {"tokens_hash", &m.identity.tokensHash},
                                   {"checksum", &m.checksum}})
        if (auto s = hexField(key, *out); !s)
            return s.error();
    const auto version = j.find("program_version");
    if (version == j.end() || !version->is_string())
        return Error{label, "'program_version' must be a string"};
    m.identity.programVersion = version->get<std::string>();
    const auto threads = j.find("threads");
    if (threads == j.end() || !threads->is_number_integer() || threads->get<long long>() < 1 || threads->get<long long>() > 1 << 16)
        return Error{label, "'threads' must be an integer in [1, 65536]"};
    m.identity.threads = threads->get<int>();
    const auto shard = j.find("shard");
    if (shard == j.end() || !shard->is_object() || !(*shard)["index"].is_number_integer()
        || !(*shard)["count"].is_number_integer())
        return Error{label, "'shard' must be {\"index\", \"count\"}"};
    m.shardIndex = (*shard)["index"].get<int>();
    m.shardCount = (*shard)["count"].get<int>();
    if (m.shardCount < 1 || m.shardCount > 1 << 20 || m.shardIndex < 0 || m.shardIndex >= m.shardCount)
        return Error{label, "'shard' must have 0 <= index < count <= 1048576"};
    const auto chunks = j.find("chunks");
    if (chunks == j.end() || !chunks->is_array() || chunks->size() > (1u << 20))
        return Error{label, "'chunks' must be an array of chunk indices"};
    for (const json& c : *chunks) {
        if (!c.is_number_integer() || c.get<long long>() < 0 || c.get<long long>() > (1 << 30))
            return Error{label, "'chunks' must hold chunk indices"};
        m.chunks.push_back(c.get<int>());
    }
    if (!j.value("configurations", json()).is_number_integer())
        return Error{label, "'configurations' must be an integer"};
    m.configurations = j["configurations"].get<int>();
    return m;
}

Result<EvalResult> mergeEvalShards(std::vector<EvalShardInput> shards)
{
    if (shards.empty())
        return Error{"merge", "no shards"};
    const EvalShardInput& first = shards.front();
    std::map<int, std::size_t> byIndex;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const EvalShardInput& s = shards[i];
        const EvalIdentity &a = first.manifest.identity, &b = s.manifest.identity;
        if (b.specHash != a.specHash)
            return Error{s.dir, "ran another spec than " + first.dir + " (spec hashes differ)"};
        if (b.modelHash != a.modelHash)
            return Error{s.dir, "ran other weights than " + first.dir + " (model hashes differ)"};
        if (b.tokensHash != a.tokensHash)
            return Error{s.dir, "read another text than " + first.dir + " (token hashes differ)"};
        if (b.programVersion != a.programVersion)
            return Error{s.dir, "was written by kvlens " + b.programVersion + ", " + first.dir + " by " + a.programVersion};
        if (b.threads != a.threads)
            return Error{s.dir, "ran its forward passes on " + std::to_string(b.threads) + " threads, " + first.dir + " on "
                                    + std::to_string(a.threads)
                                    + ": the products split by thread and round differently in the last bits; run every "
                                      "shard with the same --threads"};
        if (s.manifest.shardCount != first.manifest.shardCount)
            return Error{s.dir, "is a shard of " + std::to_string(s.manifest.shardCount) + ", " + first.dir + " of "
                                    + std::to_string(first.manifest.shardCount)};
        if (const auto [it, fresh] = byIndex.emplace(s.manifest.shardIndex, i); !fresh)
            return Error{s.dir, "is shard " + std::to_string(s.manifest.shardIndex) + ", which " + shards[it->second].dir
                                    + " already is"};
    }
    const int count = first.manifest.shardCount;
    for (int i = 0; i < count; ++i)
        if (!byIndex.count(i))
            return Error{"merge", "shard " + std::to_string(i) + " of " + std::to_string(count) + " is missing"};
    EvalResult merged = shards[byIndex.at(0)].result;
    merged.shardIndex = 0;
    merged.shardCount = 1;
    for (int i = 1; i < count; ++i) {
        EvalResult& part = shards[byIndex.at(i)].result;
        if (part.configurations.size() != merged.configurations.size() || part.attribution.size() != merged.attribution.size())
            return Error{shards[byIndex.at(i)].dir, "holds other configurations than shard 0"};
        if (!part.chunkIndices.empty() && !merged.chunkIndices.empty() && part.chunkIndices.front() <= merged.chunkIndices.back())
            return Error{shards[byIndex.at(i)].dir, "scored chunks that shard " + std::to_string(i - 1) + " also scored"};
        auto append = [](auto& to, auto& from) { to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end())); };
        append(merged.chunkIndices, part.chunkIndices);
        append(merged.scored, part.scored);
        append(merged.tokenText, part.tokenText);
        append(merged.topBase, part.topBase);
        append(merged.referenceNll, part.referenceNll);
        for (std::size_t c = 0; c < merged.configurations.size(); ++c) {
            append(merged.configurations[c].tokens, part.configurations[c].tokens);
            append(merged.configurations[c].top, part.configurations[c].top);
            append(merged.configurations[c].proxies, part.configurations[c].proxies);
        }
        for (std::size_t a = 0; a < merged.attributionTokens.size(); ++a)
            append(merged.attributionTokens[a], part.attributionTokens[a]);
        merged.elapsedMs += part.elapsedMs;
        merged.forwardMs += part.forwardMs;
        merged.forwardTokens += part.forwardTokens;
        if (("; " + merged.forward + "; ").find("; " + part.forward + "; ") == std::string::npos)
            merged.forward += "; " + part.forward; // shards that ran on other devices say so
    }
    finishEvalResult(merged);
    return merged;
}

} // namespace kvlens::eval
