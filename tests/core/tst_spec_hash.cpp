// SPDX-License-Identifier: GPL-3.0-or-later
// Spec hashes are part of users' stored runs (--reuse, merge, compare): every shipped spec keeps the hash it had.
#include "core/experiment/shard.h"
#include "core/spec/spec_json.h"

#include <QTest>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace kvlens;

namespace {

/// One row of tests/data/spec_hashes.tsv: the hash recorded for a spec (a file of the source tree,
/// or a spec written inline), with the imported-data hash it is continued with.
struct Recorded {
    std::uint64_t hash = 0;
    std::uint64_t dataHash = 0;
    std::string source; ///< a path relative to the source tree, or JSON text starting with '{'
};

std::vector<Recorded> readTable(const std::string& path)
{
    std::vector<Recorded> rows;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line.front() == '#')
            continue;
        std::istringstream fields(line);
        std::string hash, data, source;
        std::getline(fields, hash, '\t');
        std::getline(fields, data, '\t');
        std::getline(fields, source);
        const auto h = parseHex64(hash), d = parseHex64(data);
        if (!h || !d || source.empty())
            return {}; // a malformed table fails the test below (no rows)
        rows.push_back({*h, *d, source});
    }
    return rows;
}

/// A spec of the table as --batch and --reproduce read it. Presets read their regime files from
/// resources/examples, as --reproduce does; a spec file elsewhere from beside it. Regime paths are
/// resolved to absolute paths when read, so they are written back relative to the source tree:
/// the recorded hash must not depend on where the tree is checked out.
Result<ExperimentSpec> loadRecorded(const std::string& source)
{
    const std::filesystem::path root(KVLENS_SOURCE_DIR);
    Result<ExperimentSpec> spec = Error{"", ""};
    if (source.front() == '{') {
        spec = specFromJson(source);
    } else {
        const std::filesystem::path file = root / source;
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        const bool preset = file.parent_path().filename() == "presets";
        spec = specFromJson(text.str(), (preset ? root / "resources" / "examples" : file.parent_path()).string());
    }
    if (!spec)
        return spec;
    const std::string prefix = root.lexically_normal().string() + "/";
    for (auto& [key, value] : spec->regimeParams)
        if (auto* text = std::get_if<std::string>(&value); text && text->rfind(prefix, 0) == 0)
            *text = text->substr(prefix.size());
    return spec;
}


} // namespace

class TestSpecHash : public QObject {
    Q_OBJECT
private slots:

    void shippedSpecsKeepTheirHashes_data()
    {
        QTest::addColumn<QString>("source");
        QTest::addColumn<quint64>("dataHash");
        QTest::addColumn<quint64>("recorded");
        const auto rows = readTable(KVLENS_SOURCE_DIR "/tests/data/spec_hashes.tsv");
        QVERIFY2(rows.size() >= 30, "tests/data/spec_hashes.tsv is missing or malformed");
        for (const Recorded& r : rows)
            QTest::newRow(r.source.substr(0, 60).c_str())
                << QString::fromStdString(r.source) << quint64{r.dataHash} << quint64{r.hash};
    }

    void shippedSpecsKeepTheirHashes()
    {
        // The values were recorded once by the code before specHash took its neutral fields from
        // forEachSpecField's roles (the commit that added this file says which); a change of any
        // of them breaks --reuse, merge and compare on every stored run of that spec.
        QFETCH(QString, source);
        QFETCH(quint64, dataHash);
        QFETCH(quint64, recorded);
        const auto spec = loadRecorded(source.toStdString());
        QVERIFY2(spec.ok(), spec.ok() ? "" : qPrintable(QString::fromStdString(spec.error().text())));
        QCOMPARE(QString::fromStdString(hex64(specHash(*spec, dataHash))), QString::fromStdString(hex64(recorded)));
    }
};

QTEST_APPLESS_MAIN(TestSpecHash)
#include "tst_spec_hash.moc"
