// SPDX-License-Identifier: GPL-3.0-or-later
// The option reader (app/cli.h) as a unit, and the command table (app/commands.h) through it and through
// the executable: --help of every row, a repeated option, an unknown option, each refused in one line.
#include "app/cli.h"
#include "app/commands.h"
#include "common/kvlens_process.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <sstream>

using kvlens::app::Command;
using kvlens::test::Run;
using kvlens::test::runKvlens;
namespace cli = kvlens::app::cli;

namespace {

/// A syntax with one option of every kind, two positional words at most.
cli::Syntax testSyntax()
{
    return {{cli::flag("--quiet", "no progress"), cli::text("--out", "DIR", "where").isRequired(),
             cli::integer("--n", "N", 1, 8, "a count"), cli::real("--x", "X", 0.0, 1.0, "a fraction", true),
             cli::choice("--law", {"a", "b"}, "a law"), cli::text("--meta", "K=V", "metadata").isRepeatable(),
             cli::text("--secret", "S", "for tests").isHidden()},
            {"DIR...", "directories", "inputs", 1, 2}};
}

QStringList toQt(const std::vector<std::string>& words)
{
    QStringList out;
    for (const std::string& w : words)
        out << QString::fromStdString(w);
    return out;
}

std::vector<std::string> toStd(const QStringList& words)
{
    std::vector<std::string> out;
    for (const QString& w : words)
        out.push_back(w.toStdString());
    return out;
}

/// Every row of the table: the subcommands, then the main modes (word empty).
std::vector<const Command*> allRows()
{
    std::vector<const Command*> rows;
    for (const Command& c : kvlens::app::subcommands())
        rows.push_back(&c);
    for (const Command& m : kvlens::app::modes())
        rows.push_back(&m);
    return rows;
}

/// A value the option accepts: its lowest integer, its highest real, its first choice, or a word.
std::string validValue(const cli::Option& o)
{
    switch (o.kind) {
    case cli::ValueKind::Integer:
        return std::to_string(o.intLo);
    case cli::ValueKind::Real:
        return "1";
    case cli::ValueKind::Choice:
        return o.choices.front();
    default:
        return "x";
    }
}

/// The words selecting a main mode whose options are read, so a repeat of `option` reaches the reader.
QStringList wordsFor(const Command& row)
{
    return row.word.empty() ? QStringList{} : QStringList{QString::fromStdString(row.word)};
}

} // namespace

class TestCli : public QObject {
    Q_OBJECT

private slots:
    // --- The reader as a unit: each refusal names the option and says what it takes. ---
    void refusals_data()
    {
        QTest::addColumn<QStringList>("words");
        QTest::addColumn<QString>("message");
        const QString d = QStringLiteral("d");
        QTest::newRow("twice") << QStringList{d, "--out", "o", "--out", "p"} << "--out: is given twice; give it once";
        QTest::newRow("flag twice") << QStringList{d, "--out", "o", "--quiet", "--quiet"} << "--quiet: is given twice; give it once";
        QTest::newRow("no value") << QStringList{d, "--out"} << "--out: needs a value (DIR)";
        QTest::newRow("empty value") << QStringList{d, "--out", ""} << "--out: needs a value (DIR)";
        QTest::newRow("blank value") << QStringList{d, "--out", " \t"} << "--out: needs a value (DIR)";
        QTest::newRow("empty inline value") << QStringList{d, "--out="} << "--out: needs a value (DIR)";
        QTest::newRow("an option for a value") << QStringList{d, "--out", "--quiet"}
                                               << "--out: needs a value (DIR), got the option --quiet";
        QTest::newRow("unknown") << QStringList{d, "--outdir", "o"} << "--outdir: unknown option (see kvlens test --help)";
        QTest::newRow("unknown short") << QStringList{d, "-o", "o"} << "-o: unknown option (see kvlens test --help)";
        QTest::newRow("flag with a value") << QStringList{d, "--out", "o", "--quiet=yes"} << "--quiet: takes no value, got 'yes'";
        QTest::newRow("integer above") << QStringList{d, "--out", "o", "--n", "9"} << "--n: must be an integer in [1, 8], got '9'";
        QTest::newRow("integer below") << QStringList{d, "--out", "o", "--n", "0"} << "--n: must be an integer in [1, 8], got '0'";
        QTest::newRow("integer text") << QStringList{d, "--out", "o", "--n", "3x"} << "--n: must be an integer in [1, 8], got '3x'";
        QTest::newRow("integer overflow") << QStringList{d, "--out", "o", "--n", "99999999999999999999"}
                                          << "--n: must be an integer in [1, 8], got '99999999999999999999'";
        QTest::newRow("real at the open end") << QStringList{d, "--out", "o", "--x", "0"} << "--x: must be a number in (0, 1], got '0'";
        QTest::newRow("real above") << QStringList{d, "--out", "o", "--x", "1.5"} << "--x: must be a number in (0, 1], got '1.5'";
        QTest::newRow("real nan") << QStringList{d, "--out", "o", "--x", "nan"} << "--x: must be a number in (0, 1], got 'nan'";
        QTest::newRow("choice") << QStringList{d, "--out", "o", "--law", "c"} << "--law: must be a or b, got 'c'";
        QTest::newRow("no positional") << QStringList{"--out", "o"} << "no directories given (see kvlens test --help)";
        QTest::newRow("three positionals") << QStringList{d, d, d, "--out", "o"} << "takes at most two directories, got 3";
        QTest::newRow("required") << QStringList{d} << "--out DIR is required";
        QTest::newRow("first refusal wins") << QStringList{d, "--n", "0", "--bogus"} << "--n: must be an integer in [1, 8], got '0'";
    }
    void refusals()
    {
        QFETCH(QStringList, words);
        QFETCH(QString, message);
        const auto read = cli::read(testSyntax(), toStd(words), "kvlens test");
        QVERIFY(!read);
        QCOMPARE(QString::fromStdString(read.error().text()), message);
    }

