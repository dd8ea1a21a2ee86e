// SPDX-License-Identifier: GPL-3.0-or-later
// Sharded evaluations: shards of the shipped model's run, stored in eval_shard.bin and merged, give
// exactly the unsharded run's files; a missing, duplicated, foreign or damaged shard is refused
// naming it.
#include "common/shipped_model.h"
#include "core/eval/eval_files.h"
#include "core/eval/eval_shard.h"
#include "core/eval/evaluator.h"

#include <QTest>

#include <fstream>

using namespace kvlens;
using namespace kvlens::eval;

namespace {

std::vector<std::int32_t> heldoutTokens(std::size_t count)
{
    std::ifstream in(kvlens::testing::shippedModelDir() + "/heldout.txt", std::ios::binary);
    std::vector<std::int32_t> ids;
    for (char c; ids.size() < count && in.get(c);)
        ids.push_back(static_cast<unsigned char>(c));
    return ids;
}

EvalSpec shardSpec()
{
    EvalSpec s;
    s.modelDir = kvlens::testing::shippedModelDir();
    s.tokensFile = "heldout";
    s.ctx = 64;
    s.budgets = {2};
    s.attribution = Attribution::Layers;
    s.threads = 2;
    for (const char* name : {"TQ-KV", "q8_0"})
        s.schemes.push_back(EvalScheme{*findScheme(name), {}, {}});
    return s;
}

EvalResult run(const EvalSpec& spec, const std::vector<std::int32_t>& tokens, EvalShard shard)
{
    auto r = runEval(spec, kvlens::testing::shippedModel(), tokens, std::nullopt, {}, {}, shard);
    if (!r)
        qFatal("%s", r.error().text().c_str());
    return std::move(*r);
}

/// A shard as merge reads it: through eval_shard.bin's bytes and a manifest.
EvalShardInput roundTrip(const EvalResult& r, const EvalIdentity& identity, const std::string& dir)
{
    const std::string bytes = encodeEvalShard(r);
    EvalShardInput in;
    in.dir = dir;
    in.result.spec = r.spec;
    if (auto s = decodeEvalShard(bytes, dir + "/eval_shard.bin", in.result); !s)
        qFatal("%s", s.error().text().c_str());
    auto manifest = parseEvalManifest(evalManifestJson(r, identity, 0), dir + "/manifest.json");
    if (!manifest)
        qFatal("%s", manifest.error().text().c_str());
    in.manifest = std::move(*manifest);
    return in;
}

} // namespace

class TestEvalShard : public QObject {
    Q_OBJECT

    EvalIdentity m_identity{1, 2, 3, "test", 2};

private slots:
    void shardsMergeIntoTheUnshardedRun()
    {
        const EvalSpec spec = shardSpec();
        const auto tokens = heldoutTokens(64 * 5); // five chunks of 64, no calibration
        const EvalResult whole = run(spec, tokens, {});
        QCOMPARE(whole.chunksScored, 5);
        std::vector<EvalShardInput> shards;
        std::vector<int> chunkCounts;
        for (int i : {2, 0, 1}) { // any order
            EvalResult part = run(spec, tokens, {i, 3});
            chunkCounts.push_back(part.chunksScored);
            shards.push_back(roundTrip(part, m_identity, "shard" + std::to_string(i)));
        }
        // Chunks [5 i / 3, 5 (i + 1) / 3): {3, 4}, {0}, {1, 2}.
        QCOMPARE(chunkCounts, (std::vector<int>{2, 1, 2}));
        auto merged = mergeEvalShards(shards);
        QVERIFY2(merged, merged ? "" : merged.error().text().c_str());
        // The files of the merged run are the unsharded run's, byte for byte.
        QCOMPARE(summaryCsv(*merged), summaryCsv(whole));
        QCOMPARE(tokensCsv(*merged), tokensCsv(whole));
        QCOMPARE(layersCsv(*merged), layersCsv(whole));
        QCOMPARE(merged->referenceNllMean, whole.referenceNllMean);
        QCOMPARE(merged->chunkIndices, (std::vector<int>{0, 1, 2, 3, 4}));
        // And an unsharded result survives its own round trip bit for bit.
        const EvalShardInput self = roundTrip(whole, m_identity, "whole");
        QCOMPARE(encodeEvalShard(self.result), encodeEvalShard(whole));
    }

