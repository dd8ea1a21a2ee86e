// SPDX-License-Identifier: GPL-3.0-or-later
// The window's settings: each key's name and type in one place.
#include "app/settings.h"

#include "core/spec/spec_json.h"

namespace kvlens::app {

namespace {

// The keys as earlier versions wrote them: a user's saved settings keep working.
const QString kGeometry = QStringLiteral("geometry");
const QString kWindowState = QStringLiteral("windowState");
const QString kExportFolder = QStringLiteral("exportFolder");
const QString kImportFolder = QStringLiteral("importFolder");
const QString kRecentSpecs = QStringLiteral("recentSpecs");
const QString kSpec = QStringLiteral("spec");
const QString kOrientationDismissed = QStringLiteral("orientationDismissed");

} // namespace

Settings::Settings() : m_settings(QStringLiteral("KVLens"), QStringLiteral("KVLens")) {}

QByteArray Settings::geometry() const
{
    return m_settings.value(kGeometry).toByteArray();
}

void Settings::setGeometry(const QByteArray& geometry)
{
    m_settings.setValue(kGeometry, geometry);
}

QByteArray Settings::windowState() const
{
    return m_settings.value(kWindowState).toByteArray();
}

void Settings::setWindowState(const QByteArray& state)
{
    m_settings.setValue(kWindowState, state);
}

QString Settings::exportFolder(const QString& fallback) const
{
    return m_settings.value(kExportFolder, fallback).toString();
}

void Settings::setExportFolder(const QString& folder)
{
    m_settings.setValue(kExportFolder, folder);
}

QString Settings::importFolder() const
{
    return m_settings.value(kImportFolder).toString();
}

void Settings::setImportFolder(const QString& folder)
{
    m_settings.setValue(kImportFolder, folder);
}

QStringList Settings::recentSpecs() const
{
    return m_settings.value(kRecentSpecs).toStringList();
}

void Settings::setRecentSpecs(const QStringList& paths)
{
    m_settings.setValue(kRecentSpecs, paths);
}

std::optional<ExperimentSpec> Settings::lastSpec() const
{
    const QByteArray json = m_settings.value(kSpec).toByteArray();
    if (json.isEmpty())
        return std::nullopt;
    auto spec = specFromJson(json.toStdString());
    if (!spec)
        return std::nullopt;
    return std::move(*spec);
}

void Settings::setLastSpec(const ExperimentSpec& spec)
{
    m_settings.setValue(kSpec, QByteArray::fromStdString(specToJson(spec)));
}

bool Settings::orientationDismissed() const
{
    return m_settings.value(kOrientationDismissed, false).toBool();
}

void Settings::setOrientationDismissed(bool dismissed)
{
    m_settings.setValue(kOrientationDismissed, dismissed);
}

} // namespace kvlens::app