    void valuesAreReadInEveryForm()
    {
        const auto read = cli::read(testSyntax(),
                                    {"--meta", "a=1", "in", "--out=o", "--n", "8", "--x", "1e-3", "--meta", "b=2", "--law",
                                     "b", "--", "--quiet"},
                                    "kvlens test");
        QVERIFY2(read, read ? "" : read.error().text().c_str());
        QCOMPARE(QString::fromStdString(read->value("--out")), QStringLiteral("o"));
        QCOMPARE(read->integer("--n", 0), 8LL);
        QCOMPARE(read->real("--x", 0.0), 1e-3);
        QCOMPARE(QString::fromStdString(read->value("--law")), QStringLiteral("b"));
        QCOMPARE(toQt(read->values("--meta")), (QStringList{"a=1", "b=2"})); // repeatable: every value, in order
        QCOMPARE(toQt(read->positionals()), (QStringList{"in", "--quiet"}));  // after --, a word is a word
        QVERIFY(!read->has("--quiet"));
        QCOMPARE(toQt(read->given()), (QStringList{"--meta", "--out", "--n", "--x", "--law"}));
        // Defaults for what was not given.
        const auto plain = cli::read(testSyntax(), {"in", "--out", "-1"}, "kvlens test");
        QVERIFY(plain);
        QCOMPARE(QString::fromStdString(plain->value("--out")), QStringLiteral("-1")); // a negative number is a value
        QCOMPARE(plain->integer("--n", 5), 5LL);
        QCOMPARE(QString::fromStdString(plain->value("--law", "a")), QStringLiteral("a"));
        QVERIFY(plain->values("--meta").empty());
    }

    void helpWinsOverEveryRefusal()
    {
        for (const std::vector<std::string>& words :
             {std::vector<std::string>{"--bogus", "--help"}, {"-h"}, {"--out", "--help"}, {"--n", "0", "-h", "a", "b", "c"}}) {
            const auto read = cli::read(testSyntax(), words, "kvlens test");
            QVERIFY2(read && read->helpRequested(), qPrintable(toQt(words).join(' ')));
        }
    }

    void rangesAreInclusiveUnlessOpen()
    {
        QVERIFY(cli::parseInteger("--n", "1", 1, 8));
        QVERIFY(cli::parseInteger("--n", "8", 1, 8));
        QVERIFY(!cli::parseInteger("--n", "", 1, 8));
        QVERIFY(!cli::parseInteger("--n", "+3", 1, 8));
        QVERIFY(cli::parseInteger("--o", "1099511627776", 0, 1LL << 40)); // 2^40, capture's --offset bound
        QVERIFY(!cli::parseInteger("--o", "1099511627777", 0, 1LL << 40));
        QVERIFY(cli::parseReal("--x", "1", 0.0, 1.0, true));
        QVERIFY(!cli::parseReal("--x", "0", 0.0, 1.0, true));
        QVERIFY(cli::parseReal("--x", "0", 0.0, 1.0, false));
        QVERIFY(!cli::parseReal("--x", "inf", 0.0, HUGE_VAL));
    }

    void helpListsTheOptionsWithTheirRanges()
    {
        const std::string help = cli::optionsHelp(testSyntax());
        for (const char* line : {"  DIR...", "  --quiet", "  --out DIR", "a count; an integer in [1, 8]",
                                 "a fraction; a number in (0, 1]", "  --law a|b", "may be given more than once", "  -h, --help"})
            QVERIFY2(help.find(line) != std::string::npos, line);
        QVERIFY(help.find("--secret") == std::string::npos); // hidden
    }

