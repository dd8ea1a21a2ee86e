// SPDX-License-Identifier: GPL-3.0-or-later
// kvlens entry point: the command table's row for the words, its options read, a QApplication only where the row needs one.
#include "app/commands.h"
#include "app/resources.h"

#include <QApplication>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace {

/// Drops Qt's one harmless warning about a missing XDG_RUNTIME_DIR (root shells, CI), so
/// batch errors stay one line; everything else goes to Qt's default handler.
QtMessageHandler g_defaultHandler = nullptr;
void filterMessages(QtMsgType type, const QMessageLogContext& context, const QString& message)
{
    if (type == QtWarningMsg && message.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR not set")))
        return;
    // A PNG that cannot be written (a full disk) is reported by the exporter in one line with the
    // reason; libpng's own two-line complaint would only bury it.
    if (type == QtWarningMsg && message.startsWith(QLatin1String("libpng ")))
        return;
    g_defaultHandler(type, context, message);
}

int run(int argc, char** argv);

} // namespace

/// Whatever escapes (std::bad_alloc on a machine out of memory, a library's exception) ends the
/// program with one line and status 1, never std::terminate's abort and core dump.
int main(int argc, char** argv)
{
    try {
        return run(argc, argv);
    } catch (const std::bad_alloc&) {
        std::cerr << "kvlens: out of memory (std::bad_alloc); lower memory_limit_mb or the run's sizes\n";
    } catch (const std::exception& e) {
        std::cerr << "kvlens: internal error: " << e.what() << "\n";
    } catch (...) {
        std::cerr << "kvlens: internal error (unknown exception)\n";
    }
    return 1;
}

namespace {

int run(int argc, char** argv)
{
    initKvlensResources();
    const kvlens::app::Invocation invocation =
        kvlens::app::readCommandLine(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
    if (!invocation.command)
        return invocation.exitStatus; // --help, --version, or refused (printed)
    const kvlens::app::Command& command = *invocation.command;
    // Figures and the window need Qt; codebook, capture and runs without figures do not start it.
    std::optional<QApplication> app;
    std::vector<char*> qtArgv{argv[0]};
    for (const std::string& a : invocation.qtArguments)
        qtArgv.push_back(const_cast<char*>(a.c_str()));
    qtArgv.push_back(nullptr);
    int qtArgc = static_cast<int>(qtArgv.size()) - 1;
    if (command.needsApplication(invocation.arguments) || !invocation.qtArguments.empty()) {
        // Headless rows render figures without a display: the offscreen platform unless one is set.
        if (command.headless && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("QT_QPA_PLATFORM"))
            setenv("QT_QPA_PLATFORM", "offscreen", 1);
        g_defaultHandler = qInstallMessageHandler(filterMessages);
        app.emplace(qtArgc, qtArgv.data());
        QApplication::setApplicationName(QStringLiteral("KVLens"));
        QApplication::setOrganizationName(QStringLiteral("KVLens"));
        QApplication::setApplicationVersion(QStringLiteral(KVLENS_VERSION));
    }
    return command.run(invocation.arguments, std::cout, std::cerr);
}

} // namespace
