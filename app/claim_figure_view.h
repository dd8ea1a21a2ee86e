// SPDX-License-Identifier: GPL-3.0-or-later
// A figure made of numbers (core/report's claims::Figure) as a view, so it exports through the same
// code and paper style as every other figure: the report's claim figures, the advisor's front.
#pragma once

#include "core/report/claims.h"
#include "widgets/result_view.h"

namespace kvlens::app {

/// A claims::Figure drawn as a view.
class ClaimFigureView final : public widgets::ResultView {
public:
    ClaimFigureView(claims::Figure figure, QWidget* parent) : ResultView(parent), m_figure(std::move(figure)) { draw(); }

    QString viewId() const override { return QString::fromStdString(m_figure.id); }
    QString viewTitle() const override { return QString::fromStdString(m_figure.title); }
    QString viewDescription() const override { return QString::fromStdString(m_figure.caption); }
    QString emptyText() const override { return {}; } // its numbers are its data

protected:
    void redraw() override { draw(); }

private:
    void draw();
    claims::Figure m_figure;
};

} // namespace kvlens::app
