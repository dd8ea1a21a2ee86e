// SPDX-License-Identifier: GPL-3.0-or-later
// Named schemes, exact bit accounting, and the CPU path encoder's score estimates.
#include "core/quant/path.h"
#include "core/quant/qjl.h"
#include "core/quant/codec_parts.h"
#include "core/quant/scheme.h"
#include "core/quant/wht.h"
#include "common/approx.h"

#include <QTest>

#include <cmath>

using namespace kvlens;

namespace {

RowMatrixXf gaussianRows(int n, int d, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf x(n, d);
    rng.fillNormal(x.data(), static_cast<std::size_t>(x.size()));
    return x;
}

} // namespace

class TestSchemes : public QObject {
    Q_OBJECT
private slots:
    void namedSchemesOfTheThreePapers()
    {
        for (const char* name : {"KV", "KQV", "QKQV", "Plain-KV", "Plain-QKV", "Plain-KQV", "Plain-QKQV", "TQ-KV",
                                 "TQ-QKV", "TQ-KQV", "TQ-QKQV", "KIVI"})
            QVERIFY2(findScheme(name).has_value(), name);
        // Paper B's SpectralQuant and paper C's calibrated schemes and controls.
        for (const char* name : {"KIVI-A2", "SQ-KV", "SQU-KV", "SQ-QKV", "HeadQ", "HeadQ-A2", "HeadQ-wrong-sign",
                                 "HeadQ-random-basis"}) {
            QVERIFY2(findScheme(name).has_value(), name);
            QVERIFY2(needsCalibration(*findScheme(name)), name);
            QVERIFY2(validateScheme(*findScheme(name), {2, 3, 4}, 128, "s").ok(), name);
        }
        // Twenty from the three papers' table; the schemes parts bring (core/quant/codec_parts.h) come after them.
        std::size_t fromParts = 0;
        for (const auto& k : partKinds())
            fromParts += k.schemes.size();
        QCOMPARE(namedSchemes().size(), std::size_t{20} + fromParts);
        QCOMPARE(namedSchemes()[19].name, std::string("HeadQ-random-basis"));
        QCOMPARE(findScheme("SQ-KV")->key.quantizer.text("allocation"), std::string("water_filling"));
        QCOMPARE(findScheme("SQU-KV")->key.quantizer.text("allocation"), std::string("uniform"));
        QVERIFY(findScheme("SQ-QKV")->key.has("qjl"));
        QVERIFY(findScheme("SQ-QKV")->value.residuals.empty());
        QVERIFY(findScheme("HeadQ")->key.has("headq"));
        QCOMPARE(findScheme("HeadQ-wrong-sign")->key.part("headq")->text("control"), std::string("wrong_sign"));
        QCOMPARE(findScheme("HeadQ-random-basis")->key.part("headq")->text("control"), std::string("random_basis"));
        QCOMPARE(findScheme("KIVI-A2")->value.tokenPolicy.kind, std::string("a2"));
        QCOMPARE(findScheme("KIVI-A2")->key, findScheme("KIVI")->key);
        // Paper A's names and paper B's are the same schemes.
        QCOMPARE(findScheme("KV")->key, findScheme("Plain-KV")->key);
        QCOMPARE(findScheme("KQV")->value, findScheme("TQ-KQV")->value);
        QCOMPARE(findScheme("QKQV")->key, findScheme("TQ-QKQV")->key);
        const auto kqv = *findScheme("KQV");
        QCOMPARE(kqv.key.transforms, std::vector<CodecPart>{CodecPart("wht")});
        QVERIFY(kqv.key.residuals.empty());
        QVERIFY(kqv.value.has("qjl"));
        QCOMPARE(kqv.value.bits.at(4), 3);
        const auto plainQkv = *findScheme("Plain-QKV");
        QVERIFY(plainQkv.key.transforms.empty());
        QVERIFY(plainQkv.key.has("qjl"));
        QVERIFY(plainQkv.value.residuals.empty());
        // Named schemes are stored normalized: every option of every part present.
        for (const SchemeConfig& named : namedSchemes())
            QCOMPARE(normalizedScheme(named), named);
        QVERIFY(!findScheme("KQQV").has_value());
        QVERIFY(!needsCalibration(*findScheme("KIVI")));
    }

