// SPDX-License-Identifier: GPL-3.0-or-later
// Sharded runs: trial ids, the block assignment, manifests (nlohmann::json), trials.bin, the merge.
#include "core/experiment/shard.h"

#include "core/io/file_read.h"

#include "core/spec/spec_json.h"
#include "core/io/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cassert>
#include <charconv>
#include <cstring>
#include <map>
#include <type_traits>

namespace kvlens {

using nlohmann::json;

Result<ShardId> parseShard(std::string_view text)
{
    const Error bad{"--shard", "must be i/n with integers 0 <= i < n and 1 <= n <= " + std::to_string(kMaxShards)
                                   + ", got '" + std::string(text) + "'"};
    const auto slash = text.find('/');
    if (slash == std::string_view::npos)
        return bad;
    auto number = [](std::string_view s) -> std::optional<long long> {
        long long v = 0;
        if (s.empty() || s.front() == '+' || s.front() == '-')
            return std::nullopt;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || end != s.data() + s.size())
            return std::nullopt;
        return v;
    };
    const auto index = number(text.substr(0, slash));
    const auto count = number(text.substr(slash + 1));
    if (!index || !count || *count < 1 || *count > kMaxShards || *index >= *count)
        return bad;
    return ShardId{static_cast<int>(*index), static_cast<int>(*count)};
}

namespace {

/// Little-endian writer of the binary formats (ids and trials.bin).
class ByteWriter {
public:
    void u8(std::uint8_t v) { m_bytes.push_back(static_cast<char>(v)); }
    void u32(std::uint32_t v)
    {
        for (int i = 0; i < 4; ++i)
            u8(static_cast<std::uint8_t>(v >> (8 * i)));
    }
    void u64(std::uint64_t v)
    {
        for (int i = 0; i < 8; ++i)
            u8(static_cast<std::uint8_t>(v >> (8 * i)));
    }
    void i32(int v) { u32(static_cast<std::uint32_t>(v)); }
    void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
    void f32(float v) { u32(std::bit_cast<std::uint32_t>(v)); }
    void text(std::string_view s)
    {
        u64(s.size());
        m_bytes.append(s);
    }
    void raw(std::string_view s) { m_bytes.append(s); }
    /// A trial's field as trials.bin stores it (forEachTrialField's types): ints as i32, bools as
    /// one byte, arrays as a u64 length and their elements.
    void field(int v) { i32(v); }
    void field(std::uint64_t v) { u64(v); }
    void field(double v) { f64(v); }
    void field(bool v) { u8(v ? 1 : 0); }
    void field(std::uint8_t v) { u8(v); }
    void field(float v) { f32(v); }
    template <class T>
    void field(const std::vector<T>& values)
    {
        u64(values.size());
        for (const T& v : values)
            field(v);
    }
    std::string& bytes() { return m_bytes; }

private:
    std::string m_bytes;
};

/// Bounds-checked little-endian reader: reading past the end sets `failed` and yields zeros.
class ByteReader {
public:
    explicit ByteReader(std::string_view bytes) : m_bytes(bytes) {}

    bool failed() const { return m_failed; }
    std::size_t remaining() const { return m_bytes.size() - m_at; }
    std::string_view take(std::size_t n)
    {
        if (m_failed || n > remaining()) {
            m_failed = true;
            return {};
        }
        const std::string_view s = m_bytes.substr(m_at, n);
        m_at += n;
        return s;
    }
    std::uint64_t le(int width)
    {
        const std::string_view s = take(static_cast<std::size_t>(width));
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < s.size(); ++i)
            v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * i);
        return v;
    }
    std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
    std::uint64_t u64() { return le(8); }
    int i32() { return static_cast<int>(u32()); }
    double f64() { return std::bit_cast<double>(u64()); }
    float f32() { return std::bit_cast<float>(u32()); }
    /// A trial's field as ByteWriter::field wrote it.
    void field(int& v) { v = i32(); }
    void field(std::uint64_t& v) { v = u64(); }
    void field(double& v) { v = f64(); }
    void field(bool& v) { v = u8() != 0; }
    void field(std::uint8_t& v) { v = u8(); }
    void field(float& v) { v = f32(); }
    template <class T>
    void field(std::vector<T>& values)
    {
        const std::uint64_t n = u64();
        // A corrupt length must not allocate: every element takes sizeof(T) bytes.
        if (n > remaining() / sizeof(T)) {
            m_failed = true;
            return;
        }
        values.resize(static_cast<std::size_t>(n));
        for (T& v : values)
            field(v);
    }

