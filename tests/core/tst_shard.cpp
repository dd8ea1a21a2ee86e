// SPDX-License-Identifier: GPL-3.0-or-later
// Sharding: --shard parsing, trial ids, the partition of the catalog, trials.bin, manifests, the set check, the merge.
#include "core/experiment/shard.h"
#include "core/spec/spec_json.h"
#include "common/trials.h"

#include <QTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

using namespace kvlens;
using test::makeSpec;
using test::sameBits;
using test::trialDifference;

namespace {

/// A 24-trial sweep: 2 grid points x 2 budgets x 2 schemes x 3 seeds, tiny sizes.
constexpr const char* kSweep = R"({"regime": {"name": "heavy_tail", "mode": "marginal"},
    "sweep": {"regime.nu": [3, 1.5]}, "d": 16, "tokens": 32, "queries": 4,
    "schemes": ["KV", "QKQV"], "budgets": [2, 3], "seeds": {"first": 5, "count": 3}})";

ResultSet run(const ExperimentSpec& spec, const TrialFilter& filter = {})
{
    return test::runSpec(spec, 2, nullptr, filter);
}

/// Manifests of the n shards of `catalog` as the batch mode writes them (ids in walk order).
std::vector<ShardPart> partsFor(const TrialCatalog& catalog, int n)
{
    std::vector<ShardPart> parts;
    for (int i = 0; i < n; ++i) {
        ShardPart p;
        p.label = "out/shard_" + std::to_string(i);
        p.manifest.programVersion = "0.1.0";
        p.manifest.specHash = catalog.specHash;
        p.manifest.shard = {i, n};
        p.manifest.specTrials = catalog.size();
        for (const long long w : shardWalkIndices(catalog.spec, {i, n}))
            p.manifest.trials.push_back(catalog.ids[static_cast<std::size_t>(w)]);
        parts.push_back(std::move(p));
    }
    return parts;
}

} // namespace