    void badShardsAreRefusedNamingThem_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("expected");
        QTest::newRow("missing") << 0 << "shard 1 of 3 is missing";
        QTest::newRow("duplicated") << 1 << "shard2: is shard 0, which shard0 already is";
        QTest::newRow("other spec") << 2 << "shard1: ran another spec than shard0";
        QTest::newRow("other weights") << 3 << "shard1: ran other weights than shard0";
        QTest::newRow("other text") << 4 << "shard1: read another text than shard0";
        QTest::newRow("other count") << 5 << "shard1: is a shard of 4, shard0 of 3";
        QTest::newRow("other threads") << 6 << "shard1: ran its forward passes on 3 threads, shard0 on 2";
    }

    void badShardsAreRefusedNamingThem()
    {
        QFETCH(int, kind);
        QFETCH(QString, expected);
        const EvalSpec spec = shardSpec();
        const auto tokens = heldoutTokens(64 * 3);
        std::vector<EvalShardInput> shards;
        for (int i = 0; i < 3; ++i)
            shards.push_back(roundTrip(run(spec, tokens, {i, 3}), m_identity, "shard" + std::to_string(i)));
        switch (kind) {
        case 0: shards.erase(shards.begin() + 1); break;
        case 1: shards[2].manifest.shardIndex = 0; break;
        case 2: shards[1].manifest.identity.specHash ^= 1; break;
        case 3: shards[1].manifest.identity.modelHash ^= 1; break;
        case 4: shards[1].manifest.identity.tokensHash ^= 1; break;
        case 5: shards[1].manifest.shardCount = 4; break;
        case 6: shards[1].manifest.identity.threads = 3; break;
        }
        auto merged = mergeEvalShards(shards);
        QVERIFY(!merged);
        QVERIFY2(QString::fromStdString(merged.error().text()).contains(expected), merged.error().text().c_str());
    }

    void damagedFilesAreRefused()
    {
        const EvalResult r = run(shardSpec(), heldoutTokens(64 * 2), {});
        std::string bytes = encodeEvalShard(r);
        EvalResult into;
        std::string flipped = bytes;
        flipped[bytes.size() / 2] ^= 0x10;
        auto s = decodeEvalShard(flipped, "x.bin", into);
        QVERIFY(!s);
        QVERIFY2(s.error().message.find("checksum mismatch") != std::string::npos, s.error().text().c_str());
        s = decodeEvalShard(bytes.substr(0, bytes.size() - 3), "x.bin", into);
        QVERIFY(!s);
        s = decodeEvalShard("KVLEVAL1", "x.bin", into);
        QVERIFY(!s);
        QVERIFY(decodeEvalShard(bytes, "x.bin", into).ok());
    }

    void theSpecHashIgnoresPathsAndThreads()
    {
        EvalSpec a = shardSpec(), b = shardSpec();
        b.modelDir = "/elsewhere/model";
        b.threads = 7;
        b.memoryLimitMb = 1000;
        QCOMPARE(evalSpecHash(a), evalSpecHash(b));
        b.ctx = 128;
        QVERIFY(evalSpecHash(a) != evalSpecHash(b));
        QVERIFY(tokensHash({1, 2, 3}) != tokensHash({1, 2, 4}));
        QVERIFY(tokensHash({1, 2}) != tokensHash({1, 2, 0}));
    }
};

QTEST_GUILESS_MAIN(TestEvalShard)
#include "tst_eval_shard.moc"