private:
    std::string_view m_bytes;
    std::size_t m_at = 0;
    bool m_failed = false;
};

} // namespace

std::uint64_t specHash(const ExperimentSpec& spec, std::uint64_t dataHash)
{
    // The spec as spec.json writes it, every Neutral field (forEachSpecField) value-initialized: no
    // name, the CPU, no device, no memory limit. (A field that is not Neutral and that spec.json
    // does not write would be left out: tst_experiment changes each field alone and checks the hash
    // moves exactly for those that are not Neutral.)
    ExperimentSpec neutral = spec;
    forEachSpecField(neutral, [](const char*, auto role, auto& field) {
        if constexpr (std::is_same_v<decltype(role), Neutral>)
            field = std::decay_t<decltype(field)>{};
    });
    const std::uint64_t hash = fnv1a64(specToJson(neutral, -1));
    if (dataHash == 0)
        return hash;
    // Imported data: the same path with other contents is another experiment.
    ByteWriter w;
    w.u64(dataHash);
    return fnv1a64(w.bytes(), hash);
}

std::uint64_t trialId(std::uint64_t specHashValue, int point, std::string_view scheme, int budget, std::uint64_t seed)
{
    ByteWriter w;
    w.u64(specHashValue);
    w.i32(point);
    w.text(scheme);
    w.i32(budget);
    w.u64(seed);
    return fnv1a64(w.bytes());
}

std::string hex64(std::uint64_t value)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, value >>= 4)
        s[static_cast<std::size_t>(i)] = kDigits[value & 0xF];
    return s;
}

std::optional<std::uint64_t> parseHex64(std::string_view text)
{
    if (text.size() != 16)
        return std::nullopt;
    std::uint64_t v = 0;
    for (const char c : text) {
        int digit = 0;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (c >= 'a' && c <= 'f')
            digit = c - 'a' + 10;
        else
            return std::nullopt;
        v = (v << 4) | static_cast<std::uint64_t>(digit);
    }
    return v;
}

namespace {

/// First draw index of block `index` of `count`: the first total % count blocks hold one more.
long long blockStart(long long total, long long index, long long count)
{
    const long long base = total / count, extra = total % count;
    return index * base + std::min(index, extra);
}

std::uint64_t slotId(const ExperimentSpec& spec, std::uint64_t hash, const TrialSlot& t)
{
    return trialId(hash, t.point, spec.schemes[static_cast<std::size_t>(t.schemeIndex)].name,
                   spec.budgets[static_cast<std::size_t>(t.budgetIndex)], spec.seed(t.seedIndex));
}

} // namespace

long long TrialCatalog::find(std::uint64_t id) const
{
    const auto it = std::lower_bound(byId.begin(), byId.end(), std::pair<std::uint64_t, long long>{id, -1});
    return it != byId.end() && it->first == id ? it->second : -1;
}

long long TrialCatalog::walkIndex(const TrialSlot& slot) const
{
    return GridShape(spec).walkIndex(slot);
}

std::string TrialCatalog::describe(long long walkIndex) const
{
    if (walkIndex < 0 || walkIndex >= size())
        return "no trial";
    const TrialSlot& t = trialSlots[static_cast<std::size_t>(walkIndex)];
    std::string text = "point " + std::to_string(t.point);
    if (const std::string label = spec.pointLabel(t.point); !label.empty())
        text += " (" + label + ")";
    text += ", " + spec.schemes[static_cast<std::size_t>(t.schemeIndex)].name + ", n = "
            + std::to_string(spec.budgets[static_cast<std::size_t>(t.budgetIndex)]) + ", seed "
            + std::to_string(spec.seed(t.seedIndex)) + " [id " + hex64(ids[static_cast<std::size_t>(walkIndex)]) + "]";
    return text;
}

