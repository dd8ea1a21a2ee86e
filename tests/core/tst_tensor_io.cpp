// SPDX-License-Identifier: GPL-3.0-or-later
// Tensor readers (.npy, .npz, .safetensors) against the hand-made corpus in tests/data (scripts/make_test_corpus.py).
#include "core/common/fp16.h"
#include "core/io/npy.h"
#include "core/io/npz.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_file.h"

#include <QTemporaryDir>
#include <QTest>

#include <zip.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

using namespace kvlens;
using namespace kvlens::io;

namespace {

std::string dataPath(const QString& file)
{
    return std::string(KVLENS_TEST_DATA_DIR) + "/" + file.toStdString();
}

std::vector<std::uint8_t> readBytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The values scripts/make_test_corpus.py writes: "ramp" is i * 0.25 - 3 (C order); k, v, q are the
/// K/V/Q example's small multiples of 1/8, 1/16 and 1/4. All are exact in every dtype used.
float expectedValue(const QString& kind, std::int64_t i)
{
    if (kind == QLatin1String("k"))
        return static_cast<float>((i % 97 - 48) * 0.125);
    if (kind == QLatin1String("v"))
        return static_cast<float>(((i * 7) % 89 - 44) * 0.0625);
    if (kind == QLatin1String("q"))
        return static_cast<float>(((i * 5) % 83 - 41) * 0.25);
    return static_cast<float>(i * 0.25 - 3.0);
}

std::vector<std::int64_t> toShape(const QList<qint64>& list)
{
    return std::vector<std::int64_t>(list.begin(), list.end());
}

/// A version 1.0 .npy file with the given dict text and `floats` little-endian float32 payload values.
std::vector<std::uint8_t> npyBytes(const std::string& dict, std::size_t floats)
{
    std::string header = dict + "\n";
    const std::uint16_t length = static_cast<std::uint16_t>(header.size());
    std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(length & 0xff),
                                     static_cast<std::uint8_t>(length >> 8)};
    out.insert(out.end(), header.begin(), header.end());
    for (std::size_t i = 0; i < floats; ++i) {
        const float v = expectedValue(QStringLiteral("ramp"), static_cast<std::int64_t>(i));
        std::uint8_t b[4];
        std::memcpy(b, &v, 4);
        out.insert(out.end(), b, b + 4);
    }
    return out;
}

bool contains(const std::string& text, const QString& part)
{
    return text.find(part.toStdString()) != std::string::npos;
}

