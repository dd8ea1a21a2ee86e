// SPDX-License-Identifier: GPL-3.0-or-later
// Each regime's defining property at a fixed seed, determinism, and parameter validation.
#include "core/regimes/regime.h"
#include "common/approx.h"

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>

#include <QTest>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string_view>
#include <vector>

using namespace kvlens;

namespace {

Dataset generate(std::string_view name, RegimeParams params, DataShape shape, std::uint64_t seed = 1)
{
    const Regime* regime = findRegime(name);
    Q_ASSERT(regime);
    auto normalized = regime->normalize(params, shape);
    Q_ASSERT(normalized.ok());
    auto data = regime->generate(*normalized, shape, EngineKind::Pcg64, seed);
    Q_ASSERT(data.ok());
    return std::move(data).value();
}

double kurtosis(const RowMatrixXf& x)
{
    const Eigen::ArrayXd v = Eigen::Map<const Eigen::VectorXf>(x.data(), x.size()).cast<double>().array();
    const double mean = v.mean();
    const double m2 = (v - mean).square().mean();
    const double m4 = (v - mean).square().square().mean();
    return m4 / (m2 * m2);
}

Eigen::VectorXd singularValues(const RowMatrixXf& x)
{
    return Eigen::JacobiSVD<Eigen::MatrixXd>(x.cast<double>()).singularValues();
}

Eigen::MatrixXd topRightSingularVectors(const RowMatrixXf& x, int r)
{
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(x.cast<double>(), Eigen::ComputeThinV);
    return svd.matrixV().leftCols(r);
}

} // namespace

class TestRegimes : public QObject {
    Q_OBJECT
private slots:
    void registryListsTheDesignRegimes()
    {
        for (const char* name : {"gaussian", "heavy_tail", "low_rank", "spectral_decay", "outlier_channels",
                                 "kv_subspace", "focused", "imported"})
            QVERIFY2(findRegime(name) != nullptr, name);
        QVERIFY(findRegime("nope") == nullptr);
        QVERIFY(regimeNames().find("low_rank") != std::string::npos);
    }

    void modelCellsAreACapability()
    {
        // Code asks a regime whether its data are a model's (layer, head) cells instead of testing
        // its name: such a regime reads a dump (seed-independent) and names the cell in its parameters.
        int withCells = 0;
        for (const Regime* r : allRegimes()) {
            if (!r->hasModelCells())
                continue;
            ++withCells;
            QVERIFY2(r->seedIndependent(), r->name().data());
            for (const char* key : {"layer", "head"})
                QVERIFY2(std::any_of(r->params().begin(), r->params().end(), [&](const ParamDesc& p) { return p.key == key; }),
                         key);
        }
        QCOMPARE(withCells, 1);
        QVERIFY(findRegime("model")->hasModelCells());
        QVERIFY(!findRegime("imported")->hasModelCells()); // seed-independent, but one tensor, no cells
        QVERIFY(!findRegime("gaussian")->hasModelCells());
    }

    void everyRegimeIsDeterministicAndShaped()
    {
        const DataShape shape{32, 200, 20, 50};
        for (const Regime* regime : allRegimes()) {
            if (regime->seedIndependent())
                continue; // reads a file instead of drawing: tst_imported, tst_model_dump
            const Dataset a = generate(regime->name(), {}, shape, 5);
            const Dataset b = generate(regime->name(), {}, shape, 5);
            const Dataset c = generate(regime->name(), {}, shape, 6);
            QCOMPARE(a.keys.rows(), 200);
            QCOMPARE(a.keys.cols(), 32);
            QCOMPARE(a.queries.rows(), 20);
            QCOMPARE(a.calibrationKeys.rows(), 50);
            QCOMPARE(a.calibrationQueries.rows(), 50);
            QVERIFY2(a.keys == b.keys && a.values == b.values && a.queries == b.queries
                         && a.calibrationValues == b.calibrationValues,
                     regime->name().data());
            QVERIFY2(a.keys != c.keys, regime->name().data());
            QVERIFY2(a.keys.topRows(50) != a.calibrationKeys, regime->name().data());
            QVERIFY(a.keys.allFinite() && a.values.allFinite() && a.queries.allFinite());
        }
        // Without a calibration request no calibration set is drawn.
        const Dataset none = generate("gaussian", {}, DataShape{16, 10, 4, 0});
        QCOMPARE(none.calibrationKeys.rows(), 0);
    }