TrialCatalog catalogTrials(const ExperimentSpec& spec, std::uint64_t dataHash)
{
    TrialCatalog catalog;
    catalog.spec = spec;
    catalog.specHash = specHash(spec, dataHash);
    const GridShape shape(spec);
    const long long total = shape.total();
    catalog.trialSlots.reserve(static_cast<std::size_t>(total));
    catalog.ids.reserve(static_cast<std::size_t>(total));
    catalog.byId.reserve(static_cast<std::size_t>(total));
    for (long long i = 0; i < total; ++i) {
        const TrialSlot t = shape.fromWalkIndex(i);
        catalog.trialSlots.push_back(t);
        catalog.ids.push_back(slotId(spec, catalog.specHash, t));
        catalog.byId.emplace_back(catalog.ids.back(), i);
    }
    std::sort(catalog.byId.begin(), catalog.byId.end());
    return catalog;
}

bool inShard(const ExperimentSpec& spec, const TrialSlot& slot, ShardId shard)
{
    const GridShape shape(spec);
    const long long at = shape.drawIndex(slot);
    return at >= blockStart(shape.total(), shard.index, shard.count)
           && at < blockStart(shape.total(), shard.index + 1, shard.count);
}

TrialFilter shardFilter(const ExperimentSpec& spec, ShardId shard)
{
    const GridShape shape(spec);
    const long long first = blockStart(shape.total(), shard.index, shard.count);
    const long long end = blockStart(shape.total(), shard.index + 1, shard.count);
    const double share = shape.total() > 0 ? static_cast<double>(end - first) / static_cast<double>(shape.total()) : 0.0;
    return TrialFilter(
        [shape, first, end](const TrialSlot& slot) {
            const long long at = shape.drawIndex(slot);
            return at >= first && at < end;
        },
        share);
}

std::vector<long long> shardWalkIndices(const ExperimentSpec& spec, ShardId shard)
{
    const GridShape shape(spec);
    const long long first = blockStart(shape.total(), shard.index, shard.count);
    const long long end = blockStart(shape.total(), shard.index + 1, shard.count);
    std::vector<long long> indices;
    indices.reserve(static_cast<std::size_t>(end - first));
    for (long long i = first; i < end; ++i)
        indices.push_back(shape.walkIndex(shape.fromDrawIndex(i)));
    std::sort(indices.begin(), indices.end());
    return indices;
}

ShardManifest manifestFor(const ResultSet& results, const ExperimentSpec& spec, ShardId shard)
{
    const std::uint64_t hash = specHash(spec, results.dataHash);
    ShardManifest manifest;
    manifest.programVersion = KVLENS_VERSION;
    manifest.specHash = hash;
    manifest.shard = shard;
    manifest.specTrials = spec.trialCount();
    manifest.backend = results.backend;
    manifest.specBackend = results.spec.backendText();
    manifest.regimeNote = results.regimeNote;
    manifest.dataHash = results.dataHash;
    if (results.dataHash != 0)
        manifest.pointDataHashes = results.pointDataHashes;
    manifest.elapsedMs = results.elapsedMs;
    manifest.trials.reserve(results.trials.size());
    for (const TrialResult& t : results.trials)
        manifest.trials.push_back(trialId(hash, t.key.point, spec.schemes[static_cast<std::size_t>(t.key.scheme)].name,
                                          t.key.budget, t.key.seed));
    return manifest;
}

std::string manifestToJson(const ShardManifest& manifest)
{
    json ids = json::array();
    for (const std::uint64_t id : manifest.trials)
        ids.push_back(hex64(id));
    json j = {
        {"format", "kvlens-shard"},
        {"format_version", kShardFormatVersion},
        {"program_version", manifest.programVersion},
        {"spec_hash", hex64(manifest.specHash)},
        {"shard", {{"index", manifest.shard.index}, {"count", manifest.shard.count}}},
        {"spec_trials", manifest.specTrials},
        {"backend", manifest.backend},
        {"spec_backend", manifest.specBackend},
        {"regime_note", manifest.regimeNote},
        {"data_hash", hex64(manifest.dataHash)},
        {"elapsed_ms", manifest.elapsedMs},
        {"trials_file", "trials.bin"},
        {"trial_count", static_cast<long long>(manifest.trials.size())},
        {"trials", ids},
    };
    if (!manifest.pointDataHashes.empty()) {
        json points = json::array();
        for (const std::uint64_t h : manifest.pointDataHashes)
            points.push_back(hex64(h));
        j["point_data_hashes"] = points;
    }
    return io::dumpJson(j, 2) + "\n";
}

