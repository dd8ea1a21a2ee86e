// SPDX-License-Identifier: GPL-3.0-or-later
// Constructions that can show an effect: why an axis-aligned subspace defeats the Walsh-Hadamard
// rotation (coherence with the Sylvester ordering), and the seeded permutation that removes it.
#include "core/experiment/runner.h"
#include "core/spec/spec_json.h"
#include "core/quant/path.h"
#include "core/quant/qjl.h"
#include "core/quant/scheme.h"
#include "core/quant/wht.h"
#include "core/regimes/regime.h"
#include "common/approx.h"

#include <QTest>

#include <algorithm>
#include <cmath>

using namespace kvlens;

namespace {

Dataset lowRank(const char* basis, int d, int r, int tokens, std::uint64_t seed)
{
    const Regime* regime = findRegime("low_rank");
    RegimeParams params{{"rank", double(r)}, {"noise", 0.0}, {"basis", std::string(basis)}};
    const DataShape shape{d, tokens, 8, 0};
    auto normalized = regime->normalize(params, shape);
    if (!normalized)
        qFatal("%s", normalized.error().text().c_str());
    auto data = regime->generate(*normalized, shape, EngineKind::Pcg64, seed);
    if (!data)
        qFatal("%s", data.error().text().c_str());
    return std::move(data).value();
}

PathConfig whtPath(const char* transform)
{
    PathConfig p;
    p.transforms = {CodecPart(transform)};
    return normalizedScheme(SchemeConfig{"", "", p, p, false}).key;
}

RowMatrixXf forward(const PathPlan& plan, const RowMatrixXf& x)
{
    RowMatrixXf y;
    plan.transforms.front()->forward(x, y);
    return y;
}

/// x with its columns in the order of the permuted rotation (stored i = original permutation[i]).
RowMatrixXf permutedColumns(const PathPlan& plan, const RowMatrixXf& x)
{
    const std::vector<int>& p = *plan.transforms.front()->permutation();
    RowMatrixXf out(x.rows(), x.cols());
    for (std::size_t i = 0; i < p.size(); ++i)
        out.col(static_cast<Eigen::Index>(i)) = x.col(p[i]);
    return out;
}

/// Largest |y(k) - y(k mod r)| over a row: 0 when the row repeats with period r.
float periodDefect(const RowMatrixXf& y, int row, int r)
{
    float worst = 0.0f;
    for (Eigen::Index k = 0; k < y.cols(); ++k)
        worst = std::max(worst, std::abs(y(row, k) - y(row, k % r)));
    return worst;
}

/// Mean over the scheme's trials of measured / predicted score-error variance.
double varianceExcess(const ResultSet& rs, const char* scheme)
{
    int s = -1;
    for (std::size_t i = 0; i < rs.schemes.size(); ++i)
        if (rs.schemes[i].name == scheme)
            s = static_cast<int>(i);
    double sum = 0.0;
    int n = 0;
    for (const TrialResult& t : rs.trials)
        if (t.key.scheme == s) {
            sum += t.scoreErrorVar / t.scoreErrorVarPredicted;
            ++n;
        }
    return sum / n;
}

} // namespace

class TestConstructions : public QObject {
    Q_OBJECT
private slots:
    void axisSubspaceRepeatsAfterTheWht()
    {
        // x on the first r axes: H D x mixes only the first r Sylvester columns, whose entries
        // (-1)^popcount(j & k) depend on k mod r alone, so every rotated vector repeats with
        // period r: d/r copies of r values, and their quantization errors repeat with them.
        const int d = 256, r = 8;
        const Dataset axis = lowRank("axis", d, r, 16, 3);
        const PathPlan tq = planPath(whtPath("wht"), 4, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 3);
        RowMatrixXf y = forward(tq, axis.keys);
        for (int row = 0; row < 16; ++row)
            QCOMPARE(periodDefect(y, row, r), 0.0f);
        // r random axes map to Hadamard columns without that structure, and so does the permuted
        // rotation of the same axis-aligned data.
        const Dataset random = lowRank("random_axes", d, r, 16, 3);
        y = forward(tq, random.keys);
        QVERIFY(periodDefect(y, 0, r) > 0.1f);
        const PathPlan permuted = planPath(whtPath("wht_permuted"), 4, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 3);
        QVERIFY(permuted.transforms.front()->permutation());
        std::vector<int> sorted = *permuted.transforms.front()->permutation();
        std::sort(sorted.begin(), sorted.end());
        for (int i = 0; i < d; ++i)
            QCOMPARE(sorted[static_cast<std::size_t>(i)], i);
        // The same signs: the permutation is the only change.
        QCOMPARE(forward(permuted, axis.keys), forward(tq, permutedColumns(permuted, axis.keys)));
        y = forward(permuted, axis.keys);
        for (int row = 0; row < 4; ++row)
            QVERIFY(periodDefect(y, row, r) > 0.1f);
    }