    void validationNamesTheField_data()
    {
        QTest::addColumn<QString>("regime");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QVariant>("value");
        QTest::addColumn<QString>("field");
        QTest::newRow("nu below range") << "heavy_tail" << "nu" << QVariant(1.0) << "regime.nu";
        QTest::newRow("nu above range") << "heavy_tail" << "nu" << QVariant(500.0) << "regime.nu";
        QTest::newRow("mode not a choice") << "heavy_tail" << "mode" << QVariant("joint") << "regime.mode";
        QTest::newRow("mode not a string") << "heavy_tail" << "mode" << QVariant(1.0) << "regime.mode";
        QTest::newRow("rank above d") << "low_rank" << "rank" << QVariant(65.0) << "regime.rank";
        QTest::newRow("rank not integer") << "low_rank" << "rank" << QVariant(2.5) << "regime.rank";
        QTest::newRow("negative noise") << "low_rank" << "noise" << QVariant(-0.1) << "regime.noise";
        QTest::newRow("alpha NaN") << "spectral_decay" << "alpha" << QVariant(std::nan("")) << "regime.alpha";
        QTest::newRow("channels above d") << "outlier_channels" << "channels" << QVariant(65.0) << "regime.channels";
        QTest::newRow("overlap above 1") << "kv_subspace" << "overlap" << QVariant(1.5) << "regime.overlap";
        QTest::newRow("kv rank above d/2") << "kv_subspace" << "rank" << QVariant(33.0) << "regime.rank";
        QTest::newRow("beta negative") << "focused" << "beta" << QVariant(-1.0) << "regime.beta";
        QTest::newRow("unknown key") << "gaussian" << "sigma" << QVariant(1.0) << "regime.sigma";
    }
    void validationNamesTheField()
    {
        QFETCH(QString, regime);
        QFETCH(QString, key);
        QFETCH(QVariant, value);
        QFETCH(QString, field);
        RegimeParams params;
        if (value.typeId() == QMetaType::QString)
            params[key.toStdString()] = value.toString().toStdString();
        else
            params[key.toStdString()] = value.toDouble();
        const auto result = findRegime(regime.toStdString())->normalize(params, DataShape{64, 100, 10, 0});
        QVERIFY(!result.ok());
        QCOMPARE(QString::fromStdString(result.error().field), field);
        QVERIFY(!result.error().message.empty());
    }

    void normalizeFillsDefaults()
    {
        const auto result = findRegime("heavy_tail")->normalize({{"nu", 2.0}}, DataShape{});
        QVERIFY(result.ok());
        QCOMPARE(paramNumber(*result, "nu"), 2.0);
        QCOMPARE(paramText(*result, "mode"), std::string("marginal"));
    }

    void gaussianHasUnitVariance()
    {
        const Dataset data = generate("gaussian", {}, DataShape{128, 2048, 64, 0});
        const double n = static_cast<double>(data.keys.size());
        const double mean = data.keys.cast<double>().mean();
        const double var = data.keys.cast<double>().array().square().mean() - mean * mean;
        KVLENS_COMPARE_ABS(mean, 0.0, 4.0 / std::sqrt(n));
        KVLENS_COMPARE_ABS(var, 1.0, 4.0 * std::sqrt(2.0 / n));
    }

