// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens entry point: subcommands that need no window first, then the GUI.
#include "app/codebook_command.h"
#include "app/main_window.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    if (argc >= 2 && std::string(argv[1]) == "codebook") {
        std::vector<std::string> args(argv + 2, argv + argc);
        return kvlens::app::runCodebookCommand(args, std::cout, std::cerr);
    }

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("KVLens"));
    QApplication::setOrganizationName(QStringLiteral("KVLens"));
    QApplication::setApplicationVersion(QStringLiteral(KVLENS_VERSION));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "KVLens: see how KV-cache quantization damages attention.\n\n"
        "Subcommands:\n"
        "  kvlens codebook [--law beta|gauss] [--dim D] [--bits B] [--csv]   print a Lloyd-Max codebook"));
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption quitAfter(QStringLiteral("quit-after"),
                                 QStringLiteral("Close the window after <ms> milliseconds (scripts, smoke tests)."),
                                 QStringLiteral("ms"));
    parser.addOption(quitAfter);
    parser.process(app);

    kvlens::app::MainWindow window;
    window.show();
    if (parser.isSet(quitAfter)) {
        bool ok = false;
        const int ms = parser.value(quitAfter).toInt(&ok);
        if (!ok || ms < 0) {
            std::cerr << "kvlens: --quit-after needs a non-negative number of milliseconds\n";
            return 2;
        }
        QTimer::singleShot(ms, &window, &QWidget::close);
    }
    return QApplication::exec();
}