    void permutationKeepsScoresAndReconstructionOrder()
    {
        // Keys and queries permuted alike keep every dot product, so the scores are those of the
        // unpermuted path on permuted columns, and the reconstruction is its columns put back.
        const int d = 64;
        const Dataset data = lowRank("haar", d, 8, 32, 5);
        const PathPlan permuted = planPath(whtPath("wht_permuted"), 4, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 5);
        const PathPlan plain = planPath(whtPath("wht"), 4, d, PathSite::Keys, nullptr, EngineKind::Pcg64, 5);
        const RowMatrixXf xp = permutedColumns(permuted, data.keys), qp = permutedColumns(permuted, data.queries);
        const PathResult a = encodePathCpu(permuted, data.keys, &data.queries);
        const PathResult b = encodePathCpu(plain, xp, &qp);
        QCOMPARE(a.scores, b.scores);
        const std::vector<int>& order = *permuted.transforms.front()->permutation();
        for (int i = 0; i < d; ++i)
            QCOMPARE(RowMatrixXf(a.reconstruction.col(order[static_cast<std::size_t>(i)])), RowMatrixXf(b.reconstruction.col(i)));
        // The permutation costs no bits.
        QCOMPARE(pathBitsPerCoordinate(permuted, 32), pathBitsPerCoordinate(plain, 32));
    }

    void qjlReconstructionErrorMatchesItsClosedForm_data()
    {
        QTest::addColumn<bool>("orthogonal");
        QTest::addColumn<int>("m");
        QTest::newRow("gaussian, m = dim") << false << 128;
        QTest::newRow("gaussian, m = 4 dim") << false << 512;
        QTest::newRow("orthogonal, m = dim") << true << 128;
        QTest::newRow("orthogonal, m = dim / 2") << true << 64;
    }
    void qjlReconstructionErrorMatchesItsClosedForm()
    {
        // E||r^ - r||^2 / ||r||^2 of the unbiased reconstruction: ((pi/2) dim - 1)/m for Gaussian
        // rows (1.56 at m = dim: it adds energy), (pi/2) dim/m - 1 for orthogonal ones; the MSE
        // shrinkage leaves e / (1 + e).
        QFETCH(bool, orthogonal);
        QFETCH(int, m);
        const int dim = 128, rows = 2000;
        Rng rng(EngineKind::Pcg64, 11, Stream::KeySketch);
        const RowMatrixXf s = orthogonal ? QjlSketch::drawOrthogonalMatrix(m, dim, rng) : QjlSketch::drawMatrix(m, dim, rng);
        if (orthogonal && m <= dim) {
            const Eigen::MatrixXd gram = (s * s.transpose()).cast<double>();
            QVERIFY((gram - dim * Eigen::MatrixXd::Identity(m, m)).cwiseAbs().maxCoeff() < 1e-3 * dim);
        }
        const QjlSketch sketch(s, ScalarFormat::Fp32);
        Rng data(EngineKind::Pcg64, 12, Stream::Keys);
        RowMatrixXf r(rows, dim);
        data.fillNormal(r.data(), static_cast<std::size_t>(r.size()));
        QjlCodes codes;
        RowMatrixXf signs, rHat;
        sketch.encode(r, codes, signs);
        sketch.reconstruct(signs, codes.norms, rHat);
        const double e = (rHat - r).squaredNorm() / r.squaredNorm();
        const double closed = QjlSketch::reconstructionError(m, dim, orthogonal);
        KVLENS_COMPARE_REL(e, closed, 0.03);
        const double alpha = QjlSketch::mseShrinkage(m, dim, orthogonal);
        const double shrunk = (alpha * rHat - r).squaredNorm() / r.squaredNorm();
        KVLENS_COMPARE_REL(shrunk, closed / (1.0 + closed), 0.03);
    }

    void theScoreErrorFollowsTheConstruction()
    {
        // Measured / predicted score-error variance of WHT + 4-bit Lloyd keys: near 1 for a Haar
        // subspace, far above it for axis-aligned keys (the limit is d / r), back near 1 with the
        // permuted rotation on the same data.
        auto run = [](const char* basis) {
            const std::string json =
                std::string("{\"regime\": {\"name\": \"low_rank\", \"rank\": 8, \"noise\": 0.0, \"basis\": \"") + basis
                + "\"}, \"d\": 256, \"tokens\": 512, \"queries\": 32, \"budgets\": [4], \"seeds\": {\"count\": 2},"
                  " \"schemes\": [\"TQ-KV\", {\"name\": \"TQP-KV\", \"k\": {\"rotation\": \"wht_permuted\"},"
                  " \"v\": {\"rotation\": \"wht_permuted\"}}]}";
            auto spec = specFromJson(json);
            if (!spec)
                qFatal("%s", spec.error().text().c_str());
            CpuBackend backend(2);
            auto r = runExperiment(*spec, backend);
            if (!r)
                qFatal("%s", r.error().text().c_str());
            return std::move(r).value();
        };
        const ResultSet haar = run("haar"), axis = run("axis");
        const double haarTq = varianceExcess(haar, "TQ-KV"), axisTq = varianceExcess(axis, "TQ-KV"),
                     axisPermuted = varianceExcess(axis, "TQP-KV");
        qInfo("measured/predicted score-error variance: haar %.2f, axis %.2f, axis permuted %.2f", haarTq, axisTq,
              axisPermuted);
        KVLENS_VERIFY_IN_RANGE(haarTq, 0.5, 2.0);
        QVERIFY2(axisTq > 4.0, qPrintable(QString::number(axisTq)));
        KVLENS_VERIFY_IN_RANGE(axisPermuted, 0.5, 2.5);
    }
};

QTEST_GUILESS_MAIN(TestConstructions)
#include "tst_constructions.moc"
