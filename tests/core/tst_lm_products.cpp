// SPDX-License-Identifier: GPL-3.0-or-later
// The forward's products with weights in their stored types (F32, F16, BF16; transposed Conv1D parts,
// GGUF's reordered rows, stacked parts of mixed types) against a float64 product of the same values,
// on both panel plans (a worker's whole range, and panels of a few rows), on one and two threads.
#include "common/approx.h"
#include "core/common/fp16.h"
#include "core/lm/products.h"
#include "core/rng/rng.h"

#include <QTest>

#include <cstring>
#include <memory>
#include <vector>

using namespace kvlens;
using namespace kvlens::lm;

namespace {

/// A matrix stored in `type` (row-major, or column-major for `transposed`), with its exact values.
struct Stored {
    std::shared_ptr<std::vector<std::uint8_t>> bytes;
    Eigen::MatrixXd values; ///< logical [rows x cols], what the stored bytes decode to (in double)
    StoredRows rows;
};

std::uint16_t bitsOf(ggml::GgmlType type, float x)
{
    return type == ggml::GgmlType::F16 ? floatToHalfBits(x) : floatToBfloat16Bits(x);
}

double valueOf(ggml::GgmlType type, std::uint16_t bits)
{
    return type == ggml::GgmlType::F16 ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
}

/// rows x cols weights drawn N(0, 1) from `seed`, stored in `type`. The expected values are decoded
/// here by core/common/fp16 (not by the dequantizer under test).
Stored storedMatrix(ggml::GgmlType type, Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, bool transposed = false)
{
    Rng rng(EngineKind::Pcg64, seed);
    Stored s;
    s.values.resize(rows, cols);
    const std::size_t size = type == ggml::GgmlType::F32 ? 4 : 2;
    s.bytes = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(rows * cols) * size);
    for (Eigen::Index r = 0; r < rows; ++r)
        for (Eigen::Index c = 0; c < cols; ++c) {
            const auto x = static_cast<float>(rng.normal());
            const std::size_t at = static_cast<std::size_t>(transposed ? c * rows + r : r * cols + c) * size;
            if (type == ggml::GgmlType::F32) {
                std::memcpy(s.bytes->data() + at, &x, 4);
                s.values(r, c) = x;
            } else {
                const std::uint16_t b = bitsOf(type, x);
                std::memcpy(s.bytes->data() + at, &b, 2);
                s.values(r, c) = valueOf(type, b);
            }
        }
    s.rows.type = type;
    s.rows.rows = rows;
    s.rows.cols = cols;
    s.rows.data = s.bytes->data();
    s.rows.rowBytes = static_cast<std::size_t>(transposed ? rows : cols) * size;
    s.rows.transposed = transposed;
    return s;
}

RowMatrixXf randomActivations(Eigen::Index m, Eigen::Index k, std::uint64_t seed)
{
    Rng rng(EngineKind::Pcg64, seed);
    RowMatrixXf a(m, k);
    for (Eigen::Index i = 0; i < a.size(); ++i)
        a.data()[i] = static_cast<float>(rng.normal());
    return a;
}

/// max |out - a W^T| / max |a W^T|, the reference in double.
double relativeError(const RowMatrixXf& out, const RowMatrixXf& a, const Eigen::MatrixXd& w)
{
    const Eigen::MatrixXd expected = a.cast<double>() * w.transpose();
    return (out.cast<double>() - expected).cwiseAbs().maxCoeff() / expected.cwiseAbs().maxCoeff();
}

} // namespace

class TestLmProducts : public QObject {
    Q_OBJECT

private slots:
    void storedTypesAgainstFloat64_data()
    {
        QTest::addColumn<int>("type");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("threads");
        QTest::addColumn<bool>("transposed");
        using T = ggml::GgmlType;
        // 300 x 64: each worker converts its whole range; 3000 x 4096: a worker's range (1500 or 3000
        // rows, 23 or 47 MiB) is more than kWholeRangeBytes, so it converts panels of panelRows(4096) = 1024 rows.
        for (const auto& [name, type] : {std::pair{"f32", T::F32}, {"f16", T::F16}, {"bf16", T::BF16}})
            for (int threads : {1, 2}) {
                QTest::newRow((std::string(name) + " whole range, threads " + std::to_string(threads)).c_str())
                    << int(type) << 300 << 64 << threads << false;
                QTest::newRow((std::string(name) + " panels, threads " + std::to_string(threads)).c_str())
                    << int(type) << 3000 << 4096 << threads << false;
                QTest::newRow((std::string(name) + " transposed, threads " + std::to_string(threads)).c_str())
                    << int(type) << 300 << 64 << threads << true;
            }
        QTest::newRow("narrow output (rows split)") << int(T::F16) << 40 << 64 << 2 << false;
    }

