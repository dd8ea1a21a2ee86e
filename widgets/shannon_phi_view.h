// SPDX-License-Identifier: GPL-3.0-or-later
// Shannon-phi plane: scale error (SNR, dB) against direction error for keys, values or outputs.
#pragma once

#include "widgets/result_view.h"

class QComboBox;

namespace kvlens::widgets {

/// SNR (dB) against direction error phi (rad) for one site (K, V or T), per vector (capped
/// samples) or per trial (means); colour per scheme, marker per budget, with the 6.02 n dB
/// lines of an ideal n-bit code.
class ShannonPhiView final : public ResultView {
    Q_OBJECT
public:
    explicit ShannonPhiView(QWidget* parent = nullptr);
    QString viewId() const override { return QStringLiteral("shannon_phi"); }
    QString viewTitle() const override { return QStringLiteral("Shannon-φ plane"); }
    QString viewDescription() const override;

    enum class Site { Keys, Values, Output };
    void setSite(Site site);
    void setPerVector(bool perVector);

protected:
    void redraw() override;

private:
    QComboBox* m_site = nullptr;
    QComboBox* m_mode = nullptr;
};

} // namespace kvlens::widgets