Result<ShardManifest> manifestFromJson(std::string_view text)
{
    // Nesting capped and duplicate keys refused (a manifest is read from another machine's disk).
    auto parsed = io::parseJsonText(text);
    if (!parsed)
        return Error{"manifest.json", parsed.error().message};
    const json& j = *parsed;
    if (!j.is_object())
        return Error{"manifest.json", "must be a JSON object"};
    auto field = [](const json& object, const char* key, json::value_t type, const char* what) -> Result<json> {
        const auto it = object.find(key);
        if (it == object.end())
            return Error{key, "is missing from the manifest"};
        const bool ok = type == json::value_t::number_integer ? it->is_number_integer()
                        : type == json::value_t::number_float ? it->is_number()
                                                              : it->type() == type;
        if (!ok)
            return Error{key, std::string("must be ") + what};
        return *it;
    };
    using V = json::value_t;
    const auto format = field(j, "format", V::string, "a string");
    if (!format)
        return format.error();
    if (format->get<std::string>() != "kvlens-shard")
        return Error{"format", "must be \"kvlens-shard\" (this is not a KVLens shard manifest)"};
    const auto version = field(j, "format_version", V::number_integer, "an integer");
    if (!version)
        return version.error();
    if (version->get<long long>() != kShardFormatVersion)
        return Error{"format_version", "is " + io::describeJson(*version) + "; this program reads version "
                                           + std::to_string(kShardFormatVersion)};

    ShardManifest m;
    const auto program = field(j, "program_version", V::string, "a string");
    const auto hash = field(j, "spec_hash", V::string, "a string of 16 hex digits");
    const auto shard = field(j, "shard", V::object, "an object with index and count");
    const auto specTrials = field(j, "spec_trials", V::number_integer, "an integer");
    const auto backend = field(j, "backend", V::string, "a string");
    const auto specBackend = field(j, "spec_backend", V::string, "a string");
    const auto note = field(j, "regime_note", V::string, "a string");
    const auto elapsed = field(j, "elapsed_ms", V::number_float, "a number");
    const auto count = field(j, "trial_count", V::number_integer, "an integer");
    const auto trials = field(j, "trials", V::array, "an array of trial ids");
    for (const Result<json>* r : {&program, &hash, &shard, &specTrials, &backend, &specBackend, &note, &elapsed, &count,
                                  &trials})
        if (!*r)
            return r->error();
    const auto index = field(*shard, "index", V::number_integer, "an integer");
    const auto shardCount = field(*shard, "count", V::number_integer, "an integer");
    if (!index)
        return Error{"shard.index", index.error().message};
    if (!shardCount)
        return Error{"shard.count", shardCount.error().message};
    const long long i = index->get<long long>(), n = shardCount->get<long long>();
    if (n < 1 || n > kMaxShards || i < 0 || i >= n)
        return Error{"shard", "index " + std::to_string(i) + " of count " + std::to_string(n)
                                  + " is out of range (0 <= index < count <= " + std::to_string(kMaxShards) + ")"};
    const auto parsedHash = parseHex64(hash->get<std::string>());
    if (!parsedHash)
        return Error{"spec_hash", "must be 16 lowercase hex digits, got '" + hash->get<std::string>() + "'"};

    m.programVersion = program->get<std::string>();
    m.specHash = *parsedHash;
    m.shard = ShardId{static_cast<int>(i), static_cast<int>(n)};
    m.specTrials = specTrials->get<long long>();
    m.backend = backend->get<std::string>();
    m.specBackend = specBackend->get<std::string>();
    m.regimeNote = note->get<std::string>();
    // Written since imported data is hashed; older manifests (drawn data only) lack it.
    if (const auto it = j.find("data_hash"); it != j.end()) {
        const auto dataHash = it->is_string() ? parseHex64(it->get<std::string>()) : std::nullopt;
        if (!dataHash)
            return Error{"data_hash", "must be 16 lowercase hex digits"};
        m.dataHash = *dataHash;
    }
    // Arrays of 16-hex-digit values; an error names the element.
    auto hexArray = [](const json& array, const std::string& field, const char* what,
                       std::vector<std::uint64_t>& out) -> std::optional<Error> {
        out.reserve(array.size());
        for (std::size_t k = 0; k < array.size(); ++k) {
            const json& v = array[k];
            const auto parsed = v.is_string() ? parseHex64(v.get<std::string>()) : std::nullopt;
            if (!parsed)
                return Error{field + "[" + std::to_string(k) + "]", std::string("must be ") + what};
            out.push_back(*parsed);
        }
        return std::nullopt;
    };
    if (const auto it = j.find("point_data_hashes"); it != j.end()) {
        if (!it->is_array())
            return Error{"point_data_hashes", "must be an array of 16-hex-digit hashes"};
        if (auto bad = hexArray(*it, "point_data_hashes", "16 lowercase hex digits", m.pointDataHashes))
            return *bad;
    }
    m.elapsedMs = elapsed->get<double>();
    if (auto bad = hexArray(*trials, "trials", "a trial id of 16 lowercase hex digits", m.trials))
        return *bad;
    if (count->get<long long>() != static_cast<long long>(m.trials.size()))
        return Error{"trial_count", "is " + io::describeJson(*count) + " but the manifest lists "
                                        + std::to_string(m.trials.size()) + " trials"};
    return m;
}