    void heavyTailKurtosisGrowsAsNuFalls()
    {
        const DataShape shape{128, 4096, 16, 0};
        double previous = 0.0;
        for (double nu : {30.0, 8.0, 5.0}) {
            const double k = kurtosis(generate("heavy_tail", {{"nu", nu}}, shape, 3).keys);
            QVERIFY2(k > previous, qPrintable(QStringLiteral("nu %1: kurtosis %2 after %3").arg(nu).arg(k).arg(previous)));
            previous = k;
        }
        // Student-t excess kurtosis is 6/(nu - 4): at nu = 30 the kurtosis is 3.2308.
        KVLENS_COMPARE_ABS(kurtosis(generate("heavy_tail", {{"nu", 30.0}}, shape, 3).keys), 3.0 + 6.0 / 26.0, 0.05);
        // The vector mode scales whole vectors: norms vary far more than in the marginal mode.
        const Dataset vec = generate("heavy_tail", {{"nu", 3.0}, {"mode", std::string("vector")}}, shape, 3);
        const Eigen::ArrayXd norms = vec.keys.rowwise().norm().cast<double>().array();
        const double cv = std::sqrt((norms - norms.mean()).square().mean()) / norms.mean();
        QVERIFY2(cv > 0.3, qPrintable(QString::number(cv)));
    }

    void lowRankSingularValueGap()
    {
        const int d = 128, n = 1024, r = 8;
        const double sigma = 0.1;
        const Dataset data = generate("low_rank", {{"rank", double(r)}, {"noise", sigma}}, DataShape{d, n, 16, 0});
        const Eigen::VectorXd s = singularValues(data.keys);
        // The (r+1)-th singular value is at the noise level: the top singular value of an
        // n x d N(0, sigma^2) matrix is about sigma (sqrt(n) + sqrt(d)).
        const double noiseLevel = sigma * (std::sqrt(double(n)) + std::sqrt(double(d)));
        KVLENS_COMPARE_REL(s(r), noiseLevel, 0.15);
        // The r-th is at the signal level sqrt(n d / r), far above.
        QVERIFY(s(r - 1) > 0.5 * std::sqrt(double(n) * d / r));
    }

    void subspaceBasisKinds()
    {
        // Without noise the data lives exactly in the subspace: axis puts it on coordinates
        // 0..r-1, random_axes on r coordinates the note names, haar on none in particular.
        const int d = 64, r = 4;
        const DataShape shape{d, 512, 32, 0};
        auto supportOf = [&](const RowMatrixXf& x) {
            std::vector<int> axes;
            for (int c = 0; c < d; ++c)
                if (x.col(c).cwiseAbs().maxCoeff() > 0.0f)
                    axes.push_back(c);
            return axes;
        };
        for (const char* regime : {"low_rank", "kv_subspace"}) {
            const Dataset axis = generate(regime, {{"rank", double(r)}, {"noise", 0.0}, {"basis", std::string("axis")}}, shape);
            QCOMPARE(supportOf(axis.keys), (std::vector<int>{0, 1, 2, 3}));
            QCOMPARE(supportOf(axis.queries), (std::vector<int>{0, 1, 2, 3}));
            const Dataset random = generate(regime, {{"rank", double(r)}, {"noise", 0.0}, {"basis", std::string("random_axes")}},
                                            shape, 9);
            const std::vector<int> support = supportOf(random.keys);
            QCOMPARE(support.size(), std::size_t{4});
            QVERIFY(support != (std::vector<int>{0, 1, 2, 3}));
            if (std::string_view(regime) == "low_rank") {
                // The note lists the axes in basis order; as a set they are the support.
                const std::string prefix = "subspace axes:";
                QVERIFY2(random.note.rfind(prefix, 0) == 0, random.note.c_str());
                std::vector<int> listed;
                std::istringstream in(random.note.substr(prefix.size()));
                for (int a; in >> a;)
                    listed.push_back(a);
                std::sort(listed.begin(), listed.end());
                QCOMPARE(listed, support);
            }
            const Dataset haar = generate(regime, {{"rank", double(r)}, {"noise", 0.0}}, shape);
            QCOMPARE(supportOf(haar.keys).size(), std::size_t{d});
        }
        // kv_subspace with axis: values on the next r axes where the subspaces do not overlap.
        const Dataset kv = generate("kv_subspace", {{"rank", double(r)}, {"noise", 0.0}, {"overlap", 0.0},
                                                    {"basis", std::string("axis")}}, shape);
        QCOMPARE(supportOf(kv.values), (std::vector<int>{4, 5, 6, 7}));
    }