void writeBytes(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A version 2.0 .npy file (4-byte header length, so any dict fits) holding `payload` as it is.
std::vector<std::uint8_t> npyFile(const std::string& dict, const std::vector<std::uint8_t>& payload)
{
    const std::string header = dict + "\n";
    std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
    for (int i = 0; i < 4; ++i)
        out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

/// A float32 payload of `shape` whose element with C-order index i holds i (exact below 2^24),
/// stored in C or Fortran order: every slice's expected values follow from the indices alone.
std::vector<std::uint8_t> indexPayload(const std::vector<std::int64_t>& shape, bool fortran)
{
    std::int64_t count = 1;
    for (const std::int64_t d : shape)
        count *= d;
    std::vector<float> stored(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
        std::int64_t rest = i, offset = 0, stride = 1;
        if (fortran) {
            std::vector<std::int64_t> index(shape.size());
            for (std::size_t k = shape.size(); k-- > 0;) {
                index[k] = rest % shape[k];
                rest /= shape[k];
            }
            for (std::size_t k = 0; k < shape.size(); ++k) {
                offset += index[k] * stride;
                stride *= shape[k];
            }
        } else {
            offset = i;
        }
        stored[static_cast<std::size_t>(offset)] = static_cast<float>(i);
    }
    std::vector<std::uint8_t> bytes(stored.size() * 4);
    std::memcpy(bytes.data(), stored.data(), bytes.size());
    return bytes;
}

std::string shapeTuple(const std::vector<std::int64_t>& shape)
{
    std::string out = "(";
    for (const std::int64_t d : shape)
        out += std::to_string(d) + ", ";
    return out + ")";
}

/// Writes a zip archive of `members` (name, bytes), each stored or deflated, with libzip.
bool writeZip(const std::string& path, const std::vector<std::pair<std::string, std::vector<std::uint8_t>>>& members,
              bool deflate)
{
    int error = 0;
    zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
    if (!archive)
        return false;
    for (const auto& [name, bytes] : members) {
        zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
        const zip_int64_t index = source ? zip_file_add(archive, name.c_str(), source, ZIP_FL_OVERWRITE) : -1;
        if (index < 0
            || zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                        0)
                   != 0) {
            if (index < 0)
                zip_source_free(source);
            zip_discard(archive);
            return false;
        }
    }
    return zip_close(archive) == 0; // the buffers must live until here, where libzip compresses them
}

/// The block of a slice taken by hand from a full C-order read.
std::vector<float> blockOf(const Tensor& full, const SliceRequest& slice)
{
    const std::size_t rank = full.shape.size();
    const std::int64_t rows = full.shape[rank - 2], cols = full.shape[rank - 1];
    std::int64_t matrix = 0;
    for (std::size_t k = 0; k + 2 < rank; ++k)
        matrix = matrix * full.shape[k] + slice.leading[k];
    std::vector<float> out;
    for (std::int64_t r = 0; r < slice.rowCount; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            out.push_back(full.data[static_cast<std::size_t>((matrix * rows + slice.rowStart + r) * cols + c)]);
    return out;
}

/// Every leading index of `shape` (the dimensions before the last two), in C order.
std::vector<std::vector<std::int64_t>> allLeading(const std::vector<std::int64_t>& shape)
{
    std::vector<std::vector<std::int64_t>> out{{}};
    for (std::size_t k = 0; k + 2 < shape.size(); ++k) {
        std::vector<std::vector<std::int64_t>> next;
        for (const auto& prefix : out)
            for (std::int64_t i = 0; i < shape[k]; ++i) {
                next.push_back(prefix);
                next.back().push_back(i);
            }
        out = std::move(next);
    }
    return out;
}

/// Row ranges (start, count) to try: all of them for a few rows, else the edges and a middle.
std::vector<std::pair<std::int64_t, std::int64_t>> rowRanges(std::int64_t rows)
{
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    if (rows <= 6) {
        for (std::int64_t start = 0; start < rows; ++start)
            for (std::int64_t count = 1; start + count <= rows; ++count)
                out.emplace_back(start, count);
        return out;
    }
    for (const std::int64_t start : {std::int64_t{0}, std::int64_t{1}, rows / 2, rows - 1})
        for (const std::int64_t count : {std::int64_t{1}, std::int64_t{2}, rows - start})
            if (start + count <= rows)
                out.emplace_back(start, count);
    return out;
}

const TensorInfo* findInfo(const TensorFileInfo& file, const std::string& name)
{
    for (const TensorInfo& t : file.tensors)
        if (t.name == name || file.format == "npy")
            return &t;
    return nullptr;
}

} // namespace

class TestTensorIo : public QObject {
    Q_OBJECT
private slots:
    void validFilesLoadExactly_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("tensor");
        QTest::addColumn<int>("dtype");
        QTest::addColumn<QList<qint64>>("shape");
        QTest::addColumn<QString>("values");
        const int f16 = int(DType::F16), bf16 = int(DType::BF16), f32 = int(DType::F32), f64 = int(DType::F64);
        const QString ramp = QStringLiteral("ramp");
        QTest::newRow("npy v1.0 <f4 C") << "npy_v1_f4_c.npy" << "" << f32 << QList<qint64>{3, 4} << ramp;
        QTest::newRow("npy v2.0 <f8 Fortran") << "npy_v2_f8_fortran.npy" << "" << f64 << QList<qint64>{2, 3, 4} << ramp;
        QTest::newRow("npy v3.0 <f2") << "npy_v3_f2.npy" << "" << f16 << QList<qint64>{2, 5} << ramp;
        QTest::newRow("npy >f4") << "npy_bigendian_f4.npy" << "" << f32 << QList<qint64>{4, 3} << ramp;
        QTest::newRow("npy >f2") << "npy_bigendian_f2.npy" << "" << f16 << QList<qint64>{6} << ramp;
        QTest::newRow("npy >f8 Fortran") << "npy_bigendian_f8_fortran.npy" << "any name" << f64 << QList<qint64>{3, 2}
                                         << ramp;
        QTest::newRow("npy scalar") << "npy_scalar_f4.npy" << "" << f32 << QList<qint64>{} << ramp;
        QTest::newRow("npy empty") << "npy_empty_f4.npy" << "" << f32 << QList<qint64>{0, 3} << ramp;
        QList<qint64> longShape(22, 1);
        longShape << 2 << 3;
        QTest::newRow("npy 182-byte header") << "npy_header_182.npy" << "" << f32 << longShape << ramp;
        for (const char* file : {"npz_stored.npz", "npz_deflated.npz", "npz_zip64.npz", "npz_zip64_deflated.npz"}) {
            QTest::addRow("%s a", file) << file << "a" << f32 << QList<qint64>{3, 4} << ramp;
            QTest::addRow("%s b", file) << file << "b" << f64 << QList<qint64>{2, 3} << ramp;
        }
        const QString st = QStringLiteral("st_f16_bf16_f32_f64.safetensors");
        QTest::newRow("safetensors F16") << st << "f16" << f16 << QList<qint64>{2, 3} << ramp;
        QTest::newRow("safetensors BF16") << st << "bf16" << bf16 << QList<qint64>{3, 2} << ramp;
        QTest::newRow("safetensors F32") << st << "f32" << f32 << QList<qint64>{2, 2} << ramp;
        QTest::newRow("safetensors F64") << st << "f64" << f64 << QList<qint64>{4} << ramp;
        for (const char* file : {"kv_example.safetensors", "kv_example.npz"})
            for (const char* t : {"k", "v", "q"})
                QTest::addRow("%s %s", file, t) << file << t << f32 << QList<qint64>{2, 64, 32} << t;
    }

    void validFilesLoadExactly()
    {
        QFETCH(QString, file);
        QFETCH(QString, tensor);
        QFETCH(int, dtype);
        QFETCH(QList<qint64>, shape);
        QFETCH(QString, values);
        const std::string path = dataPath(file);

        const auto info = inspectTensorFile(path);
        QVERIFY2(info.ok(), info.ok() ? "" : info.error().text().c_str());
        QCOMPARE(info->path, path);
        const TensorInfo* described = nullptr;
        for (const TensorInfo& t : info->tensors)
            if (t.name == tensor.toStdString() || info->format == "npy")
                described = &t;
        QVERIFY(described);
        QCOMPARE(int(described->dtype), dtype);
        QCOMPARE(described->shape, toShape(shape));

        const auto read = readTensor(path, tensor.toStdString());
        QVERIFY2(read.ok(), read.ok() ? "" : read.error().text().c_str());
        QCOMPARE(int(read->storedType), dtype);
        QCOMPARE(read->shape, toShape(shape));
        QCOMPARE(read->name, info->format == "npy" ? std::string("array") : tensor.toStdString());
        std::int64_t count = 1;
        for (const qint64 d : shape)
            count *= d;
        QCOMPARE(read->data.size(), static_cast<std::size_t>(count));
        for (std::int64_t i = 0; i < count; ++i) {
            if (read->data[static_cast<std::size_t>(i)] != expectedValue(values, i))
                QFAIL(qPrintable(QStringLiteral("element %1 is %2, expected %3")
                                     .arg(i)
                                     .arg(read->data[static_cast<std::size_t>(i)])
                                     .arg(expectedValue(values, i))));
        }
    }

    void layoutFacts()
    {
        // NumPy aligns the payload to 64 bytes: 10-byte preamble + 182-byte header = 192.
        const auto longHeader = inspectTensorFile(dataPath(QStringLiteral("npy_header_182.npy")));
        QVERIFY(longHeader.ok());
        QCOMPARE(longHeader->tensors.at(0).dataOffset, std::uint64_t{192});
        QCOMPARE(longHeader->tensors.at(0).dataBytes, std::uint64_t{24});
        const auto fortran = inspectTensorFile(dataPath(QStringLiteral("npy_v2_f8_fortran.npy")));
        QVERIFY(fortran.ok());
        QVERIFY(fortran->tensors.at(0).fortranOrder);
        QVERIFY(!fortran->tensors.at(0).bigEndian);
        const auto big = inspectTensorFile(dataPath(QStringLiteral("npy_bigendian_f8_fortran.npy")));
        QVERIFY(big.ok());
        QVERIFY(big->tensors.at(0).bigEndian);

        const auto st = inspectTensorFile(dataPath(QStringLiteral("st_f16_bf16_f32_f64.safetensors")));
        QVERIFY(st.ok());
        QCOMPARE(st->format, std::string("safetensors"));
        QCOMPARE(st->metadata.size(), std::size_t{2});
        QCOMPARE(st->metadata.at("format"), std::string("pt"));
        QCOMPARE(st->tensors.size(), std::size_t{4});
        // Payload order, each tensor starting where the previous one ended.
        QCOMPARE(st->tensors[0].name, std::string("f16"));
        QCOMPARE(st->tensors[3].name, std::string("f64"));
        for (std::size_t i = 1; i < st->tensors.size(); ++i)
            QCOMPARE(st->tensors[i].dataOffset, st->tensors[i - 1].dataOffset + st->tensors[i - 1].dataBytes);
        QCOMPARE(st->tensors[3].dataBytes, std::uint64_t{32});

        const auto npz = inspectTensorFile(dataPath(QStringLiteral("kv_example.npz")));
        QVERIFY(npz.ok());
        QCOMPARE(npz->format, std::string("npz"));
        QCOMPARE(npz->tensors.size(), std::size_t{3});
        QCOMPARE(npz->tensors[0].name, std::string("k"));
        QCOMPARE(npz->tensors[2].name, std::string("q"));
        QCOMPARE(npz->tensors[1].dataBytes, std::uint64_t{2 * 64 * 32 * 4});
        QCOMPARE(npz->tensors[1].elementCount(), std::int64_t{2 * 64 * 32});
    }

    void badFilesAreRejectedByName_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("tensor");  // the tensor to read, and the one the error must name ("" when none)
        QTest::addColumn<QString>("reason");
        QTest::newRow("npy object dtype") << "npy_object_dtype.npy" << "array" << "dtype '|O' (Python objects)";
        QTest::newRow("npy int dtype") << "npy_int_dtype.npy" << "array"
                                       << "dtype '<i4' is not supported (F16, F32, F64 only for .npy)";
        QTest::newRow("npy structured") << "npy_structured_dtype.npy" << "array" << "structured dtypes";
        QTest::newRow("npy truncated") << "npy_truncated_payload.npy" << "array"
                                       << "truncated payload: the header declares 48 bytes, only 40 follow";
        QTest::newRow("npy trailing bytes") << "npy_trailing_bytes.npy" << "array" << "4 trailing bytes";
        QTest::newRow("npy header past end") << "npy_header_past_end.npy" << "array"
                                             << "header length 1000 runs past the end of the file (80 bytes)";
        QTest::newRow("npy header over cap") << "npy_header_over_cap.npy" << "array"
                                             << "header length 1048576 exceeds the cap of 65536";
        QTest::newRow("npy shape overflow") << "npy_shape_overflow.npy" << "array"
                                            << "shape product overflows (3037000500 x 3037000500 x 4";
        QTest::newRow("npy bad magic") << "npy_bad_magic.npy" << "array" << "magic";
        QTest::newRow("npy bad version") << "npy_bad_version.npy" << "array" << "unsupported .npy version 4.0";
        QTest::newRow("npy unknown key") << "npy_unknown_key.npy" << "array" << "unknown header key 'extra'";
        QTest::newRow("npy missing shape") << "npy_missing_shape.npy" << "array" << "header lacks 'shape'";
        QTest::newRow("npy |f4") << "npy_byteorder_pipe_f4.npy" << "array" << "only valid for 1-byte types";
        QTest::newRow("npz duplicate") << "npz_duplicate_names.npz" << "a" << "duplicate member name 'a.npy'";
        QTest::newRow("npz truncated member") << "npz_truncated_member.npz" << "a" << "truncated payload";
        QTest::newRow("npz object member") << "npz_object_member.npz" << "obj" << "dtype '|O'";
        QTest::newRow("npz not a zip") << "npz_not_a_zip.npz" << "" << "zip archive";
        QTest::newRow("st overlap") << "st_offsets_overlap.safetensors" << "b"
                                    << "data_offsets [8, 24] overlap tensor 'a'";
        QTest::newRow("st hole") << "st_offsets_hole.safetensors" << "b" << "hole of 8 bytes before";
        QTest::newRow("st past end") << "st_offsets_past_end.safetensors" << "b"
                                     << "data_offsets [16, 32] run past the end of the 24-byte data buffer";
        QTest::newRow("st uncovered tail") << "st_uncovered_tail.safetensors" << "a" << "hole of 8 bytes at the end";
        QTest::newRow("st duplicate") << "st_duplicate_names.safetensors" << "a" << "duplicate name";
        QTest::newRow("st header past end") << "st_header_past_end.safetensors" << ""
                                            << "header length 4096 runs past the end of the file (79 bytes)";
        QTest::newRow("st header over cap") << "st_header_over_cap.safetensors" << ""
                                            << "header length 200000000 exceeds the cap of 100000000";
        QTest::newRow("st too short") << "st_too_short.safetensors" << "" << "too short";
        QTest::newRow("st bad dtype") << "st_bad_dtype.safetensors" << "ids"
                                      << "dtype 'I64' is not supported (F16, BF16, F32, F64 only)";
        QTest::newRow("st shape mismatch") << "st_shape_mismatch.safetensors" << "a"
                                           << "needs 12 bytes but data_offsets [0, 16] span 16";
        QTest::newRow("st shape overflow") << "st_shape_overflow.safetensors" << "a" << "shape product overflows";
        QTest::newRow("st metadata") << "st_metadata_not_string.safetensors" << ""
                                     << "'__metadata__' value of 'epoch' is not a string";
        QTest::newRow("st not json") << "st_not_json.safetensors" << "" << "header: not valid JSON";
        QTest::newRow("st deep shape") << "st_deep_shape.safetensors" << "" << "nested deeper than 64 levels";
        QTest::newRow("st deep offsets") << "st_deep_offsets.safetensors" << "" << "nested deeper than 64 levels";
    }

    void badFilesAreRejectedByName()
    {
        QFETCH(QString, file);
        QFETCH(QString, tensor);
        QFETCH(QString, reason);
        const std::string path = dataPath(file);
        const auto check = [&](const Error& error) {
            QCOMPARE(error.field, path);
            QVERIFY2(contains(error.text(), file), error.text().c_str());
            QVERIFY2(contains(error.message, reason), error.message.c_str());
            if (!tensor.isEmpty())
                QVERIFY2(contains(error.message, "tensor '" + tensor + "'"), error.message.c_str());
            QVERIFY2(error.message.find('\n') == std::string::npos, error.message.c_str());
        };
        const auto info = inspectTensorFile(path);
        QVERIFY(!info.ok());
        check(info.error());
        if (QTest::currentTestFailed())
            return;
        const auto read = readTensor(path, tensor.toStdString());
        QVERIFY(!read.ok());
        check(read.error());
        if (QTest::currentTestFailed())
            return;

        // The in-memory parsers, which the fuzz targets drive, give the same verdict.
        const std::vector<std::uint8_t> bytes = readBytes(path);
        if (file.endsWith(QLatin1String(".npy"))) {
            const auto parsed = parseNpyHeader(bytes, path);
            QVERIFY(!parsed.ok());
            check(parsed.error());
        } else if (file.endsWith(QLatin1String(".npz"))) {
            const auto parsed = parseNpzArchive(bytes, path);
            QVERIFY(!parsed.ok());
            check(parsed.error());
            const auto member = readNpzMember(bytes, tensor.toStdString(), path);
            QVERIFY(!member.ok());
            check(member.error());
        } else {
            const auto parsed = parseSafetensorsHeader(bytes, bytes.size(), path);
            QVERIFY(!parsed.ok());
            check(parsed.error());
        }
    }

    void npyHeaderDict_data()
    {
        QTest::addColumn<QString>("dict");
        QTest::addColumn<int>("floats");
        QTest::addColumn<QString>("reason"); // "" = valid
        QTest::newRow("NumPy's own") << "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" << 12 << "";
        QTest::newRow("no trailing comma, tight") << "{'descr':'<f4','fortran_order':False,'shape':(3,4)}" << 12 << "";
        QTest::newRow("double quotes") << "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,), }" << 2 << "";
        QTest::newRow("Python 2 longs") << "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }" << 12 << "";
        QTest::newRow("native order") << "{'descr': '=f4', 'fortran_order': False, 'shape': (), }" << 1 << "";
        QTest::newRow("keys in any order") << "{'shape': (2,), 'fortran_order': True, 'descr': '<f4'}" << 2 << "";
        QTest::newRow("1-tuple without comma") << "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }" << 3
                                               << "is not a tuple";
        QTest::newRow("duplicate key") << "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}" << 1
                                       << "duplicate header key 'descr'";
        QTest::newRow("fortran_order 0") << "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}" << 1
                                         << "expected True or False";
        QTest::newRow("negative dim") << "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}" << 0
                                      << "negative dimension";
        QTest::newRow("huge dim") << "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}" << 0
                                  << "exceeds 2^63 - 1";
        QTest::newRow("escape") << "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}" << 1
                                << "escape sequences are not supported";
        QTest::newRow("expression") << "{'descr': '<f4', 'fortran_order': False, 'shape': (1+2,)}" << 3
                                    << "expected ',' or ')'";
        QTest::newRow("text after dict") << "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x" << 1
                                         << "unexpected text after the header dict";
        QTest::newRow("not a dict") << "['descr', '<f4']" << 1 << "expected '{'";
        QTest::newRow("unterminated") << "{'descr': '<f4', 'fortran_order': False, 'shape': (1," << 1
                                      << "the end of the header";
        QTest::newRow("f16 bytes") << "{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}" << 4
                                   << "dtype '<f16' is not supported";
        QTest::newRow("bare O") << "{'descr': 'O', 'fortran_order': False, 'shape': (1,)}" << 2
                                << "dtype 'O' (Python objects)";
        // The grammar has no nesting, so 30 000 opening brackets are refused at the first one.
        const QString deep(30000, QLatin1Char('(')), deepList(30000, QLatin1Char('[')), deepDict(30000, QLatin1Char('{'));
        QTest::newRow("nested tuples") << "{'descr': '<f4', 'fortran_order': False, 'shape': " + deep << 1
                                       << "expected a dimension in 'shape' at offset 51";
        QTest::newRow("nested lists") << "{'descr': " + deepList << 1 << "structured dtypes";
        QTest::newRow("nested dicts") << "{'descr': '<f4', 'fortran_order': " + deepDict << 1 << "expected True or False";
    }

    void npyHeaderDict()
    {
        QFETCH(QString, dict);
        QFETCH(int, floats);
        QFETCH(QString, reason);
        const auto bytes = npyBytes(dict.toStdString(), static_cast<std::size_t>(floats));
        const auto parsed = parseNpyHeader(bytes, "mem.npy");
        if (reason.isEmpty()) {
            QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().text().c_str());
            const TensorInfo& info = parsed->tensors.at(0);
            QCOMPARE(info.elementCount(), std::int64_t{floats});
            QCOMPARE(info.dataBytes, std::uint64_t(4 * floats));
            QCOMPARE(info.bigEndian, false);
            const auto tensor = decodeTensor(std::span(bytes).subspan(info.dataOffset), info, "mem.npy");
            QVERIFY(tensor.ok());
            QCOMPARE(tensor->data.back(), expectedValue(QStringLiteral("ramp"), floats - 1));
        } else {
            QVERIFY(!parsed.ok());
            QCOMPARE(parsed.error().field, std::string("mem.npy"));
            QVERIFY2(contains(parsed.error().message, reason), parsed.error().message.c_str());
            QVERIFY2(contains(parsed.error().message, QStringLiteral("tensor 'array'")), parsed.error().message.c_str());
        }
    }

    void safetensorsHeader_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<int>("bufferBytes");
        QTest::addColumn<QString>("reason"); // "" = valid
        const QString a = QStringLiteral(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})");
        QTest::newRow("one tensor") << "{" + a + "}" << 8 << "";
        QTest::newRow("no tensors") << "{}" << 0 << "";
        QTest::newRow("zero-size tensor between")
            << "{" + a + R"(,"z":{"dtype":"F16","shape":[0,4],"data_offsets":[8,8]},)"
                   R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]}})"
            << 10 << "";
        QTest::newRow("nested duplicate") << R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})" << 8
                                          << "key 'dtype' is given twice";
        QTest::newRow("duplicate tensor") << "{" + a + "," + a + "}" << 8 << "tensor 'a': duplicate name in the header";
        QTest::newRow("number overflow") << R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})" << 8
                                         << "header: not valid JSON";
        QTest::newRow("float dimension") << R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})" << 8
                                         << "'shape' element 0 is not a non-negative integer (it is the number 2.0)";
        // Values of the wrong type are described, never printed: printing recurses, and may be huge.
        QTest::newRow("array dimension") << R"({"a":{"dtype":"F32","shape":[2,[[[2]]]],"data_offsets":[0,8]}})" << 8
                                         << "'shape' element 1 is not a non-negative integer (it is an array of 1 element)";
        QTest::newRow("object offset") << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,{"x":[8]}]}})" << 8
                                       << "'data_offsets' element 1 is not a non-negative integer (it is an object of 1 key)";
        QTest::newRow("long string dimension")
            << "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"" + QString(100000, QLatin1Char('x'))
                   + "\"],\"data_offsets\":[0,8]}}"
            << 8
            << "(it is the string 'xxxxxxxx";
        QTest::newRow("shape a string") << R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})" << 8
                                        << "'shape' is not an array (it is the string '2')";
        QTest::newRow("dtype a number") << R"({"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})" << 8
                                        << "'dtype' is not a string (it is the number 32)";
        QTest::newRow("shape 65 deep") << R"({"a":{"dtype":"F32","shape":)" + QString(65, QLatin1Char('['))
                                              + QString(65, QLatin1Char(']')) + R"(,"data_offsets":[0,8]}})"
                                       << 8 << "nested deeper than 64 levels";
        QTest::newRow("metadata value deep but within the cap")
            << R"({"__metadata__":{"x":)" + QString(62, QLatin1Char('[')) + QString(62, QLatin1Char(']')) + "}}" << 0
            << "'__metadata__' value of 'x' is not a string (it is an array of 1 element)";
        QTest::newRow("negative offset") << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})" << 8
                                         << "not a non-negative integer";
        QTest::newRow("reversed offsets") << R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})" << 8
                                          << "end before they begin";
        QTest::newRow("three offsets") << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})" << 8
                                       << "not a [begin, end] pair";
        QTest::newRow("unknown entry key") << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})" << 8
                                           << "unknown key 'x'";
        QTest::newRow("missing dtype") << R"({"a":{"shape":[2],"data_offsets":[0,8]}})" << 8 << "lacks 'dtype'";
        QTest::newRow("entry not object") << R"({"a":[1,2]})" << 0 << "entry is not a JSON object";
        QTest::newRow("header an array") << "[]" << 0 << "header is not a JSON object";
        QTest::newRow("metadata an array") << R"({"__metadata__":["x"]})" << 0 << "'__metadata__' is not a JSON object";
        QTest::newRow("empty buffer unaccounted") << "{}" << 4 << "hole of 4 bytes";
        QTest::newRow("control chars in name") << R"({"a\nb":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})" << 2
                                               << "tensor 'a\\x0ab': dtype 'I8' is not supported";
    }

    void safetensorsHeader()
    {
        QFETCH(QString, json);
        QFETCH(int, bufferBytes);
        QFETCH(QString, reason);
        const std::string text = json.toStdString();
        std::vector<std::uint8_t> bytes(8);
        for (int i = 0; i < 8; ++i)
            bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(text.size() >> (8 * i));
        bytes.insert(bytes.end(), text.begin(), text.end());
        bytes.resize(bytes.size() + static_cast<std::size_t>(bufferBytes), 0);
        const auto parsed = parseSafetensorsHeader(bytes, bytes.size(), "mem.safetensors");
        if (reason.isEmpty()) {
            QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.error().text().c_str());
            std::uint64_t end = 8 + text.size();
            for (const TensorInfo& t : parsed->tensors) {
                QCOMPARE(t.dataOffset, end); // payload order, no gaps
                end += t.dataBytes;
            }
            QCOMPARE(end, std::uint64_t(bytes.size()));
        } else {
            QVERIFY(!parsed.ok());
            QCOMPARE(parsed.error().field, std::string("mem.safetensors"));
            QVERIFY2(contains(parsed.error().message, reason), parsed.error().message.c_str());
            QVERIFY2(parsed.error().message.find('\n') == std::string::npos, parsed.error().message.c_str());
            QVERIFY2(parsed.error().message.size() < 400, parsed.error().message.c_str()); // one line, not a dump
        }
    }

    void bf16RoundTripIsExact()
    {
        const std::string path = dataPath(QStringLiteral("st_bf16_roundtrip.safetensors"));
        const auto info = inspectTensorFile(path);
        QVERIFY(info.ok());
        const TensorInfo& t = info->tensors.at(0);
        const auto bytes = readBytes(path);
        const auto read = readTensor(path, "bits");
        QVERIFY(read.ok());
        QCOMPARE(read->data.size(), static_cast<std::size_t>(t.dataBytes / 2));
        QVERIFY(read->data.size() > 255); // every 257th pattern plus the special values
        int nans = 0, subnormals = 0, infinities = 0;
        for (std::size_t i = 0; i < read->data.size(); ++i) {
            const std::size_t at = static_cast<std::size_t>(t.dataOffset) + 2 * i;
            const auto pattern = static_cast<std::uint16_t>(bytes[at] | (bytes[at + 1] << 8));
            const float value = read->data[i];
            // bfloat16 is the top half of a float32: widening is exact and keeps NaN payloads.
            QCOMPARE(std::bit_cast<std::uint32_t>(value), std::uint32_t{pattern} << 16);
            if (std::isnan(value)) {
                ++nans;
                continue;
            }
            subnormals += std::fpclassify(value) == FP_SUBNORMAL;
            infinities += std::isinf(value);
            QCOMPARE(floatToBfloat16Bits(value), pattern);
        }
        QVERIFY(nans >= 3);
        QVERIFY(subnormals >= 3); // 0x0001, 0x8001, 0x007f
        QCOMPARE(infinities, 2);
    }

    void inspectReadsNoPayloadAndLimitsRefuseBeforeAllocating()
    {
        QTemporaryDir dir;
        // An 8 GiB float32 array as a sparse file: inspecting must not touch the payload, and reading
        // must refuse with the size before allocating anything of that size.
        const std::string path = dir.filePath(QStringLiteral("huge.npy")).toStdString();
        {
            std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2048, 1024, 1024), }";
            dict.resize(117, ' ');
            dict += '\n';
            std::ofstream out(path, std::ios::binary);
            out.write("\x93NUMPY\x01\x00", 8);
            out.put(static_cast<char>(dict.size()));
            out.put(0);
            out << dict;
        }
        QVERIFY(std::filesystem::exists(path));
        std::filesystem::resize_file(path, 128 + (std::uint64_t{8} << 30));
        const auto info = inspectTensorFile(path);
        QVERIFY2(info.ok(), info.ok() ? "" : info.error().text().c_str());
        QCOMPARE(info->tensors.at(0).shape, (std::vector<std::int64_t>{2048, 1024, 1024}));
        QCOMPARE(info->tensors.at(0).dataBytes, std::uint64_t{8} << 30);
        const auto read = readTensor(path, "");
        QVERIFY(!read.ok());
        QCOMPARE(read.error().field, path);
        QVERIFY2(contains(read.error().message, QStringLiteral("float32 copy needs 8589934592 bytes, more than the limit "
                                                               "of 4294967296 bytes")),
                 read.error().message.c_str());
    }

    void readLimitsNameTheSize_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("safetensors") << "kv_example.safetensors";
        QTest::newRow("npz") << "kv_example.npz";
    }

    void readLimitsNameTheSize()
    {
        QFETCH(QString, file);
        const std::string path = dataPath(file);
        ReadLimits limits;
        limits.maxTensorBytes = 16383;
        const auto refused = readTensor(path, "v", limits);
        QVERIFY(!refused.ok());
        QVERIFY2(contains(refused.error().message, QStringLiteral("tensor 'v': float32 copy needs 16384 bytes, more than "
                                                                  "the limit of 16383 bytes")),
                 refused.error().message.c_str());
        limits.maxTensorBytes = 16384; // exactly enough
        QVERIFY(readTensor(path, "v", limits).ok());
    }

    void namesAndExtensions()
    {
        const auto unknown = inspectTensorFile("/tmp/weights.txt");
        QVERIFY(!unknown.ok());
        QCOMPARE(unknown.error().field, std::string("/tmp/weights.txt"));
        QVERIFY2(contains(unknown.error().message, QStringLiteral("unknown extension '.txt' (expected .npy, .npz or "
                                                                  ".safetensors)")),
                 unknown.error().message.c_str());
        const auto none = readTensor("/tmp/weights", "k");
        QVERIFY(!none.ok());
        QVERIFY(contains(none.error().message, QStringLiteral("no file extension")));
        // Extensions are matched without regard to case.
        const auto upper = inspectTensorFile("/nonexistent-kvlens/K.NPY");
        QVERIFY(!upper.ok());
        QVERIFY2(contains(upper.error().message, QStringLiteral("cannot open")), upper.error().message.c_str());

        for (const char* file : {"kv_example.safetensors", "kv_example.npz"}) {
            const std::string path = dataPath(QString::fromLatin1(file));
            const auto missing = readTensor(path, "x\ny");
            QVERIFY(!missing.ok());
            QCOMPARE(missing.error().field, path);
            QVERIFY2(contains(missing.error().message, QStringLiteral("no tensor named 'x\\x0ay'")),
                     missing.error().message.c_str());
            QVERIFY2(contains(missing.error().message, QStringLiteral("'k', 'v', 'q'"))
                         || contains(missing.error().message, QStringLiteral("'q', 'k', 'v'")),
                     missing.error().message.c_str());
        }
        const auto gone = inspectTensorFile("/nonexistent-kvlens/kv.npz");
        QVERIFY(!gone.ok());
        QCOMPARE(gone.error().field, std::string("/nonexistent-kvlens/kv.npz"));
    }

    void decodeTensorChecksItsInputs()
    {
        TensorInfo info;
        info.name = "t";
        info.dtype = DType::F32;
        info.shape = {2, 3};
        info.fortranOrder = true;
        info.dataBytes = 24;
        // Column-major storage of [[0, 1, 2], [3, 4, 5]].
        const float stored[6] = {0, 3, 1, 4, 2, 5};
        std::vector<std::uint8_t> payload(24);
        std::memcpy(payload.data(), stored, 24);
        const auto tensor = decodeTensor(payload, info, "mem");
        QVERIFY(tensor.ok());
        QCOMPARE(tensor->data, (std::vector<float>{0, 1, 2, 3, 4, 5}));

        const auto shortRead = decodeTensor(std::span(payload).first(20), info, "mem");
        QVERIFY(!shortRead.ok());
        QVERIFY(contains(shortRead.error().message, QStringLiteral("tensor 't': truncated payload: 20 of 24 bytes")));
        info.dataBytes = 20;
        const auto mismatch = decodeTensor(std::span(payload).first(20), info, "mem");
        QVERIFY(!mismatch.ok());
        QVERIFY2(contains(mismatch.error().message, QStringLiteral("needs 24")), mismatch.error().message.c_str());
        info.shape = {-1, 3};
        QVERIFY(contains(decodeTensor(payload, info, "mem").error().message, QStringLiteral("negative dimension -1")));
    }

    void npzInMemoryMatchesTheFile()
    {
        for (const char* file : {"npz_zip64.npz", "npz_zip64_deflated.npz", "kv_example.npz"}) {
            const std::string path = dataPath(QString::fromLatin1(file));
            const auto bytes = readBytes(path);
            const auto fromMemory = parseNpzArchive(bytes, "mem.npz");
            const auto fromFile = inspectTensorFile(path);
            QVERIFY(fromMemory.ok() && fromFile.ok());
            QCOMPARE(fromMemory->tensors.size(), fromFile->tensors.size());
            for (std::size_t i = 0; i < fromFile->tensors.size(); ++i) {
                const TensorInfo& t = fromFile->tensors[i];
                QCOMPARE(fromMemory->tensors[i].name, t.name);
                QCOMPARE(fromMemory->tensors[i].shape, t.shape);
                QCOMPARE(fromMemory->tensors[i].dataOffset, t.dataOffset);
                const auto a = readNpzMember(bytes, t.name, "mem.npz");
                const auto b = readTensor(path, t.name);
                QVERIFY(a.ok() && b.ok());
                QCOMPARE(a->data, b->data);
            }
        }
        const auto empty = parseNpzArchive({}, "mem.npz");
        QVERIFY(!empty.ok());
        QVERIFY(contains(empty.error().message, QStringLiteral("empty file")));
    }

    void sliceEqualsTheBlockOfTheFullRead_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("tensor");
        QTest::newRow("npy v1.0 <f4 C") << "npy_v1_f4_c.npy" << "";
        QTest::newRow("npy v2.0 <f8 Fortran, rank 3") << "npy_v2_f8_fortran.npy" << "";
        QTest::newRow("npy v3.0 <f2") << "npy_v3_f2.npy" << "";
        QTest::newRow("npy >f4") << "npy_bigendian_f4.npy" << "";
        QTest::newRow("npy >f8 Fortran, rank 2") << "npy_bigendian_f8_fortran.npy" << "";
        QTest::newRow("npy 182-byte header, rank 24") << "npy_header_182.npy" << "";
        for (const char* file : {"npz_stored.npz", "npz_deflated.npz", "npz_zip64.npz", "npz_zip64_deflated.npz"}) {
            QTest::addRow("%s a", file) << file << "a";
            QTest::addRow("%s b", file) << file << "b";
        }
        for (const char* t : {"f16", "bf16", "f32"})
            QTest::addRow("safetensors %s", t) << "st_f16_bf16_f32_f64.safetensors" << t;
        for (const char* file : {"kv_example.safetensors", "kv_example.npz"})
            for (const char* t : {"k", "v", "q"})
                QTest::addRow("%s %s", file, t) << file << t;
    }

    void sliceEqualsTheBlockOfTheFullRead()
    {
        QFETCH(QString, file);
        QFETCH(QString, tensor);
        const std::string path = dataPath(file);
        const auto inspected = inspectTensorFile(path);
        QVERIFY2(inspected.ok(), inspected.ok() ? "" : inspected.error().text().c_str());
        const TensorInfo* info = findInfo(*inspected, tensor.toStdString());
        QVERIFY(info);
        const auto full = readTensor(path, tensor.toStdString());
        QVERIFY2(full.ok(), full.ok() ? "" : full.error().text().c_str());
        const std::size_t rank = info->shape.size();
        const std::vector<std::uint8_t> bytes = readBytes(path);
        int slices = 0;
        for (const auto& leading : allLeading(info->shape)) {
            for (const auto& [rowStart, rowCount] : rowRanges(info->shape[rank - 2])) {
                const SliceRequest slice{leading, rowStart, rowCount};
                const auto read = readTensorSlice(path, *info, slice);
                QVERIFY2(read.ok(), read.ok() ? "" : read.error().text().c_str());
                QCOMPARE(read->name, info->name);
                QCOMPARE(int(read->storedType), int(info->dtype));
                QCOMPARE(read->shape, (std::vector<std::int64_t>{rowCount, info->shape.back()}));
                QCOMPARE(read->data, blockOf(*full, slice));
                // The in-memory entry points, which the fuzz targets drive, read the same block.
                const auto fromMemory = file.endsWith(QLatin1String(".npz"))
                                            ? readNpzMemberSlice(bytes, *info, slice, "mem")
                                            : decodeTensorSlice(bytes, *info, slice, "mem");
                QVERIFY2(fromMemory.ok(), fromMemory.ok() ? "" : fromMemory.error().text().c_str());
                QCOMPARE(fromMemory->data, read->data);
                ++slices;
            }
        }
        QVERIFY(slices >= 3);
    }

    void largeSlicesCrossChunkBoundaries_data()
    {
        QTest::addColumn<QList<qint64>>("shape");
        QTest::addColumn<bool>("fortran");
        QTest::addColumn<QList<qint64>>("leading");
        QTest::addColumn<qint64>("rowStart");
        QTest::addColumn<qint64>("rowCount");
        // 1.6 to 2.5 MB payloads, read through a 1 MiB window: blocks larger than the window,
        // blocks past the first window, and Fortran blocks scattered over the whole payload.
        const QList<qint64> matrix{700, 600}, stack{3, 700, 300};
        QTest::newRow("C, 1.3 MB block") << matrix << false << QList<qint64>{} << qint64(100) << qint64(550);
        QTest::newRow("C, last row") << matrix << false << QList<qint64>{} << qint64(699) << qint64(1);
        QTest::newRow("C rank 3, middle matrix") << stack << false << QList<qint64>{1} << qint64(350) << qint64(350);
        QTest::newRow("Fortran rank 2, column runs") << matrix << true << QList<qint64>{} << qint64(100) << qint64(550);
        QTest::newRow("Fortran rank 2, last row") << matrix << true << QList<qint64>{} << qint64(699) << qint64(1);
        QTest::newRow("Fortran rank 3, element by element") << stack << true << QList<qint64>{1} << qint64(5)
                                                            << qint64(600);
        QTest::newRow("Fortran rank 3, last matrix, one row") << stack << true << QList<qint64>{2} << qint64(699)
                                                              << qint64(1);
    }

    void largeSlicesCrossChunkBoundaries()
    {
        QFETCH(QList<qint64>, shape);
        QFETCH(bool, fortran);
        QFETCH(QList<qint64>, leading);
        QFETCH(qint64, rowStart);
        QFETCH(qint64, rowCount);
        const std::vector<std::int64_t> dims = toShape(shape);
        const SliceRequest slice{toShape(leading), rowStart, rowCount};
        const auto npy = npyFile("{'descr': '<f4', 'fortran_order': " + std::string(fortran ? "True" : "False")
                                     + ", 'shape': " + shapeTuple(dims) + ", }",
                                 indexPayload(dims, fortran));
        QTemporaryDir dir;
        const std::string npyPath = dir.filePath(QStringLiteral("t.npy")).toStdString();
        const std::string storedPath = dir.filePath(QStringLiteral("stored.npz")).toStdString();
        const std::string deflatedPath = dir.filePath(QStringLiteral("deflated.npz")).toStdString();
        writeBytes(npyPath, npy);
        QVERIFY(writeZip(storedPath, {{"t.npy", npy}}, false));
        QVERIFY(writeZip(deflatedPath, {{"t.npy", npy}}, true));
        // Element (r, c) of the block holds its C-order index in the whole tensor.
        std::int64_t matrix = 0;
        for (std::size_t k = 0; k + 2 < dims.size(); ++k)
            matrix = matrix * dims[k] + slice.leading[k];
        const std::int64_t rows = dims[dims.size() - 2], cols = dims.back();
        for (const std::string& path : {npyPath, storedPath, deflatedPath}) {
            const auto inspected = inspectTensorFile(path);
            QVERIFY2(inspected.ok(), inspected.ok() ? "" : inspected.error().text().c_str());
            const TensorInfo& info = inspected->tensors.at(0);
            QCOMPARE(info.fortranOrder, fortran);
            const auto read = readTensorSlice(path, info, slice);
            QVERIFY2(read.ok(), read.ok() ? "" : read.error().text().c_str());
            QCOMPARE(read->data.size(), static_cast<std::size_t>(rowCount * cols));
            for (std::int64_t r = 0; r < rowCount; ++r)
                for (std::int64_t c = 0; c < cols; ++c) {
                    const auto expected = static_cast<float>((matrix * rows + rowStart + r) * cols + c);
                    if (read->data[static_cast<std::size_t>(r * cols + c)] != expected)
                        QFAIL(qPrintable(QStringLiteral("%1: element (%2, %3) is %4, expected %5")
                                             .arg(QString::fromStdString(path))
                                             .arg(r)
                                             .arg(c)
                                             .arg(read->data[static_cast<std::size_t>(r * cols + c)])
                                             .arg(expected)));
                }
        }
    }

    void sliceRequestsOutsideTheShapeAreRefused_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QList<qint64>>("leading");
        QTest::addColumn<qint64>("rowStart");
        QTest::addColumn<qint64>("rowCount");
        QTest::addColumn<qint64>("maxBytes");
        QTest::addColumn<QString>("reason");
        // k is [2, 64, 32] (heads, tokens, head_dim) in both files.
        const qint64 noLimit = qint64(1) << 32;
        for (const char* file : {"kv_example.safetensors", "kv_example.npz"}) {
            QTest::addRow("%s no leading", file) << file << QList<qint64>{} << qint64(0) << qint64(1) << noLimit
                                                 << "'leading' has 0 indices, the tensor needs 1";
            QTest::addRow("%s two leading", file) << file << QList<qint64>{0, 0} << qint64(0) << qint64(1) << noLimit
                                                  << "'leading' has 2 indices";
            QTest::addRow("%s head past the end", file) << file << QList<qint64>{2} << qint64(0) << qint64(1) << noLimit
                                                        << "'leading[0]' = 2 is outside dimension 0 of size 2";
            QTest::addRow("%s negative head", file) << file << QList<qint64>{-1} << qint64(0) << qint64(1) << noLimit
                                                    << "'leading[0]' = -1 is outside";
            QTest::addRow("%s rowCount 0", file) << file << QList<qint64>{0} << qint64(0) << qint64(0) << noLimit
                                                 << "'rowCount' = 0: at least one row is needed";
            QTest::addRow("%s negative rowCount", file) << file << QList<qint64>{0} << qint64(0) << qint64(-3) << noLimit
                                                        << "'rowCount' = -3";
            QTest::addRow("%s rowStart past the end", file) << file << QList<qint64>{1} << qint64(64) << qint64(1)
                                                            << noLimit << "'rowStart' = 64 is outside the 64 rows";
            QTest::addRow("%s negative rowStart", file) << file << QList<qint64>{1} << qint64(-1) << qint64(1) << noLimit
                                                        << "'rowStart' = -1 is outside";
            QTest::addRow("%s rows past the end", file) << file << QList<qint64>{1} << qint64(60) << qint64(5) << noLimit
                                                        << "'rowStart' + 'rowCount' = 60 + 5 runs past the 64 rows";
            QTest::addRow("%s huge rowCount", file) << file << QList<qint64>{1} << qint64(1)
                                                    << std::numeric_limits<qint64>::max() << noLimit
                                                    << "'rowStart' + 'rowCount' = 1 + 9223372036854775807 runs past the 64 rows";
            QTest::addRow("%s over the limit", file) << file << QList<qint64>{0} << qint64(0) << qint64(2) << qint64(255)
                                                     << "float32 copy needs 256 bytes ('rowCount' 2 x 32 columns x 4), "
                                                        "more than the limit of 255 bytes";
        }
    }

    void sliceRequestsOutsideTheShapeAreRefused()
    {
        QFETCH(QString, file);
        QFETCH(QList<qint64>, leading);
        QFETCH(qint64, rowStart);
        QFETCH(qint64, rowCount);
        QFETCH(qint64, maxBytes);
        QFETCH(QString, reason);
        const std::string path = dataPath(file);
        const auto inspected = inspectTensorFile(path);
        QVERIFY(inspected.ok());
        const TensorInfo* info = findInfo(*inspected, "k");
        QVERIFY(info);
        ReadLimits limits;
        limits.maxTensorBytes = static_cast<std::uint64_t>(maxBytes);
        const auto read = readTensorSlice(path, *info, SliceRequest{toShape(leading), rowStart, rowCount}, limits);
        QVERIFY(!read.ok());
        QCOMPARE(read.error().field, path);
        QVERIFY2(contains(read.error().message, "tensor 'k': slice " + reason), read.error().message.c_str());
        QVERIFY2(contains(read.error().message, QStringLiteral("(shape [2, 64, 32])")), read.error().message.c_str());
    }

    void sliceOfTheLimitExactlyAndOfLowRankTensors()
    {
        const std::string path = dataPath(QStringLiteral("kv_example.safetensors"));
        const auto inspected = inspectTensorFile(path);
        QVERIFY(inspected.ok());
        ReadLimits limits;
        limits.maxTensorBytes = 256; // exactly two rows of 32 float32
        QVERIFY(readTensorSlice(path, *findInfo(*inspected, "k"), SliceRequest{{1}, 62, 2}, limits).ok());

        const std::pair<const char*, const char*> lowRank[] = {
            {"st_f16_bf16_f32_f64.safetensors", "f64"}, {"npy_bigendian_f2.npy", ""}, {"npy_scalar_f4.npy", ""}};
        for (const auto& [file, tensor] : lowRank) {
            const std::string p = dataPath(QString::fromLatin1(file));
            const auto info = inspectTensorFile(p);
            QVERIFY(info.ok());
            const auto read = readTensorSlice(p, *findInfo(*info, tensor), SliceRequest{{}, 0, 1});
            QVERIFY(!read.ok());
            QVERIFY2(contains(read.error().message, QStringLiteral("slice needs a tensor of rank 2 or more")),
                     read.error().message.c_str());
        }

        // A matrix of zero columns has rows but no stored element: the block is empty, not an error.
        const auto bytes = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", {});
        const auto zeroColumns = parseNpyHeader(bytes, "mem.npy");
        QVERIFY(zeroColumns.ok());
        const auto empty = decodeTensorSlice(bytes, zeroColumns->tensors.at(0), SliceRequest{{}, 1, 2}, "mem.npy");
        QVERIFY2(empty.ok(), empty.ok() ? "" : empty.error().text().c_str());
        QCOMPARE(empty->shape, (std::vector<std::int64_t>{2, 0}));
        QVERIFY(empty->data.empty());
    }

    void sliceOfAChangedFileIsRefused()
    {
        QTemporaryDir dir;
        for (const char* file : {"npy_v1_f4_c.npy", "npz_stored.npz", "kv_example.safetensors"}) {
            const std::string path = dir.filePath(QString::fromLatin1(file)).toStdString();
            std::vector<std::uint8_t> bytes = readBytes(dataPath(QString::fromLatin1(file)));
            writeBytes(path, bytes);
            const auto inspected = inspectTensorFile(path);
            QVERIFY(inspected.ok());
            const TensorInfo info = inspected->tensors.at(0);
            const SliceRequest slice{std::vector<std::int64_t>(info.shape.size() - 2, 0), 0, 1};
            QVERIFY(readTensorSlice(path, info, slice).ok());

            bytes.push_back(0);
            writeBytes(path, bytes);
            const auto grown = readTensorSlice(path, info, slice);
            QVERIFY(!grown.ok());
            QCOMPARE(grown.error().field, path);
            QVERIFY2(contains(grown.error().message, "tensor " + QString::fromStdString(quoteName(info.name)) + ": the "),
                     grown.error().message.c_str());
            QVERIFY2(contains(grown.error().message, QString::number(bytes.size()) + " bytes, "
                                                         + QString::number(bytes.size() - 1)
                                                         + " when it was inspected; it has changed"),
                     grown.error().message.c_str());
        }

        // Same size, another header: (3, 4) rewritten as (4, 3). A .npy header and an .npz member's
        // header are read again, so the slice is refused rather than taken from the wrong layout.
        for (const char* file : {"npy_v1_f4_c.npy", "npz_stored.npz"}) {
            const std::string path = dir.filePath(QString::fromLatin1(file)).toStdString();
            std::vector<std::uint8_t> bytes = readBytes(dataPath(QString::fromLatin1(file)));
            writeBytes(path, bytes);
            const auto inspected = inspectTensorFile(path);
            QVERIFY(inspected.ok());
            const std::string from = "(3, 4)", to = "(4, 3)";
            const auto at = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
            QVERIFY(at != bytes.end());
            std::copy(to.begin(), to.end(), at);
            writeBytes(path, bytes);
            const auto read = readTensorSlice(path, inspected->tensors.at(0), SliceRequest{{}, 0, 1});
            QVERIFY(!read.ok());
            QVERIFY2(contains(read.error().message, QStringLiteral("header has changed since the file was inspected")),
                     read.error().message.c_str());
        }
    }

    void sliceOfADeflatedGiantNeedsNoWholeTensor()
    {
        // 64 MiB of float32 deflated to ~70 KB: under a 1 MiB limit the whole tensor is refused, but
        // any one-row slice is read, the member being inflated as a stream and skipped up to the row.
        const std::string path = dataPath(QStringLiteral("npz_deflated_64mib.npz"));
        ReadLimits limits;
        limits.maxTensorBytes = 1 << 20;
        const auto whole = readTensor(path, "z", limits);
        QVERIFY(!whole.ok());
        QVERIFY2(contains(whole.error().message, QStringLiteral("tensor 'z': float32 copy needs 67108864 bytes, more "
                                                                "than the limit of 1048576 bytes")),
                 whole.error().message.c_str());

        const auto inspected = inspectTensorFile(path);
        QVERIFY(inspected.ok());
        const TensorInfo& info = inspected->tensors.at(0);
        QCOMPARE(info.shape, (std::vector<std::int64_t>{4096, 4096}));
        const auto lastRow = readTensorSlice(path, info, SliceRequest{{}, 4095, 1}, limits);
        QVERIFY2(lastRow.ok(), lastRow.ok() ? "" : lastRow.error().text().c_str());
        QCOMPARE(lastRow->shape, (std::vector<std::int64_t>{1, 4096}));
        for (std::size_t c = 0; c < 4096; ++c)
            QCOMPARE(lastRow->data[c], static_cast<float>(static_cast<double>(c) * 0.25 - 3.0));
        const auto twoRows = readTensorSlice(path, info, SliceRequest{{}, 4094, 2}, limits);
        QVERIFY(twoRows.ok());
        QCOMPARE(twoRows->data[4095], 0.0f);
        QCOMPARE(twoRows->data[4096], -3.0f);
        for (const std::int64_t row : {0, 1, 2048}) {
            const auto zeros = readTensorSlice(path, info, SliceRequest{{}, row, 1}, limits);
            QVERIFY(zeros.ok());
            QCOMPARE(zeros->data, std::vector<float>(4096, 0.0f));
        }
        // 64 rows are exactly the limit; 65 are refused before anything is decompressed.
        QVERIFY(readTensorSlice(path, info, SliceRequest{{}, 4032, 64}, limits).ok());
        const auto over = readTensorSlice(path, info, SliceRequest{{}, 4031, 65}, limits);
        QVERIFY(!over.ok());
        QVERIFY2(contains(over.error().message, QStringLiteral("more than the limit of 1048576 bytes")),
                 over.error().message.c_str());
    }
};

QTEST_APPLESS_MAIN(TestTensorIo)
#include "tst_tensor_io.moc"