namespace {

constexpr std::string_view kTrialsMagic = "KVLTRIAL";
constexpr std::uint32_t kTrialsVersion = 1;

/// One trial record of trials.bin: every field of forEachTrialField, in its order.
void encodeTrial(ByteWriter& w, const TrialResult& t)
{
    forEachTrialField(t, [&](const char*, auto, const auto& field) { w.field(field); });
}

void decodeTrial(ByteReader& r, TrialResult& t)
{
    forEachTrialField(t, [&](const char*, auto, auto& field) { r.field(field); });
}

/// Bytes ByteWriter::field writes for a scalar of this type.
template <class T>
constexpr double storedBytes()
{
    return std::is_same_v<T, bool> ? 1.0 : static_cast<double>(sizeof(T));
}

} // namespace

std::string encodeTrials(std::uint64_t specHashValue, const std::vector<TrialResult>& trials,
                         const std::vector<std::uint64_t>& ids)
{
    assert(trials.size() == ids.size() && "encodeTrials: one id per trial");
    ByteWriter w;
    w.raw(kTrialsMagic);
    w.u32(kTrialsVersion);
    w.u64(specHashValue);
    w.u64(trials.size());
    for (std::size_t i = 0; i < trials.size(); ++i) {
        w.u64(ids[i]);
        encodeTrial(w, trials[i]);
    }
    const std::uint64_t checksum = fnv1a64(w.bytes());
    w.u64(checksum);
    return std::move(w.bytes());
}

double maxTrialRecordBytes(const ExperimentSpec& spec)
{
    double q = 0.0, samples = 0.0;
    for (int p = 0; p < spec.pointCount(); ++p) { // the largest point decides
        const ExperimentSpec ps = spec.pointSpec(p);
        q = std::max(q, static_cast<double>(ps.queries));
        samples = std::max(samples, static_cast<double>(std::min<long long>(
                                        ps.metrics.sampleCap, std::max(ps.tokens, ps.queries))));
        if (spec.sweep.empty())
            break;
    }
    // The id, then every field at its longest: arrays of q or `samples` values, each with its
    // 8-byte length.
    double bytes = 8.0;
    const TrialResult shape;
    forEachTrialField(shape, [&](const char*, auto kind, const auto& field) {
        using Field = std::decay_t<decltype(field)>;
        using Kind = decltype(kind);
        if constexpr (std::is_same_v<Kind, PerQuery> || std::is_same_v<Kind, PerVector>)
            bytes += 8.0 + storedBytes<typename Field::value_type>() * (std::is_same_v<Kind, PerQuery> ? q : samples);
        else
            bytes += storedBytes<Field>();
    });
    return bytes;
}