    void storedTypesAgainstFloat64()
    {
        QFETCH(int, type);
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, threads);
        QFETCH(bool, transposed);
        const Stored w = storedMatrix(static_cast<ggml::GgmlType>(type), rows, cols, 11, transposed);
        WeightMatrix matrix;
        matrix.append(w.rows, w.bytes);
        QCOMPARE(matrix.rows(), std::int64_t(rows));
        const RowMatrixXf a = randomActivations(16, cols, 12);
        TaskPool pool(threads);
        RowMatrixXf out;
        RowVectorXf bias;
        matmulT(pool, a, matrix, bias, out);
        QCOMPARE(out.rows(), Eigen::Index(16));
        QCOMPARE(out.cols(), Eigen::Index(rows));
        // float32 sums of `cols` products: a few ulp times sqrt(cols) relative to the largest output.
        const double err = relativeError(out, a, w.values);
        QVERIFY2(err < 2e-6, qPrintable(QStringLiteral("relative error %1").arg(err)));
    }

    void stackedPartsRowOrderAndBias()
    {
        // q | k | v as three parts of three types, k's rows read through a permutation (GGUF's order).
        using T = ggml::GgmlType;
        const Stored q = storedMatrix(T::F16, 96, 48, 1), k = storedMatrix(T::BF16, 32, 48, 2), v = storedMatrix(T::F32, 32, 48, 3);
        std::vector<std::int32_t> order(32);
        for (int r = 0; r < 32; ++r)
            order[static_cast<std::size_t>(r)] = (r * 7 + 3) % 32; // a permutation: 7 is odd
        StoredRows kRows = k.rows;
        kRows.rowOrder = order;
        WeightMatrix matrix;
        matrix.append(q.rows, q.bytes);
        matrix.append(kRows, k.bytes);
        matrix.append(v.rows, v.bytes);
        QCOMPARE(matrix.rows(), std::int64_t(160));
        QCOMPARE(matrix.typeName(), std::string("f16+bf16+f32"));
        Eigen::MatrixXd expected(160, 48);
        expected.topRows(96) = q.values;
        for (int r = 0; r < 32; ++r)
            expected.row(96 + r) = k.values.row(order[static_cast<std::size_t>(r)]);
        expected.bottomRows(32) = v.values;
        const RowMatrixXf a = randomActivations(70, 48, 4);
        RowVectorXf bias(160);
        for (int i = 0; i < 160; ++i)
            bias[i] = 0.25f * static_cast<float>(i);
        TaskPool pool(2);
        RowMatrixXf out;
        matmulT(pool, a, matrix, bias, out);
        Eigen::MatrixXd withBias = a.cast<double>() * expected.transpose();
        withBias.rowwise() += bias.cast<double>();
        const double err = (out.cast<double>() - withBias).cwiseAbs().maxCoeff() / withBias.cwiseAbs().maxCoeff();
        QVERIFY2(err < 2e-6, qPrintable(QStringLiteral("relative error %1").arg(err)));
        // Rows read one at a time (the embedding's lookup) give the same values.
        std::vector<float> row(48);
        matrix.toFloat(100, 1, row.data());
        for (int c = 0; c < 48; ++c)
            QCOMPARE(double(row[static_cast<std::size_t>(c)]), expected(100, c));
    }

    void panelRowsFitTheBudget()
    {
        QCOMPARE(panelRows(4096), std::int64_t(1024));  // 16 MiB / (4096 x 4 B)
        QCOMPARE(panelRows(11008), std::int64_t(368));   // 381 rounded down to 16
        QCOMPARE(panelRows(1 << 24), std::int64_t(16));  // at least 16 rows
        QCOMPARE(panelRows(100), std::int64_t(41936));   // 41943 rounded down to 16
    }
};

QTEST_APPLESS_MAIN(TestLmProducts)
#include "tst_lm_products.moc"