    void latentDecayAndQueryOverlap()
    {
        const int d = 64, r = 4, n = 20000;
        const double decay = 1.0;
        const Dataset data = generate("low_rank", {{"rank", double(r)}, {"noise", 0.0}, {"basis", std::string("axis")},
                                                   {"decay", decay}, {"query_overlap", 0.6}},
                                      DataShape{d, n, n, 0}, 4);
        // z ~ N(0, diag lambda), lambda_i = d i^-1 / H_4 (H_4 = 25/12): on the axes, the variances.
        const double harmonic = 1.0 + 0.5 + 1.0 / 3.0 + 0.25;
        for (int i = 0; i < r; ++i) {
            const double var = data.keys.col(i).cast<double>().squaredNorm() / n;
            KVLENS_COMPARE_REL(var, d / ((i + 1) * harmonic), 0.05);
        }
        // Queries: a fraction c^2 = 0.36 of their energy in the key subspace, total E|q|^2 = d.
        const double inside = data.queries.leftCols(r).cast<double>().squaredNorm() / n;
        const double total = data.queries.cast<double>().squaredNorm() / n;
        KVLENS_COMPARE_REL(total, d, 0.03);
        KVLENS_COMPARE_REL(inside / total, 0.36, 0.03);
        // Orthogonal queries: nothing in the subspace at all.
        const Dataset orthogonal = generate("low_rank", {{"rank", double(r)}, {"noise", 0.0}, {"basis", std::string("axis")},
                                                         {"query_overlap", 0.0}}, DataShape{d, 64, 64, 0}, 4);
        QCOMPARE(orthogonal.queries.leftCols(r).cwiseAbs().maxCoeff(), 0.0f);
    }

    void heavyTailStandardizes_data()
    {
        QTest::addColumn<double>("nu");
        QTest::addColumn<QString>("mode");
        QTest::newRow("nu 3 marginal") << 3.0 << "marginal";
        QTest::newRow("nu 5 vector") << 5.0 << "vector";
        QTest::newRow("nu 1.5 marginal (MAD)") << 1.5 << "marginal";
    }
    void heavyTailStandardizes()
    {
        QFETCH(double, nu);
        QFETCH(QString, mode);
        const DataShape shape{64, 8192, 16, 0};
        const Dataset raw = generate("heavy_tail", {{"nu", nu}, {"mode", mode.toStdString()}}, shape, 5);
        const Dataset unit = generate("heavy_tail", {{"nu", nu}, {"mode", mode.toStdString()}, {"standardize", std::string("true")}},
                                      shape, 5);
        // The same draws, scaled by one factor.
        const double factor = double(unit.keys(0, 0)) / raw.keys(0, 0);
        KVLENS_COMPARE_REL(double(unit.keys(7, 9)), factor * raw.keys(7, 9), 1e-5);
        std::vector<double> v(unit.keys.data(), unit.keys.data() + unit.keys.size());
        if (nu > 2.0) {
            // Var t(nu) = nu / (nu - 2): the factor is its inverse square root.
            KVLENS_COMPARE_REL(factor, std::sqrt((nu - 2.0) / nu), 1e-5);
        } else {
            // Infinite variance: the median absolute value matches N(0, 1)'s, 0.6745.
            for (double& x : v)
                x = std::abs(x);
            std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
            KVLENS_COMPARE_REL(v[v.size() / 2], 0.6744897501960817, 0.02);
        }
    }

