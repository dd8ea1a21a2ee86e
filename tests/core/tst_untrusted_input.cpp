// SPDX-License-Identifier: GPL-3.0-or-later
// Core's defences against hostile input: bounded JSON, no dumped values in messages, only regular
// files read, UTF-8 checked before a run, the staged output directory, and the memory check from
// counts alone.
#include "core/experiment/runner.h"
#include "core/experiment/shard.h"
#include "core/spec/spec_json.h"
#include "core/io/file_read.h"
#include "core/io/json_text.h"
#include "core/io/staged_dir.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace kvlens;
namespace fs = std::filesystem;

namespace {

std::string nested(int depth)
{
    return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
}

void writeText(const fs::path& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary) << text;
}

std::string readText(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A fresh directory under the system temp folder, removed with the object.
struct TempDir {
    fs::path path;
    TempDir()
    {
        std::string pattern = (fs::temp_directory_path() / "kvlens-untrusted-XXXXXX").string();
        path = ::mkdtemp(pattern.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

/// Which entries beside `target` a run left (staging, lock, old copies).
std::vector<std::string> leftovers(const fs::path& parent)
{
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(parent))
        if (e.path().filename().string().find(".kvlens-") != std::string::npos)
            out.push_back(e.path().filename().string());
    return out;
}

} // namespace

class TestUntrustedInput : public QObject {
    Q_OBJECT
private slots:
    void nestingIsCappedAtItsStatedDepth()
    {
        QVERIFY(io::jsonNestingError(nested(io::kMaxJsonDepth)).empty());
        const std::string deep = io::jsonNestingError(nested(io::kMaxJsonDepth + 1));
        QVERIFY2(deep.find("nested deeper than 64 levels (at byte 64)") != std::string::npos, deep.c_str());
        // Brackets inside strings, escaped quotes included, are not nesting.
        QVERIFY(io::jsonNestingError("{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}").empty());
        // 1e5 levels: refused in one pass, no recursion anywhere.
        auto parsed = io::parseJsonText("{\"x\": " + nested(100000) + "}");
        QVERIFY(!parsed);
        QVERIFY(parsed.error().message.find("nested deeper") != std::string::npos);
    }

    void duplicateKeysAreRefusedAtAnyDepth()
    {
        auto top = io::parseJsonText(R"({"a": 1, "b": 2, "a": 3})");
        QVERIFY(!top);
        QCOMPARE(top.error().message, std::string("key 'a' is given twice in one object (at the top level)"));
        auto inner = io::parseJsonText(R"({"a": {"x": 1, "x": 1}})");
        QVERIFY(!inner);
        QCOMPARE(inner.error().message, std::string("key 'x' is given twice in one object (at nesting level 2)"));
        // The same key in two sibling objects is fine.
        QVERIFY(io::parseJsonText(R"([{"x": 1}, {"x": 2}])").ok());
    }

    void valuesAreDescribedNeverDumped()
    {
        using nlohmann::json;
        QCOMPARE(io::describeJson(json::array({1, 2, 3})), std::string("an array of 3 elements"));
        QCOMPARE(io::describeJson(json::object({{"k", 1}})), std::string("an object of 1 key"));
        QCOMPARE(io::describeJson(json(2.5)), std::string("the number 2.5"));
        QCOMPARE(io::describeJson(json(nullptr)), std::string("null"));
        QCOMPARE(io::describeJson(json("a\nb")), std::string("the string 'a\\x0ab'"));
        const std::string longString = io::describeJson(json(std::string(100000, 'x')));
        QVERIFY2(longString.size() < 120, longString.c_str());
        // A deep array is described by its top level only (a dump would recurse 60 times here, 1e5 in the attack).
        json deep = json::array();
        for (int i = 0; i < 60; ++i)
            deep = json::array({deep});
        QCOMPARE(io::describeJson(deep), std::string("an array of 1 element"));
    }

    void utf8IsCheckedByTheStandardsRules()
    {
        QVERIFY(io::isValidUtf8("plain ASCII"));
        QVERIFY(io::isValidUtf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")); // é, €, an emoji
        QVERIFY(!io::isValidUtf8("\xff"));
        QVERIFY(!io::isValidUtf8("\xc3"));             // truncated
        QVERIFY(!io::isValidUtf8("\xc0\xaf"));         // overlong '/'
        QVERIFY(!io::isValidUtf8("\xed\xa0\x80"));     // a surrogate
        QVERIFY(!io::isValidUtf8("\xf4\x90\x80\x80")); // past U+10FFFF
        // dumpJson never throws on what nlohmann's dump() rejects.
        QCOMPARE(io::dumpJson(nlohmann::json(std::string("a\xff"))), std::string("\"a\xef\xbf\xbd\""));
    }

    void specMessagesNameTheFieldAndItsRange_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("mention");
        QTest::newRow("d 1e308") << QByteArray(R"({"d": 1e308})") << "d" << "must be an integer in [4, 16384], got 1e+308";
        QTest::newRow("tokens 1e12") << QByteArray(R"({"tokens": 1e12})") << "tokens" << "in [1, 4194304]";
        QTest::newRow("budget 1e9") << QByteArray(R"({"budgets": [1e9]})") << "budgets[0]" << "in [2, 8]";
        QTest::newRow("deep name") << QByteArray("{\"name\": " + QByteArray::fromStdString(nested(50)) + "}") << "name"
                                   << "must be a string, got an array of 1 element";
        QTest::newRow("deep regime value")
            << QByteArray("{\"regime\": {\"name\": \"gaussian\", \"x\": " + QByteArray::fromStdString(nested(50)) + "}}")
            << "regime.x" << "must be a number or a string, got an array of 1 element";
        QTest::newRow("duplicate") << QByteArray(R"({"metrics": {"top_k": 3, "top_k": 4}})") << ""
                                   << "key 'top_k' is given twice";
        QTest::newRow("seeds wrap") << QByteArray(R"({"seeds": {"first": 18446744073709551615, "count": 2}})")
                                    << "seeds.first" << "the last seed would wrap past 2^64 - 1";
        QTest::newRow("escape in name") << QByteArray("{\"name\": \"a\\u001b[31mb\"}") /* moc misreads \u in a raw string */ << "name"
                                        << "must not contain control characters";
        QTest::newRow("newline in scheme name")
            << QByteArray(R"({"schemes": [{"name": "x\ny", "k": {}, "v": {}}]})") << "schemes[0].name"
            << "must not contain control characters";
    }
    void specMessagesNameTheFieldAndItsRange()
    {
        QFETCH(QByteArray, json);
        QFETCH(QString, field);
        QFETCH(QString, mention);
        const auto spec = specFromJson(json.toStdString());
        QVERIFY(!spec);
        QCOMPARE(QString::fromStdString(spec.error().field), field);
        QVERIFY2(spec.error().message.find(mention.toStdString()) != std::string::npos, spec.error().message.c_str());
        QVERIFY(spec.error().message.size() < 300);
    }

    void aSpecInAFolderThatIsNotUtf8IsRefusedBeforeRunning()
    {
        // The imported file resolves to an absolute path through the folder's name; spec.json could
        // not hold it, so it is refused when loaded, not after the run (which used to abort).
        TempDir tmp;
        const fs::path folder = tmp.path / std::string("bad-\xff\xfe-name");
        fs::create_directories(folder);
        fs::copy_file(KVLENS_EXAMPLES_DIR "/kv_example.safetensors", folder / "kv_example.safetensors");
        fs::copy_file(KVLENS_EXAMPLES_DIR "/imported.json", folder / "imported.json");
        const auto spec = loadSpecFile((folder / "imported.json").string());
        QVERIFY(!spec);
        QVERIFY2(spec.error().text().find("regime.file: is not valid UTF-8") != std::string::npos,
                 spec.error().text().c_str());
        // The same spec from a UTF-8 folder loads.
        const fs::path good = tmp.path / "good";
        fs::create_directories(good);
        fs::copy_file(KVLENS_EXAMPLES_DIR "/kv_example.safetensors", good / "kv_example.safetensors");
        fs::copy_file(KVLENS_EXAMPLES_DIR "/imported.json", good / "imported.json");
        QVERIFY(loadSpecFile((good / "imported.json").string()).ok());
    }

    void onlyRegularFilesBelowTheCapAreRead()
    {
        TempDir tmp;
        writeText(tmp.path / "a.json", "{}");
        QCOMPARE(*io::readRegularFile((tmp.path / "a.json").string(), 16), std::string("{}"));
        auto big = io::readRegularFile((tmp.path / "a.json").string(), 1);
        QVERIFY(!big);
        QVERIFY2(big.error().message.find("is 2 bytes, above the cap of 1 bytes") != std::string::npos,
                 big.error().message.c_str());
        for (const char* device : {"/dev/zero", "/dev/null"}) {
            auto r = io::readRegularFile(device, io::kMaxSpecBytes);
            QVERIFY(!r);
            QVERIFY(r.error().message.find("not a regular file") != std::string::npos);
        }
        fs::create_symlink("/dev/zero", tmp.path / "link");
        QVERIFY(!io::readRegularFile((tmp.path / "link").string(), io::kMaxSpecBytes));
        QVERIFY(::mkfifo((tmp.path / "fifo").c_str(), 0600) == 0);
        QVERIFY(!io::readRegularFile((tmp.path / "fifo").string(), io::kMaxSpecBytes)); // and does not block
        QVERIFY(!io::readRegularFile(tmp.path.string(), io::kMaxSpecBytes));
        auto missing = loadSpecFile((tmp.path / "none.json").string());
        QVERIFY(!missing);
        QVERIFY(missing.error().text().find("No such file or directory") != std::string::npos);
    }

    void manifestsAreReadAsUntrustedJson()
    {
        ShardManifest m;
        m.programVersion = "0.1.0";
        m.specHash = 0x0123456789abcdefULL;
        m.dataHash = 0xfedcba9876543210ULL;
        m.trials = {1, 2};
        const std::string text = manifestToJson(m);
        auto back = manifestFromJson(text);
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().text().c_str());
        QCOMPARE(back->dataHash, m.dataHash);
        // A key given twice (which would have silently won) and a deep value are refused.
        std::string twice = text;
        twice.insert(1, "\"spec_hash\": \"0000000000000000\",");
        QVERIFY(!manifestFromJson(twice));
        QVERIFY(!manifestFromJson("{\"format\": " + nested(100000) + "}"));
        // A manifest of an older version has no data hash: drawn data.
        nlohmann::json j = nlohmann::json::parse(text);
        j.erase("data_hash");
        auto old = manifestFromJson(j.dump());
        QVERIFY(old.ok());
        QCOMPARE(old->dataHash, std::uint64_t{0});
        // The data hash is part of the spec's identity (and so of every trial id), only when set.
        const ExperimentSpec spec = *normalizeSpec(defaultSpec());
        QCOMPARE(specHash(spec, 0), specHash(spec));
        QVERIFY(specHash(spec, 1) != specHash(spec));
        QVERIFY(specHash(spec, 1) != specHash(spec, 2));
    }

    void theMemoryCheckOfAShardNeedsNoListOfItsTrials()
    {
        // 1.4e10 trials: the list of a shard's trials alone would need ~220 GB; refused from counts.
        ExperimentSpec spec = defaultSpec();
        spec.seedCount = SpecLimits::kMaxSeeds;
        spec.budgets = {2, 3, 4, 5, 6, 7, 8};
        for (const char* name : {"TQ-KV", "TQ-KQV"})
            spec.schemes.push_back(*findScheme(name));
        SweepAxis axis;
        axis.parameter = SweepParameter::ScoreScale;
        for (int i = 0; i < 4000; ++i)
            axis.values.push_back(1.0 + i * 1e-3);
        spec.sweep = {axis};
        auto normalized = normalizeSpec(spec);
        QVERIFY(normalized.ok());
        QVERIFY(normalized->trialCount() > 10000000000LL);
        CpuBackend backend(1);
        for (const ShardId shard : {ShardId{0, 1}, ShardId{3, 1000}}) {
            auto r = runExperiment(*normalized, backend, nullptr, shardFilter(*normalized, shard));
            QVERIFY(!r);
            QCOMPARE(r.error().field, std::string("memory_limit_mb"));
        }
    }

    void aStagedDirectoryReplacesTheTargetWholeOrNotAtAll()
    {
        TempDir tmp;
        const fs::path target = tmp.path / "run";
        {
            auto first = io::StagedDirectory::begin(target.string());
            QVERIFY2(first.ok(), first.ok() ? "" : first.error().text().c_str());
            QVERIFY(!fs::exists(target)); // nothing appears until commit
            writeText(fs::path(first->path()) / "spec.json", "first");
            writeText(fs::path(first->path()) / "old_only.csv", "x");
            QVERIFY(first->commit().ok());
        }
        QCOMPARE(readText(target / "spec.json"), std::string("first"));
        QVERIFY(leftovers(tmp.path).empty());
        {
            // Abandoned (an error, Ctrl-C): the first run stays, and nothing is left beside it.
            auto second = io::StagedDirectory::begin(target.string());
            QVERIFY(second.ok());
            writeText(fs::path(second->path()) / "spec.json", "second");
        }
        QCOMPARE(readText(target / "spec.json"), std::string("first"));
        QVERIFY(leftovers(tmp.path).empty());
        {
            // While one holds the target, a second is refused, naming this process.
            auto holder = io::StagedDirectory::begin(target.string());
            QVERIFY(holder.ok());
            auto other = io::StagedDirectory::begin(target.string());
            QVERIFY(!other);
            QVERIFY2(other.error().message.find("another kvlens run is writing this directory (pid "
                                                + std::to_string(::getpid()) + ")")
                         != std::string::npos,
                     other.error().message.c_str());
            writeText(fs::path(holder->path()) / "spec.json", "third");
            QVERIFY(holder->commit().ok());
        }
        // Replaced whole: the first run's extra file is gone with it.
        QCOMPARE(readText(target / "spec.json"), std::string("third"));
        QVERIFY(!fs::exists(target / "old_only.csv"));
        // A killed run's staging directory is cleared by the next one.
        fs::create_directories(tmp.path / ".run.kvlens-staging-dead00");
        auto next = io::StagedDirectory::begin(target.string());
        QVERIFY(next.ok());
        QVERIFY(!fs::exists(tmp.path / ".run.kvlens-staging-dead00"));
        next->abort();
        // A folder of someone else's files is never replaced; a file is not a directory.
        fs::create_directories(tmp.path / "thesis");
        writeText(tmp.path / "thesis" / "chapter1.tex", "precious");
        auto refused = io::StagedDirectory::begin((tmp.path / "thesis").string());
        QVERIFY(!refused);
        QVERIFY(refused.error().message.find("not a KVLens run") != std::string::npos);
        writeText(tmp.path / "plain", "x");
        QVERIFY(!io::StagedDirectory::begin((tmp.path / "plain").string()));
        // An output under /proc cannot be made, even by root: refused at begin, before any computing.
        auto proc = io::StagedDirectory::begin("/proc/kvlens-no/out");
        QVERIFY(!proc);
    }
};

QTEST_APPLESS_MAIN(TestUntrustedInput)
#include "tst_untrusted_input.moc"