Result<TrialsFileHeader> checkTrialsFile(const std::string& path, std::uint64_t specHashValue,
                                         std::uint64_t expectedTrials, const ExperimentSpec& spec)
{
    constexpr std::size_t kHeader = 8 + 4 + 8 + 8;
    auto prefix = io::readRegularFilePrefix(path, kHeader);
    if (!prefix)
        return prefix.error();
    const std::string_view bytes = prefix->bytes;
    if (bytes.size() < kHeader || bytes.substr(0, kTrialsMagic.size()) != kTrialsMagic)
        return Error{"trials.bin", "is not a KVLens trials file (wrong magic or too short)"};
    ByteReader header(bytes.substr(kTrialsMagic.size()));
    if (const std::uint32_t version = header.u32(); version != kTrialsVersion)
        return Error{"trials.bin", "has format version " + std::to_string(version) + "; this program reads version "
                                       + std::to_string(kTrialsVersion)};
    TrialsFileHeader out;
    out.specHash = header.u64();
    out.count = header.u64();
    out.fileBytes = prefix->size;
    if (out.specHash != specHashValue)
        return Error{"trials.bin", "is of spec hash " + hex64(out.specHash) + ", not the manifest's " + hex64(specHashValue)};
    if (out.count != expectedTrials)
        return Error{"trials.bin", "claims " + std::to_string(out.count) + " trials; the manifest lists "
                                       + std::to_string(expectedTrials)};
    const double most = static_cast<double>(kHeader + 8) + static_cast<double>(out.count) * maxTrialRecordBytes(spec);
    if (static_cast<double>(out.fileBytes) > most)
        return Error{"trials.bin", "is " + io::byteSizeText(out.fileBytes) + ", more than " + std::to_string(out.count)
                                       + " trials of this spec can take (at most "
                                       + io::byteSizeText(static_cast<std::uint64_t>(most)) + "); refused unread"};
    return out;
}

Result<ShardTrials> decodeTrials(std::string_view bytes)
{
    constexpr std::size_t kHeader = 8 + 4 + 8 + 8, kChecksum = 8;
    if (bytes.size() < kHeader + kChecksum || bytes.substr(0, kTrialsMagic.size()) != kTrialsMagic)
        return Error{"trials.bin", "is not a KVLens trials file (wrong magic or too short)"};
    ByteReader header(bytes.substr(kTrialsMagic.size()));
    if (const std::uint32_t version = header.u32(); version != kTrialsVersion)
        return Error{"trials.bin", "has format version " + std::to_string(version) + "; this program reads version "
                                       + std::to_string(kTrialsVersion)};
    const std::string_view body = bytes.substr(0, bytes.size() - kChecksum);
    ByteReader tail(bytes.substr(bytes.size() - kChecksum));
    if (tail.u64() != fnv1a64(body))
        return Error{"trials.bin", "checksum mismatch: the file is damaged or truncated"};

    ShardTrials result;
    result.specHash = header.u64();
    const std::uint64_t count = header.u64();
    ByteReader r(body.substr(kHeader));
    if (count > r.remaining())
        return Error{"trials.bin", "claims " + std::to_string(count) + " trials, more than the file can hold"};
    result.ids.reserve(static_cast<std::size_t>(count));
    result.trials.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count && !r.failed(); ++i) {
        result.ids.push_back(r.u64());
        decodeTrial(r, result.trials.emplace_back());
    }
    if (r.failed())
        return Error{"trials.bin", "ends inside a trial record"};
    if (r.remaining() != 0)
        return Error{"trials.bin", std::to_string(r.remaining()) + " unexpected bytes after the last trial"};
    return result;
}

namespace {

std::string shardName(ShardId s)
{
    return std::to_string(s.index) + "/" + std::to_string(s.count);
}

/// "a, b and 3 more" of the first few trials, for messages.
std::string someTrials(const TrialCatalog& catalog, const std::vector<long long>& walkIndices)
{
    constexpr std::size_t kShown = 3;
    std::string text;
    for (std::size_t i = 0; i < std::min(kShown, walkIndices.size()); ++i)
        text += (i ? "; " : "") + catalog.describe(walkIndices[i]);
    if (walkIndices.size() > kShown)
        text += "; and " + std::to_string(walkIndices.size() - kShown) + " more";
    return text;
}

} // namespace

