// SPDX-License-Identifier: GPL-3.0-or-later
// Shannon-phi plane: scale error (SNR, dB) against direction error for keys, values or outputs.
#pragma once

#include "widgets/result_view.h"

#include <QStringList>

class QComboBox;

namespace kvlens::widgets {

/// SNR (dB) against direction error phi (rad) for one site (K, V or T), per vector (capped
/// samples) or per trial (means); hue per scheme, lightness and marker per budget, with the 6.02 n dB
/// lines of an ideal n-bit code.
class ShannonPhiView final : public ResultView {
    Q_OBJECT
public:
    explicit ShannonPhiView(QWidget* parent = nullptr);
    /// The view's id (file stem, `--view ID`): views.cpp lists the views by it.
    static constexpr const char* kId = "shannon_phi";
    QString viewId() const override { return QString::fromLatin1(kId); }
    QString viewTitle() const override { return QStringLiteral("Shannon-φ plane"); }
    QString viewDescription() const override;

    enum class Site { Keys, Values, Output };
    void setSite(Site site);
    void setPerVector(bool perVector);
    /// Clouds with exactly the same points as an earlier one ("KQV n=3 = KV n=3": keys quantized
    /// the same way); each is drawn as rings around the other's markers and named in a note.
    QStringList coincidences() const { return m_coincidences; }
    /// The note drawn in the plot's corner when clouds coincide (empty otherwise).
    QString coincidenceNote() const;
    /// Series names back to front: the widest cloud first, rings of coinciding clouds last.
    QStringList drawOrder() const { return m_drawOrder; }
    /// Clouds left out because their path is exact on this site (SNR at the cap, core's kSnrCapDb:
    /// K of V-only, an fp16 path): drawn, they would stretch the SNR axis to 200 dB and squeeze
    /// every other cloud into its bottom tenth. Named in the note instead.
    QStringList exactClouds() const { return m_exactClouds; }

protected:
    void redraw() override;

private:
    QComboBox* m_site = nullptr;
    QComboBox* m_mode = nullptr;
    QStringList m_coincidences;
    QStringList m_drawOrder;
    QStringList m_exactClouds;
    QString m_note;
};

} // namespace kvlens::widgets
