// SPDX-License-Identifier: GPL-3.0-or-later
// Base of the plot views: a row of view options above one exportable figure, fed a ViewData.
#pragma once

#include "widgets/figure_spec.h"
#include "widgets/plot_widget.h"
#include "widgets/view_data.h"

#include <QHBoxLayout>
#include <QString>
#include <QWidget>

class QComboBox;
class QLabel;
class QTableWidget;

namespace kvlens::widgets {

/// A view of a result set. Subclasses build their figure in redraw() from data();
/// option widgets added with addOption() redraw on change.
class ResultView : public QWidget {
    Q_OBJECT
public:
    explicit ResultView(QWidget* parent = nullptr);

    /// Stable identifier used for file names ("shannon_phi").
    virtual QString viewId() const = 0;
    /// Tab and figure title ("Shannon-φ plane").
    virtual QString viewTitle() const = 0;
    /// One sentence on what the view shows, used as its tooltip.
    virtual QString viewDescription() const = 0;

    /// Shows a snapshot (partial while a run is going, then the final one).
    void setData(const ViewData& data);
    const ViewData& data() const { return m_data; }

    /// The result set the figure is drawn from: the run whose spec an export writes beside it,
    /// and whose coverage (a partial run's trials) the export states. Most views draw data();
    /// the Model map keeps the whole model's run while one of its cells is studied.
    virtual std::shared_ptr<const ResultSet> figureResults() const { return m_data.results; }
    /// Why the view has no figure worth exporting now ("not a model run"), or "" when it has one.
    /// Export all skips such a view and names it with this reason. Default: the placeholder's
    /// text while there is one, "nothing is drawn" when no series holds a point.
    virtual QString noFigureReason() const;

    /// The exported figure.
    PlotWidget* plot() const { return m_plot; }
    /// What the figure draws now, as data (the description drawFigure drew; empty panels for a view
    /// that draws otherwise).
    const FigureSpec& figure() const { return m_figure; }
    /// The axis rect drawn for panel `index` of figure(), or null.
    QCPAxisRect* figurePanel(int index) const { return m_panels.value(index, nullptr); }
    /// The plotted data as CSV (what export writes beside the figure).
    virtual QString dataCsv() const { return m_plot->dataCsv(); }
    /// Data series currently drawn.
    int seriesCount() const { return m_plot->seriesCount(); }
    /// The grid point shown (0 without a sweep).
    int currentPoint() const;
    /// Selects the grid point shown.
    void setPoint(int point);
    /// Blocks until whatever the view computes in the background has been drawn (at most
    /// `timeoutMs`); true when the figure is current. Export calls it first. Views that draw
    /// synchronously from data() are always current.
    virtual bool waitUntilDrawn(int timeoutMs = 30000)
    {
        Q_UNUSED(timeoutMs);
        return true;
    }
    /// Around an export at `widthInches`: a view whose layout cannot be legible at that width
    /// draws a simpler one (the 6D matrix draws one pair at a single column) and back after.
    virtual void beginPrint(double widthInches) { Q_UNUSED(widthInches); }
    /// Height / width the view needs when exported at `widthInches`, or 0 for the export's own
    /// (ExportOptions::aspect).
    virtual double printAspect(double widthInches) const
    {
        Q_UNUSED(widthInches);
        return 0.0;
    }
    /// What the view says while it has nothing to show (a one-line placeholder over the plot
    /// instead of bare axes), or "" when it has something. Default: "Run an experiment…" before
    /// any result, "computing… 0 of N trials" before the first trial.
    virtual QString emptyText() const;
    /// The placeholder's text as shown now ("" when hidden).
    QString placeholderText() const;
    virtual void endPrint() {}

protected:
    /// Shows or hides the placeholder from emptyText(); setData calls it after redraw.
    void updateEmptyState();
    bool eventFilter(QObject* watched, QEvent* event) override;
    /// Rebuilds the figure from data(); called on new data and when an option changes.
    virtual void redraw() = 0;
    /// Adds an option widget (combo box, check box) to the row above the plot.
    void addOption(const QString& label, QWidget* widget);
    /// A read-only table with these column headers and their tooltips (no row numbers, columns
    /// sized to their contents), parented to this view.
    QTableWidget* addTable(const QStringList& headers, const QStringList& tooltips);
    /// Puts the plot above `below` in a vertical splitter the user resizes; `stretch` gives the
    /// plot's factor, then each widget's (none: Qt's).
    void splitBelowPlot(const QList<QWidget*>& below, const QList<int>& stretch = {});
    /// Name of scheme `index` of the current results.
    QString schemeName(int index) const;
    /// Draws `figure` (built by the view's pure figure function) and keeps it as figure().
    void showFigure(FigureSpec figure);

    PlotWidget* m_plot = nullptr;
    QVBoxLayout* m_layout = nullptr;

    /// Views that draw every grid point at once hide the point selector.
    void setPointSelectable(bool selectable);

private:
    void refreshPoints();

    QHBoxLayout* m_options = nullptr;
    QComboBox* m_point = nullptr;
    QLabel* m_pointLabel = nullptr;
    QLabel* m_placeholder = nullptr;
    bool m_pointSelectable = true;
    ViewData m_data;
    FigureSpec m_figure;
    QVector<QCPAxisRect*> m_panels;
};

} // namespace kvlens::widgets