    void bitsRules_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("atFour");
        QTest::newRow("n") << "n" << 4;
        QTest::newRow("n-1") << "n-1" << 3;
        QTest::newRow("n+2") << "n+2" << 6;
        QTest::newRow("absolute") << "3" << 3;
    }
    void bitsRules()
    {
        QFETCH(QString, text);
        QFETCH(int, atFour);
        const auto rule = BitsRule::parse(text.toStdString());
        QVERIFY(rule.has_value());
        QCOMPARE(rule->at(4), atFour);
        QCOMPARE(QString::fromStdString(rule->text()), text);
        QVERIFY(!BitsRule::parse("m-1").has_value());
        QVERIFY(!BitsRule::parse("n-").has_value());
    }

    void bitAccounting_data()
    {
        QTest::addColumn<QString>("scheme");
        QTest::addColumn<bool>("keyPath");
        QTest::addColumn<int>("d");
        QTest::addColumn<int>("budget");
        QTest::addColumn<double>("bits");
        // (4 x 128 code bits + 16 norm bits) / 128.
        QTest::newRow("KV key n=4 d=128") << "KV" << true << 128 << 4 << 4.125;
        // (3 x 128 + 16 norm + 128 sketch + 16 residual norm) / 128.
        QTest::newRow("KQV value n=4 d=128") << "KQV" << false << 128 << 4 << 4.25;
        // WHT pads 96 to 128 stored coordinates: (4 x 128 + 16) / 96.
        QTest::newRow("TQ-KV key n=4 d=96") << "TQ-KV" << true << 96 << 4 << 5.5;
        // No rotation, no padding: (4 x 96 + 16) / 96.
        QTest::newRow("KV key n=4 d=96") << "KV" << true << 96 << 4 << 4.0 + 16.0 / 96.0;
        // KIVI keys: per-channel groups of 32 tokens: 2 bits + 2 x 16 bits / 32 per coordinate.
        QTest::newRow("KIVI key n=2") << "KIVI" << true << 128 << 2 << 3.0;
        // KIVI values: per-token groups of 32 channels: 2 + 4 groups x 32 bits / 128.
        QTest::newRow("KIVI value n=2") << "KIVI" << false << 128 << 2 << 3.0;
    }
    void bitAccounting()
    {
        QFETCH(QString, scheme);
        QFETCH(bool, keyPath);
        QFETCH(int, d);
        QFETCH(int, budget);
        QFETCH(double, bits);
        const auto s = *findScheme(scheme.toStdString());
        const PathPlan plan = planPath(keyPath ? s.key : s.value, budget, d, keyPath ? PathSite::Keys : PathSite::Values,
                                       nullptr, EngineKind::Pcg64, 1);
        KVLENS_COMPARE_ABS(pathBitsPerCoordinate(plan, 1024), bits, 1e-12);
        // The preview from the configuration alone agrees with the plan.
        KVLENS_COMPARE_ABS(pathBitsPerCoordinate(keyPath ? s.key : s.value, budget, d, 1024), bits, 1e-12);
    }

    void validationNamesTheBits()
    {
        SchemeConfig s = *findScheme("KV");
        s.builtin = false;
        s.key.bits = BitsRule{true, 1};
        auto status = validateScheme(s, {2, 8}, 128, "schemes[0]");
        QVERIFY(!status.ok());
        QCOMPARE(QString::fromStdString(status.error().field), QStringLiteral("schemes[0].k.bits"));
        QVERIFY(status.error().message.find("budget n = 8") != std::string::npos);
        QVERIFY(validateScheme(s, {2, 7}, 128, "schemes[0]").ok());
    }

    void plansShareRandomnessAcrossSchemesAndBudgets()
    {
        // Same seed: KQV and QKQV key paths rotate with the same signs; keys and values differ.
        const auto kqv = *findScheme("KQV"), qkqv = *findScheme("QKQV");
        const PathPlan a = planPath(kqv.key, 4, 128, PathSite::Keys, nullptr, EngineKind::Mt19937_64, 9);
        const PathPlan b = planPath(qkqv.key, 3, 128, PathSite::Keys, nullptr, EngineKind::Mt19937_64, 9);
        const PathPlan v = planPath(qkqv.value, 3, 128, PathSite::Values, nullptr, EngineKind::Mt19937_64, 9);
        const RowMatrixXf x = gaussianRows(4, 128, 11);
        RowMatrixXf ya, yb, yv;
        a.transforms.front()->forward(x, ya);
        b.transforms.front()->forward(x, yb);
        v.transforms.front()->forward(x, yv);
        QCOMPARE(ya, yb);
        QVERIFY(ya != yv);
        // The signs are the seed's key-sign stream, drawn independently here.
        Rng rng(EngineKind::Mt19937_64, 9, Stream::KeySigns);
        QCOMPARE(*a.transforms.front()->whtSigns(), randomSigns(128, rng));
        QCOMPARE(b.residuals.front()->projectionColumns(), 128);
        QVERIFY(a.residuals.empty());
    }

    void scalarPathScoresAreTheDequantizedDotProduct()
    {
        const int d = 96, n = 200, nq = 8;
        const RowMatrixXf k = gaussianRows(n, d, 1), q = gaussianRows(nq, d, 2);
        const PathPlan plan = planPath(findScheme("TQ-KV")->key, 3, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 5);
        const PathResult r = encodePathCpu(plan, k, &q);
        QCOMPARE(r.reconstruction.cols(), static_cast<Eigen::Index>(d));
        QCOMPARE(r.baseScores.size(), Eigen::Index{0});
        // Independent computation in the original basis (the rotation is orthogonal).
        const RowMatrixXf expected = q * r.reconstruction.transpose() / std::sqrt(static_cast<float>(d));
        KVLENS_COMPARE_ABS((r.scores - expected).cwiseAbs().maxCoeff(), 0.0, 1e-4);
        // The rotated vector's relative distortion is d_p * mse (d_p = 128 stored coordinates);
        // undoing the rotation drops the error that landed in the 32 padding coordinates, so
        // the reconstruction keeps d/d_p of it: d * mse.
        const double rel = (k - r.reconstruction).squaredNorm() / k.squaredNorm();
        KVLENS_COMPARE_REL(rel, d * plan.quantizer->codebook()->mse, 0.05);
    }

    void qjlPathAddsTheSketchEstimate()
    {
        const int d = 64, n = 100, nq = 5;
        const RowMatrixXf k = gaussianRows(n, d, 3), q = gaussianRows(nq, d, 4);
        const PathPlan plan = planPath(findScheme("TQ-QKV")->key, 4, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 6);
        QCOMPARE(plan.bits, 3);
        const PathResult r = encodePathCpu(plan, k, &q);
        // Recompute the correction independently: the seed's sign and sketch streams, rotate,
        // quantize, sketch the residual.
        Rng signRng(EngineKind::Pcg64, 6, Stream::KeySigns), sketchRng(EngineKind::Pcg64, 6, Stream::KeySketch);
        const std::vector<float> signs = randomSigns(64, signRng);
        RowMatrixXf kr, qr, kHat;
        rotateRows(k, signs, kr);
        rotateRows(q, signs, qr);
        const NormQuantizer quantizer(cachedCodebook(CodebookLaw::Beta, 64, 3));
        NormCodes codes;
        quantizer.encode(kr, codes);
        quantizer.decode(codes, kHat);
        const QjlSketch sketch(QjlSketch::drawMatrix(64, 64, sketchRng));
        QjlCodes sketchCodes;
        sketch.encode(kr - kHat, sketchCodes);
        RowMatrixXf estimate;
        sketch.estimateInnerProducts(qr, sketchCodes, estimate);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        KVLENS_COMPARE_ABS((r.baseScores - qr * kHat.transpose() * scale).cwiseAbs().maxCoeff(), 0.0, 1e-4);
        KVLENS_COMPARE_ABS((r.scores - r.baseScores - scale * estimate).cwiseAbs().maxCoeff(), 0.0, 1e-4);
    }

    void uniformPathIsExactOnAWindow()
    {
        SchemeConfig s = *findScheme("KIVI");
        s.value.quantizer.options["window"] = 16.0;
        const RowMatrixXf v = gaussianRows(64, 32, 7);
        const PathPlan plan = planPath(s.value, 2, 32, PathSite::Values, nullptr, EngineKind::Pcg64, 1);
        const PathResult r = encodePathCpu(plan, v, nullptr);
        const double windowError = (v.bottomRows(16) - r.reconstruction.bottomRows(16)).cwiseAbs().maxCoeff();
        QVERIFY(windowError < 2e-3); // fp16 rounding of values below ~4
        QVERIFY((v.topRows(48) - r.reconstruction.topRows(48)).cwiseAbs().maxCoeff() > 0.05);
    }
};

QTEST_APPLESS_MAIN(TestSchemes)
#include "tst_schemes.moc"