Status checkShardSet(const TrialCatalog& catalog, const std::vector<ShardPart>& parts)
{
    if (parts.empty())
        return Error{"merge", "no shard directories given"};
    std::vector<std::string> problems;
    const ShardPart& first = parts.front();
    const int count = first.manifest.shard.count;
    bool consistent = true; // same spec and shard count: index and trial checks make sense
    for (const ShardPart& p : parts) {
        const ShardManifest& m = p.manifest;
        if (m.dataHash != first.manifest.dataHash)
            problems.push_back(p.label + ": its imported tensors hash to " + hex64(m.dataHash) + ", "
                               + first.label + "'s to " + hex64(first.manifest.dataHash)
                               + ": the tensor file changed between the shards' runs");
        if (m.specHash != catalog.specHash) {
            problems.push_back(p.label + ": spec hash " + hex64(m.specHash) + " differs from the spec's " + hex64(catalog.specHash)
                               + " (" + first.label + "/spec.json): it ran a different spec");
            consistent = false;
        }
        if (m.programVersion != first.manifest.programVersion)
            problems.push_back(p.label + ": made by KVLens " + m.programVersion + ", but " + first.label + " by KVLens "
                               + first.manifest.programVersion + "; run every shard with the same version");
        if (m.shard.count != count) {
            problems.push_back(p.label + ": shard " + shardName(m.shard) + " is one of " + std::to_string(m.shard.count)
                               + " shards, but " + first.label + " is one of " + std::to_string(count));
            consistent = false;
        }
        if (m.specTrials != catalog.size())
            problems.push_back(p.label + ": its manifest counts " + std::to_string(m.specTrials)
                               + " trials in the spec, the spec has " + std::to_string(catalog.size()));
    }
    if (consistent) {
        // Every shard index exactly once, by directory.
        std::map<int, std::vector<std::string>> byIndex;
        for (const ShardPart& p : parts)
            byIndex[p.manifest.shard.index].push_back(p.label);
        std::vector<int> missing;
        for (int i = 0; i < count; ++i) {
            const auto it = byIndex.find(i);
            if (it == byIndex.end()) {
                missing.push_back(i);
            } else if (it->second.size() > 1) {
                std::string dirs;
                for (std::size_t k = 0; k < it->second.size(); ++k)
                    dirs += (k ? (k + 1 == it->second.size() ? " and " : ", ") : "") + it->second[k];
                problems.push_back("shard " + shardName({i, count}) + " is given " + std::to_string(it->second.size())
                                   + " times: " + dirs);
            }
        }
        for (const int i : missing) {
            const auto indices = shardWalkIndices(catalog.spec, {i, count});
            problems.push_back("shard " + shardName({i, count}) + " is missing (" + std::to_string(indices.size())
                               + " trials" + (indices.empty() ? "" : ": " + someTrials(catalog, indices)) + ")");
        }

        // Every trial of the spec exactly once (catches manifests that do not match their shard).
        std::vector<int> seen(static_cast<std::size_t>(catalog.size()), 0);
        std::vector<std::vector<long long>> owner(parts.size());
        for (std::size_t k = 0; k < parts.size(); ++k) {
            std::size_t unknown = 0;
            for (const std::uint64_t id : parts[k].manifest.trials) {
                const long long at = catalog.find(id);
                if (at < 0)
                    ++unknown;
                else
                    ++seen[static_cast<std::size_t>(at)];
            }
            if (unknown > 0)
                problems.push_back(parts[k].label + ": " + std::to_string(unknown) + " trial ids that are not in the spec");
        }
        std::vector<long long> absent, repeated;
        for (long long i = 0; i < catalog.size(); ++i) {
            if (seen[static_cast<std::size_t>(i)] == 0)
                absent.push_back(i);
            else if (seen[static_cast<std::size_t>(i)] > 1)
                repeated.push_back(i);
        }
        // A missing or repeated shard already explains its trials; report trials only beyond that.
        if (!absent.empty() && missing.empty())
            problems.push_back(std::to_string(absent.size()) + " trials are in no shard: " + someTrials(catalog, absent));
        bool repeatedShard = false;
        for (const auto& [index, dirs] : byIndex)
            repeatedShard = repeatedShard || dirs.size() > 1;
        if (!repeated.empty() && !repeatedShard)
            problems.push_back(std::to_string(repeated.size()) + " trials are in more than one shard: "
                               + someTrials(catalog, repeated));
    }
    if (problems.empty())
        return Ok{};
    std::string given;
    for (const ShardPart& p : parts)
        given += "\n  " + p.label + ": shard " + shardName(p.manifest.shard) + ", "
                 + std::to_string(p.manifest.trials.size()) + " trials";
    std::string message = "the shards do not make up the run exactly once:";
    for (const std::string& line : problems)
        message += "\n  " + line;
    message += "\nshards given:" + given;
    return Error{"merge", message};
}