class TestShard : public QObject {
    Q_OBJECT
private slots:
    void parsesShards_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("index");
        QTest::addColumn<int>("count");
        QTest::newRow("0/1") << "0/1" << 0 << 1;
        QTest::newRow("2/3") << "2/3" << 2 << 3;
        QTest::newRow("63/64") << "63/64" << 63 << 64;
        QTest::newRow("largest") << "999999/1000000" << 999999 << 1000000;
    }
    void parsesShards()
    {
        QFETCH(QString, text);
        QFETCH(int, index);
        QFETCH(int, count);
        const auto shard = parseShard(text.toStdString());
        QVERIFY(shard.ok());
        QCOMPARE(shard->index, index);
        QCOMPARE(shard->count, count);
    }

    void refusesBadShards_data()
    {
        QTest::addColumn<QString>("text");
        for (const char* bad : {"", "3", "3/3", "4/3", "-1/3", "1/0", "0/-2", "a/3", "1/3x", "1 /3", "+1/3", "1//3",
                                "0/1000001", "99999999999999999999/3", "1/3/5"})
            QTest::newRow(bad[0] ? bad : "empty") << QString::fromLatin1(bad);
    }
    void refusesBadShards()
    {
        QFETCH(QString, text);
        const auto shard = parseShard(text.toStdString());
        QVERIFY2(!shard.ok(), qPrintable(text));
        QCOMPARE(QString::fromStdString(shard.error().field), QStringLiteral("--shard"));
        QVERIFY(shard.error().message.find("0 <= i < n") != std::string::npos);
    }

    void hexRoundTrips()
    {
        QCOMPARE(QString::fromStdString(hex64(0x0123456789abcdefULL)), QStringLiteral("0123456789abcdef"));
        QCOMPARE(parseHex64("00000000000000ff").value(), std::uint64_t{255});
        QVERIFY(!parseHex64("00000000000000FF")); // uppercase is not what we write
        QVERIFY(!parseHex64("0ff"));
        QVERIFY(!parseHex64("000000000000000g"));
        // FNV-1a 64 reference values (Fowler, Noll, Vo test vectors): "" and "a".
        QCOMPARE(fnv1a64(""), std::uint64_t{0xcbf29ce484222325ULL});
        QCOMPARE(fnv1a64("a"), std::uint64_t{0xaf63dc4c8601ec8cULL});
    }

    void specHashIgnoresOnlyWhatDoesNotChangeResults()
    {
        const ExperimentSpec spec = makeSpec(kSweep);
        ExperimentSpec renamed = spec;
        renamed.name = "another name";
        renamed.backend = BackendKind::OpenCl;
        renamed.device = "1";
        renamed.memoryLimitMb = 123.0;
        QCOMPARE(specHash(renamed), specHash(spec));
        ExperimentSpec other = spec;
        other.firstSeed = 6;
        QVERIFY(specHash(other) != specHash(spec));
        other = spec;
        other.tokens = 33;
        QVERIFY(specHash(other) != specHash(spec));
        other = spec;
        other.sweep[0].values[1] = 1.25;
        QVERIFY(specHash(other) != specHash(spec));
        // The hash survives the spec.json round trip a shard directory makes.
        const auto reloaded = specFromJson(specToJson(spec));
        QVERIFY(reloaded.ok());
        QCOMPARE(specHash(*reloaded), specHash(spec));
    }

    void catalogIdsAreDistinctAndFollowTheWalk()
    {
        const ExperimentSpec spec = makeSpec(kSweep);
        const TrialCatalog catalog = catalogTrials(spec);
        QCOMPARE(catalog.size(), 24LL);
        QCOMPARE(std::set<std::uint64_t>(catalog.ids.begin(), catalog.ids.end()).size(), std::size_t{24});
        for (long long w = 0; w < catalog.size(); ++w) {
            const TrialSlot& s = catalog.trialSlots[static_cast<std::size_t>(w)];
            QCOMPARE(catalog.walkIndex(s), w);
            QCOMPARE(catalog.find(catalog.ids[static_cast<std::size_t>(w)]), w);
            QCOMPARE(catalog.ids[static_cast<std::size_t>(w)],
                     trialId(catalog.specHash, s.point, spec.schemes[static_cast<std::size_t>(s.schemeIndex)].name,
                             spec.budgets[static_cast<std::size_t>(s.budgetIndex)], spec.seed(s.seedIndex)));
        }
        // Walk order (point, budget, scheme, seed): index 7 = point 0, budget 3, KV, seed slot 1.
        const TrialSlot& s7 = catalog.trialSlots[7];
        QCOMPARE(s7.point, 0);
        QCOMPARE(s7.budgetIndex, 1);
        QCOMPARE(s7.schemeIndex, 0);
        QCOMPARE(s7.seedIndex, 1);
        QCOMPARE(QString::fromStdString(catalog.describe(7)).left(30), QStringLiteral("point 0 (nu = 3), KV, n = 3, s"));
        QCOMPARE(catalog.find(12345), -1LL);
    }

    void shardsPartitionTheCatalog_data()
    {
        QTest::addColumn<int>("count");
        for (int n : {1, 2, 3, 5, 7, 23, 24, 25, 64, 1000})
            QTest::newRow(qPrintable(QString::number(n))) << n;
    }
    void shardsPartitionTheCatalog()
    {
        QFETCH(int, count);
        const ExperimentSpec spec = makeSpec(kSweep);
        const TrialCatalog catalog = catalogTrials(spec);
        std::vector<int> owners(static_cast<std::size_t>(catalog.size()), 0);
        const long long smallest = catalog.size() / count;
        const int trialsPerDraw = 2 * 2; // budgets x schemes share one (point, seed) draw
        for (int i = 0; i < count; ++i) {
            const auto indices = shardWalkIndices(spec, {i, count});
            QVERIFY(std::is_sorted(indices.begin(), indices.end()));
            // Sizes differ by at most one, the larger shards first.
            QCOMPARE(static_cast<long long>(indices.size()), smallest + (i < catalog.size() % count ? 1 : 0));
            const TrialFilter filter = shardFilter(spec, {i, count});
            std::set<std::pair<int, int>> draws;
            for (const long long w : indices) {
                ++owners[static_cast<std::size_t>(w)];
                const TrialSlot& s = catalog.trialSlots[static_cast<std::size_t>(w)];
                QVERIFY(filter(s));
                QVERIFY(inShard(spec, s, {i, count}));
                draws.insert({s.point, s.seedIndex});
            }
            // Contiguous in draw order: at most one partly used draw at each end.
            const long long fewest = (static_cast<long long>(indices.size()) + trialsPerDraw - 1) / trialsPerDraw;
            QVERIFY2(static_cast<long long>(draws.size()) <= fewest + 1,
                     qPrintable(QStringLiteral("shard %1/%2 draws %3 data sets for %4 trials")
                                    .arg(i).arg(count).arg(draws.size()).arg(indices.size())));
        }
        for (long long w = 0; w < catalog.size(); ++w)
            QVERIFY2(owners[static_cast<std::size_t>(w)] == 1, catalog.describe(w).c_str());
        // The filter says no for another shard's trials.
        if (count > 1) {
            const auto other = shardWalkIndices(spec, {1, count});
            const TrialFilter zero = shardFilter(spec, {0, count});
            for (const long long w : other)
                QVERIFY(!zero(catalog.trialSlots[static_cast<std::size_t>(w)]));
        }
    }

    void shardedTrialsEqualTheWholeRun()
    {
        // A trial computed in a shard (any n) is the unsharded run's trial, bit for bit.
        const ExperimentSpec spec = makeSpec(kSweep);
        const TrialCatalog catalog = catalogTrials(spec);
        const ResultSet whole = run(spec);
        QCOMPARE(whole.trials.size(), std::size_t{24});
        for (const int n : {3, 5}) {
            std::vector<ShardPart> parts = partsFor(catalog, n);
            std::vector<std::vector<TrialResult>> trials;
            for (int i = 0; i < n; ++i) {
                const ResultSet shard = run(spec, shardFilter(spec, {i, n}));
                QCOMPARE(static_cast<long long>(shard.trials.size()), static_cast<long long>(parts[static_cast<std::size_t>(i)].manifest.trials.size()));
                QCOMPARE(shard.totalTrials, static_cast<long long>(shard.trials.size()));
                QVERIFY(!shard.cancelled);
                // Ids from the shard's own keys match the catalog's (no dependence on n).
                for (std::size_t k = 0; k < shard.trials.size(); ++k) {
                    const TrialKey& key = shard.trials[k].key;
                    QCOMPARE(trialId(catalog.specHash, key.point, spec.schemes[static_cast<std::size_t>(key.scheme)].name,
                                     key.budget, key.seed),
                             parts[static_cast<std::size_t>(i)].manifest.trials[k]);
                }
                parts[static_cast<std::size_t>(i)].manifest.elapsedMs = shard.elapsedMs;
                parts[static_cast<std::size_t>(i)].manifest.backend = shard.backend;
                parts[static_cast<std::size_t>(i)].manifest.regimeNote = shard.regimeNote;
                trials.push_back(shard.trials);
            }
            QVERIFY(checkShardSet(catalog, parts).ok());
            auto merged = mergeShards(catalog, parts, trials);
            QVERIFY2(merged.ok(), merged.ok() ? "" : merged.error().text().c_str());
            QCOMPARE(merged->trials.size(), whole.trials.size());
            QCOMPARE(merged->totalTrials, whole.totalTrials);
            QVERIFY(!merged->cancelled);
            QCOMPARE(merged->regimeNote, whole.regimeNote);
            QCOMPARE(merged->backend, whole.backend);
            QVERIFY(merged->spec == spec);
            for (std::size_t k = 0; k < whole.trials.size(); ++k)
                QVERIFY2(trialDifference(merged->trials[k], whole.trials[k], false).isEmpty(),
                         qPrintable(QStringLiteral("n = %1, trial %2: %3").arg(n).arg(k)
                                        .arg(trialDifference(merged->trials[k], whole.trials[k], false))));
            // Trials handed to the wrong shard are refused.
            std::swap(trials[0], trials[1]);
            QVERIFY(!mergeShards(catalog, parts, trials).ok());
        }
    }

    void trialsFileRoundTripsBitExact()
    {
        // SQ-KV fills the effective dimensions; a NaN and odd values test the bit copies.
        const ExperimentSpec spec = makeSpec(R"({"d": 16, "tokens": 32, "queries": 4, "schemes": ["SQ-KV", "QKQV"],
                                               "budgets": [2], "seeds": {"count": 2}})");
        ResultSet results = run(spec);
        QCOMPARE(results.trials.size(), std::size_t{4});
        QVERIFY(results.trials[0].deffK.valid());
        results.trials[1].scoreErrorVarPredicted = std::numeric_limits<double>::quiet_NaN();
        results.trials[1].kl[0] = -0.0f;
        results.trials[1].relMseK = std::numeric_limits<double>::denorm_min();
        results.trials[2].timings.attention = 1.0 / 3.0;
        results.trials[3].samplesT.phi.clear();
        // Fields a run may leave at their defaults get values a forgotten field could not fake.
        TrialResult& odd = results.trials[0];
        odd.saturatedNorms = 7;
        odd.deffK.byGap = !odd.deffK.byGap;
        odd.deffV = EffectiveDimension{3, 2.75, 5, true};
        odd.argmaxShift.assign(odd.argmaxShift.size(), 1);
        odd.scoreErrorMean = -1e-300;
        odd.timings = TrialTimings{1.5, 2.5, 3.5, 4.5};
        std::vector<std::uint64_t> ids = {11, 22, 0xffffffffffffffffULL, 0};
        const std::string bytes = encodeTrials(0xfeedULL, results.trials, ids);
        QCOMPARE(QByteArray::fromStdString(bytes.substr(0, 8)), QByteArray("KVLTRIAL"));

        const auto decoded = decodeTrials(bytes);
        QVERIFY2(decoded.ok(), decoded.ok() ? "" : decoded.error().text().c_str());
        QCOMPARE(decoded->specHash, std::uint64_t{0xfeed});
        QVERIFY(decoded->ids == ids);
        QCOMPARE(decoded->trials.size(), results.trials.size());
        for (std::size_t k = 0; k < results.trials.size(); ++k)
            QVERIFY2(trialDifference(decoded->trials[k], results.trials[k], true).isEmpty(),
                     qPrintable(trialDifference(decoded->trials[k], results.trials[k], true)));
        QVERIFY(std::signbit(decoded->trials[1].kl[0]));
        QVERIFY(decoded->trials[3].samplesT.phi.empty());

        // Damage anywhere is refused: one flipped bit, a truncation, a foreign file, an empty shard is fine.
        std::string flipped = bytes;
        flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x01);
        const auto bad = decodeTrials(flipped);
        QVERIFY(!bad.ok());
        QVERIFY(bad.error().message.find("checksum") != std::string::npos);
        QVERIFY(!decodeTrials(std::string_view(bytes).substr(0, bytes.size() - 1)).ok());
        QVERIFY(!decodeTrials("KVLTRIA").ok());
        std::string foreign = bytes;
        foreign[0] = 'X';
        QVERIFY(!decodeTrials(foreign).ok());
        const auto empty = decodeTrials(encodeTrials(7, {}, {}));
        QVERIFY(empty.ok());
        QVERIFY(empty->trials.empty());
    }

    void everyTrialFieldRoundTripsExactly()
    {
        // forEachTrialField is the one list trials.bin writes and reads. Every field it names gets a
        // value of its own (distinct bits; NaN with a payload, -0; arrays at their longest), goes
        // through the file and comes back bit for bit. (A field missing from the list stops the build
        // at the size check beside it in core/spec/result.h.)
        const ExperimentSpec spec = makeSpec(R"({"d": 16, "tokens": 40, "queries": 6, "metrics": {"sample_cap": 5}})");
        TrialResult t;
        int fields = 0;
        forEachTrialField(t, [&](const char*, auto kind, auto& field) {
            using Field = std::decay_t<decltype(field)>;
            const int n = ++fields;
            if constexpr (std::is_same_v<Field, bool>) {
                field = true;
            } else if constexpr (std::is_same_v<Field, int>) {
                field = -1000 * n - 7;
            } else if constexpr (std::is_same_v<Field, std::uint64_t>) {
                field = 0xfedcba9876543210ULL + static_cast<std::uint64_t>(n);
            } else if constexpr (std::is_same_v<Field, double>) {
                field = n % 7 == 0 ? std::bit_cast<double>(0x7ff8000000000000ULL | static_cast<std::uint64_t>(n))
                                   : (n % 2 ? -1.0 : 1.0) * std::ldexp(1.0 + n, -3 * n);
            } else {
                // spec.queries entries per query, sample_cap per vector: the longest a record holds.
                field.resize(std::is_same_v<decltype(kind), PerQuery> ? 6 : 5);
                for (std::size_t i = 0; i < field.size(); ++i) {
                    if constexpr (std::is_same_v<typename Field::value_type, float>)
                        field[i] = i == 0 ? -0.0f
                                   : i == 1 ? std::bit_cast<float>(0x7fc00000u | static_cast<std::uint32_t>(n))
                                            : std::bit_cast<float>(0x3f800000u + 97u * static_cast<std::uint32_t>(n)
                                                                   + static_cast<std::uint32_t>(i));
                    else
                        field[i] = static_cast<std::uint8_t>(7 * n + static_cast<int>(i));
                }
            }
        });
        QCOMPARE(fields, 50);

        const std::string bytes = encodeTrials(1, {t}, {42});
        // The record by hand: id 8; key 4 x i32 + u64 = 24; 6 + 2 + 9 doubles = 136; saturated norms 4;
        // two effective dimensions of i32 + f64 + i32 + u8 = 34; 8 float arrays of 6 (8 + 24 each) = 256;
        // argmax shifts 8 + 6 = 14; 6 samples of 5 floats (8 + 20 each) = 168; timings 32: 676 bytes.
        constexpr std::size_t kRecord = 8 + 24 + 136 + 4 + 34 + 256 + 14 + 168 + 32;
        QCOMPARE(bytes.size(), 28 + kRecord + 8);
        QCOMPARE(maxTrialRecordBytes(spec), static_cast<double>(kRecord)); // the bound is this longest record
        std::int32_t point = 0;
        std::memcpy(&point, bytes.data() + 28 + 8, 4); // the first field after the id, little-endian
        QCOMPARE(point, -1007);
        std::uint64_t lastTiming = 0;
        std::memcpy(&lastTiming, bytes.data() + bytes.size() - 16, 8);
        QCOMPARE(lastTiming, std::bit_cast<std::uint64_t>(t.timings.metrics));

        const auto decoded = decodeTrials(bytes);
        QVERIFY2(decoded.ok(), decoded.ok() ? "" : decoded.error().text().c_str());
        QCOMPARE(decoded->ids, std::vector<std::uint64_t>{42});
        QCOMPARE(decoded->trials.size(), std::size_t{1});
        const QString diff = trialDifference(decoded->trials[0], t, true);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        QVERIFY(std::signbit(decoded->trials[0].kl[0]));
        // The comparison itself tells fields apart: one changed field is named.
        TrialResult changed = t;
        changed.samplesV.phi[3] = 0.5f;
        QCOMPARE(trialDifference(changed, t, true), QStringLiteral("samples_v.phi"));
        changed = t;
        changed.timings.attention = 0.25;
        QCOMPARE(trialDifference(changed, t, false), QString());
        QCOMPARE(trialDifference(changed, t, true), QStringLiteral("ms_attention"));
    }

    void manifestRoundTripsAndNamesBadKeys()
    {
        ShardManifest m;
        m.programVersion = "0.1.0";
        m.specHash = 0x8000000000000001ULL;
        m.shard = {2, 3};
        m.specTrials = 24;
        m.backend = "cpu (fallback: no OpenCL platform)";
        m.specBackend = "cpu (fallback: no OpenCL platform)";
        m.regimeNote = "nu = 3: \"heavy\"";
        m.elapsedMs = 12.5;
        m.trials = {0, 0xffffffffffffffffULL, 42};
        const std::string json = manifestToJson(m);
        const auto back = manifestFromJson(json);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QCOMPARE(back->programVersion, m.programVersion);
        QCOMPARE(back->specHash, m.specHash);
        QVERIFY(back->shard == m.shard);
        QCOMPARE(back->specTrials, m.specTrials);
        QCOMPARE(back->backend, m.backend);
        QCOMPARE(back->specBackend, m.specBackend);
        QCOMPARE(back->regimeNote, m.regimeNote);
        QCOMPARE(back->elapsedMs, m.elapsedMs);
        QVERIFY(back->trials == m.trials);

        auto fieldOf = [](std::string text) {
            const auto r = manifestFromJson(text);
            return r.ok() ? QStringLiteral("(accepted)") : QString::fromStdString(r.error().field);
        };
        auto without = [&](const std::string& key) {
            std::string text = json;
            const auto at = text.find("\"" + key + "\"");
            const auto end = text.find('\n', at);
            text.erase(at, end - at + 1);
            return text;
        };
        QCOMPARE(fieldOf(without("spec_hash")), QStringLiteral("spec_hash"));
        QCOMPARE(fieldOf(without("program_version")), QStringLiteral("program_version"));
        QCOMPARE(fieldOf("not json"), QStringLiteral("manifest.json"));
        QCOMPARE(fieldOf(R"({"format": "something else"})"), QStringLiteral("format"));
        std::string wrongCount = json;
        wrongCount.replace(wrongCount.find("\"trial_count\": 3"), 16, "\"trial_count\": 4");
        QCOMPARE(fieldOf(wrongCount), QStringLiteral("trial_count"));
        std::string badIndex = json;
        badIndex.replace(badIndex.find("\"index\": 2"), 10, "\"index\": 3");
        QCOMPARE(fieldOf(badIndex), QStringLiteral("shard"));
    }

    void checkAcceptsExactlyOnce()
    {
        const TrialCatalog catalog = catalogTrials(makeSpec(kSweep));
        for (const int n : {1, 3, 30})
            QVERIFY(checkShardSet(catalog, partsFor(catalog, n)).ok());
        // The order the directories are given in does not matter.
        auto parts = partsFor(catalog, 3);
        std::reverse(parts.begin(), parts.end());
        QVERIFY(checkShardSet(catalog, parts).ok());
    }

    void checkRefusesMissingShard()
    {
        const TrialCatalog catalog = catalogTrials(makeSpec(kSweep));
        auto parts = partsFor(catalog, 3);
        parts.erase(parts.begin() + 1);
        const auto checked = checkShardSet(catalog, parts);
        QVERIFY(!checked.ok());
        const std::string& text = checked.error().message;
        QVERIFY2(text.find("shard 1/3 is missing (8 trials") != std::string::npos, text.c_str());
        QVERIFY2(text.find("out/shard_0: shard 0/3") != std::string::npos, text.c_str());
        QVERIFY2(text.find("out/shard_2: shard 2/3") != std::string::npos, text.c_str());
    }

    void checkRefusesDuplicateShard()
    {
        const TrialCatalog catalog = catalogTrials(makeSpec(kSweep));
        auto parts = partsFor(catalog, 3);
        ShardPart copy = parts[2];
        copy.label = "elsewhere/shard_2_again";
        parts.push_back(copy);
        const auto checked = checkShardSet(catalog, parts);
        QVERIFY(!checked.ok());
        const std::string& text = checked.error().message;
        QVERIFY2(text.find("shard 2/3 is given 2 times: out/shard_2 and elsewhere/shard_2_again") != std::string::npos,
                 text.c_str());
        QVERIFY(text.find("missing") == std::string::npos);
    }

    void checkRefusesMismatches()
    {
        const TrialCatalog catalog = catalogTrials(makeSpec(kSweep));
        auto check = [&](auto change) {
            auto parts = partsFor(catalog, 3);
            change(parts);
            const auto r = checkShardSet(catalog, parts);
            return r.ok() ? std::string("(accepted)") : r.error().message;
        };
        auto has = [](const std::string& text, const char* what) { return text.find(what) != std::string::npos; };
        std::string text = check([](auto& p) { p[1].manifest.specHash ^= 1; });
        QVERIFY2(has(text, "out/shard_1: spec hash"), text.c_str());
        text = check([](auto& p) { p[2].manifest.programVersion = "0.2.0"; });
        QVERIFY2(has(text, "out/shard_2: made by KVLens 0.2.0"), text.c_str());
        text = check([](auto& p) { p[2].manifest.shard.count = 4; });
        QVERIFY2(has(text, "out/shard_2: shard 2/4 is one of 4 shards, but out/shard_0 is one of 3"), text.c_str());
        // A manifest that lost a trial, or claims another shard's trial.
        text = check([](auto& p) { p[1].manifest.trials.pop_back(); });
        QVERIFY2(has(text, "1 trials are in no shard"), text.c_str());
        text = check([](auto& p) { p[1].manifest.trials.push_back(p[0].manifest.trials.front()); });
        QVERIFY2(has(text, "1 trials are in more than one shard"), text.c_str());
        text = check([](auto& p) { p[0].manifest.trials.push_back(12345); });
        QVERIFY2(has(text, "out/shard_0: 1 trial ids that are not in the spec"), text.c_str());
        QVERIFY(!checkShardSet(catalog, {}).ok());
    }
};

QTEST_APPLESS_MAIN(TestShard)
#include "tst_shard.moc"
