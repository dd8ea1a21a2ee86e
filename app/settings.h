// SPDX-License-Identifier: GPL-3.0-or-later
// The window's settings between sessions: one typed accessor per key, so a key is spelled once.
#pragma once

#include "core/spec/spec.h"

#include <QByteArray>
#include <QSettings>
#include <QString>
#include <QStringList>

#include <optional>

namespace kvlens::app {

/// The settings the main window keeps (QSettings, organization and application "KVLens"): its
/// geometry and dock layout, the export and import folders, the recent spec files, the last spec,
/// and whether the first-run orientation was dismissed. Reads give a default when a key is absent.
class Settings {
public:
    Settings();

    QByteArray geometry() const;
    void setGeometry(const QByteArray& geometry);
    /// QMainWindow::saveState's bytes: docks and toolbars.
    QByteArray windowState() const;
    void setWindowState(const QByteArray& state);

    /// Where File → Export and the spec dialogs start; `fallback` when never set.
    QString exportFolder(const QString& fallback) const;
    void setExportFolder(const QString& folder);
    /// Where File → Import tensors… started last time; empty when never set.
    QString importFolder() const;
    void setImportFolder(const QString& folder);

    /// The recent spec files, newest first.
    QStringList recentSpecs() const;
    void setRecentSpecs(const QStringList& paths);

    /// The last session's spec, or none (never saved, or no longer a valid spec).
    std::optional<ExperimentSpec> lastSpec() const;
    void setLastSpec(const ExperimentSpec& spec);

    /// The first-run orientation panel was dismissed for good.
    bool orientationDismissed() const;
    void setOrientationDismissed(bool dismissed);

private:
    QSettings m_settings;
};

} // namespace kvlens::app