Result<ResultSet> mergeShards(const TrialCatalog& catalog, const std::vector<ShardPart>& parts,
                              std::vector<std::vector<TrialResult>> trials)
{
    assert(trials.size() == parts.size() && "mergeShards: one trial list per shard");
    std::vector<TrialResult> slots(static_cast<std::size_t>(catalog.size()));
    std::vector<char> filled(slots.size(), 0);
    ResultSet merged;
    merged.spec = catalog.spec;
    merged.schemes = catalog.spec.schemes;
    merged.totalTrials = catalog.size();

    // Shards in index order decide the backend line and the regime note.
    std::vector<std::size_t> order(parts.size());
    for (std::size_t k = 0; k < order.size(); ++k)
        order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return parts[a].manifest.shard.index < parts[b].manifest.shard.index;
    });
    std::vector<std::string> backends;
    for (const std::size_t k : order) {
        const ShardPart& p = parts[k];
        const ShardManifest& m = p.manifest;
        if (trials[k].size() != m.trials.size())
            return Error{p.label, "holds " + std::to_string(trials[k].size()) + " trials, its manifest lists "
                                      + std::to_string(m.trials.size())};
        for (std::size_t i = 0; i < trials[k].size(); ++i) {
            const long long at = catalog.find(m.trials[i]);
            if (at < 0)
                return Error{p.label, "trial " + hex64(m.trials[i]) + " is not in the spec"};
            const TrialSlot& s = catalog.trialSlots[static_cast<std::size_t>(at)];
            const TrialKey& key = trials[k][i].key;
            if (key.point != s.point || key.scheme != s.schemeIndex
                || key.budget != catalog.spec.budgets[static_cast<std::size_t>(s.budgetIndex)]
                || key.seedIndex != s.seedIndex || key.seed != catalog.spec.seed(s.seedIndex))
                return Error{p.label, "the trial stored for " + catalog.describe(at) + " is a different trial"};
            if (filled[static_cast<std::size_t>(at)])
                return Error{p.label, "repeats " + catalog.describe(at)};
            slots[static_cast<std::size_t>(at)] = std::move(trials[k][i]);
            filled[static_cast<std::size_t>(at)] = 1;
        }
        merged.elapsedMs += m.elapsedMs;
        if (std::find(backends.begin(), backends.end(), m.backend) == backends.end() && !m.backend.empty())
            backends.push_back(m.backend);
        if (merged.regimeNote.empty())
            merged.regimeNote = m.regimeNote;
    }
    for (std::size_t i = 0; i < slots.size(); ++i)
        if (!filled[i])
            return Error{"merge", "no shard holds " + catalog.describe(static_cast<long long>(i))};
    for (const std::string& b : backends)
        merged.backend += (merged.backend.empty() ? "" : "; ") + b;
    if (!parts.empty() && !parts[order.front()].manifest.specBackend.empty())
        if (const auto b = parseBackendText(parts[order.front()].manifest.specBackend)) {
            merged.spec.backend = b->kind;
            merged.spec.fallback = b->fallback;
        }
    merged.trials = std::move(slots);
    return merged;
}

} // namespace kvlens