    void spectralDecaySlope_data()
    {
        QTest::addColumn<double>("alpha");
        QTest::newRow("alpha 0.5") << 0.5;
        QTest::newRow("alpha 1") << 1.0;
        QTest::newRow("alpha 2") << 2.0;
    }
    void spectralDecaySlope()
    {
        QFETCH(double, alpha);
        const int d = 64;
        const Dataset data = generate("spectral_decay", {{"alpha", alpha}}, DataShape{d, 16384, 8, 0}, 11);
        const Eigen::MatrixXd cov = data.keys.cast<double>().transpose() * data.keys.cast<double>() / 16384.0;
        Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(cov).eigenvalues().reverse();
        // Least-squares slope of log(lambda_i) on log(i) over the leading quarter of the spectrum.
        const int m = d / 4;
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int i = 0; i < m; ++i) {
            const double x = std::log(i + 1.0), y = std::log(ev(i));
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
        KVLENS_COMPARE_ABS(slope, -alpha, 0.1);
        KVLENS_COMPARE_REL(ev.sum(), double(d), 0.03); // eigenvalues scaled to sum to d
    }

    void outlierChannelsScaleOnlyKeys()
    {
        const Dataset data = generate("outlier_channels", {{"channels", 3.0}, {"gamma", 10.0}}, DataShape{64, 4096, 8, 0});
        const Eigen::VectorXd keyVar = data.keys.cast<double>().array().square().colwise().mean().transpose();
        const Eigen::VectorXd valueVar = data.values.cast<double>().array().square().colwise().mean().transpose();
        int outliers = 0;
        for (int c = 0; c < 64; ++c) {
            if (keyVar(c) > 10.0) {
                ++outliers;
                KVLENS_COMPARE_REL(keyVar(c), 100.0, 0.1);
            } else {
                KVLENS_COMPARE_ABS(keyVar(c), 1.0, 0.1);
            }
            KVLENS_COMPARE_ABS(valueVar(c), 1.0, 0.1);
        }
        QCOMPARE(outliers, 3);
        QVERIFY(data.note.find("outlier channels:") == 0);
    }

    void kvSubspacePrincipalAngles_data()
    {
        QTest::addColumn<double>("overlap");
        QTest::newRow("orthogonal") << 0.0;
        QTest::newRow("half") << 0.5;
        QTest::newRow("close") << 0.9;
        QTest::newRow("shared") << 1.0;
    }
    void kvSubspacePrincipalAngles()
    {
        QFETCH(double, overlap);
        const int r = 4;
        const Dataset data = generate("kv_subspace", {{"rank", double(r)}, {"overlap", overlap}, {"noise", 0.01}},
                                      DataShape{64, 2048, 8, 0}, 9);
        // Cosines of the principal angles are the singular values of U_K^T U_V.
        const Eigen::MatrixXd uk = topRightSingularVectors(data.keys, r);
        const Eigen::MatrixXd uv = topRightSingularVectors(data.values, r);
        const Eigen::VectorXd cosines = Eigen::JacobiSVD<Eigen::MatrixXd>(uk.transpose() * uv).singularValues();
        for (int i = 0; i < r; ++i)
            KVLENS_COMPARE_ABS(cosines(i), overlap, 0.02);
    }

    void focusedTargetsScoreBetaAbove()
    {
        const double beta = 6.0;
        const int d = 128, targets = 3;
        const Dataset data = generate("focused", {{"beta", beta}, {"targets", double(targets)}}, DataShape{d, 1024, 64, 0});
        const RowMatrixXf scores = data.queries * data.keys.transpose() / std::sqrt(float(d));
        double margin = 0.0;
        for (Eigen::Index q = 0; q < scores.rows(); ++q) {
            std::vector<float> row(scores.row(q).data(), scores.row(q).data() + scores.cols());
            std::sort(row.begin(), row.end(), std::greater<>());
            double top = 0.0;
            for (int t = 0; t < targets; ++t)
                top += row[static_cast<std::size_t>(t)];
            margin += top / targets - row[row.size() / 2];
        }
        // Targets sit beta above the median score (background N(0, 1) scores, noise of order 1).
        KVLENS_COMPARE_ABS(margin / scores.rows(), beta, 1.0);
    }
};

QTEST_APPLESS_MAIN(TestRegimes)
#include "tst_regimes.moc"