    // --- The table, in process: every row's --help, a repeat of every option, an unknown option. ---
    void everyRowPrintsItsOptions()
    {
        for (const Command* row : allRows()) {
            std::ostringstream out, err;
            const int status = kvlens::app::runCommandLine(row->word, {"--help"}, out, err);
            QCOMPARE(status, 0);
            QVERIFY(err.str().empty());
            for (const cli::Option& o : row->syntax.options)
                if (!o.hidden)
                    QVERIFY2(out.str().find("  " + o.name) != std::string::npos || out.str().find(", " + o.name) != std::string::npos,
                             qPrintable(QString::fromStdString(row->prefix() + " --help lacks " + o.name)));
        }
    }

    void everyRepeatedOptionIsRefused()
    {
        for (const Command* row : allRows())
            for (const cli::Option& o : row->syntax.options) {
                if (o.repeatable)
                    continue;
                std::vector<std::string> once{o.name};
                if (o.takesValue())
                    once.push_back(validValue(o));
                std::vector<std::string> words = once;
                words.insert(words.end(), once.begin(), once.end());
                std::ostringstream out, err;
                QCOMPARE(kvlens::app::runCommandLine(row->word, words, out, err), 2);
                const std::string expected = row->prefix() + ": " + o.name + ": is given twice; give it once\n";
                QCOMPARE(QString::fromStdString(err.str()), QString::fromStdString(expected));
            }
    }

    void theModesRefuseWhatTheyDoNotTake()
    {
        QTemporaryDir dir;
        const QString eval = dir.filePath(QStringLiteral("eval.json"));
        QFile f(eval);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"kvlens_eval": 1})"); // isEvalSpecFile reads only the key; the refusal comes before loading
        f.close();
        const std::string spec = eval.toStdString();
        struct Case {
            std::vector<std::string> words;
            std::string message;
        };
        const Case cases[] = {
            {{"--batch", spec, "--out", "o", "--shard", "2/2"}, "kvlens: --shard: must be i/n with 0 <= i < n <= 1048576, got '2/2'\n"},
            {{"--batch", spec, "--out", "o", "--validate"},
             "kvlens: --validate: an evaluation (EVAL.json) does not take it (it is an option of --batch SPEC.json "
             "--validate)\n"},
            // An evaluation takes --backend (where its forward runs), and refuses a backend there is not.
            {{"--batch", spec, "--out", "o", "--backend", "cuda"}, "kvlens: --backend: must be cpu, opencl or auto, got 'cuda'\n"},
            {{"--shard", "0/2"}, "kvlens: --shard: the window does not take it (it is an option of --batch SPEC.json and --batch EVAL.json)\n"},
            {{"--batch", "default", "--validate", "--out", "o", "--no-figures"},
             "kvlens: --no-figures: a validation (--validate) does not take it (it is an option of --batch SPEC.json, "
             "--batch EVAL.json and --reproduce)\n"},
            {{"--reproduce", "--batch", "default", "--out", "o"},
             "kvlens: --batch: --reproduce does not take it (it is an option of --batch SPEC.json, --batch SPEC.json "
             "--validate and --batch EVAL.json)\n"},
            {{"--batch", "default"}, "kvlens: --out DIR is required\n"},
            {{"--batch", "default", "--out", "o", "stray"},
             "kvlens: unexpected argument 'stray' (options start with --; see kvlens --help)\n"},
            {{"--batch", "default", "--out", "o", "--no-figures", "--width", "double"},
             "kvlens: --width: draws nothing with --no-figures (no figures are written)\n"},
        };
        for (const Case& c : cases) {
            std::ostringstream out, err;
            QCOMPARE(kvlens::app::runCommandLine({}, c.words, out, err), 2);
            QCOMPARE(QString::fromStdString(err.str()), QString::fromStdString(c.message));
        }
    }

    // --- The executable: the same for every row, as a user meets it. ---
    void theExecutableReadsEveryRowTheSameWay()
    {
        for (const Command* row : allRows()) {
            const QStringList base = wordsFor(*row);
            const Run help = runKvlens(base + QStringList{QStringLiteral("--help")}, {}, 30000);
            QCOMPARE(help.exitCode, 0);
            for (const cli::Option& o : row->syntax.options)
                if (!o.hidden)
                    QVERIFY2(help.out.contains(QByteArray::fromStdString(o.name)), qPrintable(QString::fromStdString(o.name)));
            const Run unknown = runKvlens(base + QStringList{QStringLiteral("--no-such-option")}, {}, 30000);
            QCOMPARE(unknown.exitCode, 2);
            QCOMPARE(unknown.err, QByteArray::fromStdString(row->prefix() + ": --no-such-option: unknown option (see "
                                                            + row->prefix() + " --help)\n"));
            for (const cli::Option& o : row->syntax.options) {
                if (!o.takesValue() || o.repeatable)
                    continue;
                const QStringList once{QString::fromStdString(o.name), QString::fromStdString(validValue(o))};
                const Run twice = runKvlens(base + once + once, {}, 30000);
                QCOMPARE(twice.exitCode, 2);
                QVERIFY2(twice.err.startsWith(QByteArray::fromStdString(row->prefix() + ": " + o.name + ": is given twice")),
                         twice.err.constData());
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
