// SPDX-License-Identifier: GPL-3.0-or-later
// Comparison view: forest plot + table.
#include "widgets/comparison_view.h"

#include "widgets/figures/forest_figures.h"

#include <QComboBox>
#include <QHeaderView>
#include <QSignalBlocker>
#include <QTableWidget>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <numbers>

namespace kvlens::widgets {

namespace {

QString pText(const stats::PValue& p)
{
    return QString::fromStdString(stats::formatPValue(p, 3));
}

struct Column {
    const char* title;
    const char* tooltip;
};

const Column kColumns[] = {
    {"A", "First scheme of the pair."},
    {"B", "Second scheme of the pair."},
    {"n", "Nominal budget n of both (a/b: two nominal budgets whose exact bits per coordinate match); the bits a "
          "scheme really spends differ (see the Rate–distortion view)."},
    {"seeds", "The statistical unit: seeds both schemes hold. The queries of a seed share its draw, so the seed is "
              "the independent replication."},
    {"KL ratio", "Median per-query KL of A divided by that of B: below 1, A does less damage."},
    {"95% interval", "Bootstrap interval of the KL ratio that resamples seeds (and queries too when the queries are "
                     "fixed items of an imported or model regime)."},
    {"test", "Exact Wilcoxon signed-rank over the seeds on each seed's log median-KL ratio; blank when no test "
             "applies (see status)."},
    {"p", "Two-sided seed-level p-value; with k seeds it cannot be below 2/2^k."},
    {"p (Holm)", "p adjusted by Holm's step-down method across the table's tested rows."},
    {"status", "tested; identical (the same per-query KL: nothing to test); degenerate (KL = 0 exactly); "
               "untestable (one seed)."},
    {"r (queries)", "Secondary, query level: rank-biserial P(KL_A < KL_B) - P(KL_A > KL_B), positive when A does less "
                    "damage (queries treated as independent)."},
    {"KS D", "Largest gap between the two KL distribution functions (two-sample Kolmogorov-Smirnov)."},
    {"KS p", "Asymptotic Kolmogorov-Smirnov p-value."},
    {"energy", "Energy distance between the two schemes' 6D trial points (standardized coordinates)."},
    {"energy p", "Permutation p-value of the energy distance."},
};

} // namespace

ComparisonView::ComparisonView(QWidget* parent)
    : ResultView(parent)
{
    m_budget = new QComboBox(this);
    m_budget->setToolTip(QStringLiteral("Budget shown in the forest plot and the table."));
    addOption(QStringLiteral("Budget:"), m_budget);
    m_table = new QTableWidget(this);
    m_table->setColumnCount(static_cast<int>(std::size(kColumns)));
    for (int c = 0; c < m_table->columnCount(); ++c) {
        auto* item = new QTableWidgetItem(QString::fromUtf8(kColumns[c].title));
        item->setToolTip(QString::fromUtf8(kColumns[c].tooltip));
        m_table->setHorizontalHeaderItem(c, item);
    }
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSortingEnabled(true);
    m_table->verticalHeader()->setVisible(false);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_proxies = new QTableWidget(this);
    m_proxies->setColumnCount(2 + stats::kProxyCount);
    m_proxies->setToolTip(QStringLiteral("The proxy study: Spearman rho between each cheap error measure and per-query "
                                         "KL; the best predictor of damage in each row is bold."));
    auto proxyHeader = [this](int column, const QString& title, const QString& tooltip) {
        auto* item = new QTableWidgetItem(title);
        item->setToolTip(tooltip);
        m_proxies->setHorizontalHeaderItem(column, item);
    };
    proxyHeader(0, QStringLiteral("proxy rho vs KL"), QStringLiteral("A scheme (pooled over budgets and seeds), or all schemes pooled."));
    proxyHeader(1, QStringLiteral("queries"), QStringLiteral("Queries in the correlation."));
    for (int p = 0; p < stats::kProxyCount; ++p)
        proxyHeader(2 + p, QString::fromUtf8(stats::kProxyColumns[static_cast<std::size_t>(p)]),
                    QString::fromUtf8(stats::kProxyDescriptions[static_cast<std::size_t>(p)]));
    m_proxies->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_proxies->verticalHeader()->setVisible(false);
    m_proxies->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    // Plot above, tables below, user-resizable.
    splitBelowPlot({m_table, m_proxies}, {3, 2, 1});
    setToolTip(viewDescription());
}

QString ComparisonView::viewDescription() const
{
    return QStringLiteral("Pairwise tests of per-query KL between schemes at each budget: the median-KL ratio with "
                          "its 95% interval, rank tests with effect sizes, and Holm-adjusted p-values.");
}

QString ComparisonView::dataCsv() const
{
    if (data().empty() || !data().comparisons)
        return QString();
    return QString::fromStdString(stats::comparisonsCsv(*data().results, *data().comparisons));
}

QString ComparisonView::noFigureReason() const
{
    if (!data().empty() && !data().comparisons)
        return QStringLiteral("the comparisons need the whole run (this one is partial: cancelled, or still running)");
    return ResultView::noFigureReason();
}

void ComparisonView::redraw()
{
    if (data().empty() || !data().comparisons) {
        m_table->setRowCount(0);
        m_proxies->setRowCount(0);
        m_rows = 0;
        showFigure(comparisonFigure(data(), currentPoint(), 0).figure);
        return;
    }
    {
        const QVariant current = m_budget->currentData();
        const QSignalBlocker block(m_budget);
        m_budget->clear();
        m_budget->addItem(QStringLiteral("all"), 0);
        for (int n : data().results->spec.budgets)
            m_budget->addItem(QStringLiteral("n = %1").arg(n), n);
        const int at = m_budget->findData(current);
        m_budget->setCurrentIndex(at >= 0 ? at : 0);
    }
    ForestFigure forest = comparisonFigure(data(), currentPoint(), m_budget->currentData().toInt());
    m_rows = forest.rows;
    showFigure(std::move(forest.figure));
    fillTable();
    fillProxyTable();
}

void ComparisonView::fillProxyTable()
{
    const std::vector<stats::ProxyRow> none;
    const auto& rows = data().proxies ? *data().proxies : none;
    m_proxies->setRowCount(static_cast<int>(rows.size()));
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
        const stats::ProxyRow& r = rows[static_cast<std::size_t>(i)];
        m_proxies->setItem(i, 0, new QTableWidgetItem(QString::fromStdString(r.group)));
        auto* count = new QTableWidgetItem(QString::number(r.queries));
        count->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        m_proxies->setItem(i, 1, count);
        int best = -1;
        for (int p = 0; p < stats::kProxyCount; ++p) {
            const double rho = r.rho[static_cast<std::size_t>(p)];
            if (std::isfinite(rho) && (best < 0 || rho > r.rho[static_cast<std::size_t>(best)]))
                best = p;
        }
        for (int p = 0; p < stats::kProxyCount; ++p) {
            const double rho = r.rho[static_cast<std::size_t>(p)];
            auto* item = new QTableWidgetItem(std::isfinite(rho) ? QString::number(rho, 'f', 3) : QStringLiteral("undefined"));
            item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (p == best) {
                QFont bold = item->font();
                bold.setBold(true);
                item->setFont(bold);
            }
            m_proxies->setItem(i, 2 + p, item);
        }
    }
}

void ComparisonView::fillTable()
{
    const QSignalBlocker block(m_table);
    m_table->setSortingEnabled(false);
    const int budget = m_budget->currentData().toInt();
    QVector<const stats::ComparisonRow*> rows;
    for (const auto& c : *data().comparisons)
        if (c.point == currentPoint() && (budget == 0 || c.budget == budget))
            rows.push_back(&c);
    m_table->setRowCount(static_cast<int>(rows.size()));
    auto number = [](double v, int digits = 4) {
        auto* item = new QTableWidgetItem;
        item->setData(Qt::DisplayRole, QString::number(v, 'g', digits).toDouble());
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        return item;
    };
    auto text = [](const QString& s) { return new QTableWidgetItem(s); };
    for (int i = 0; i < rows.size(); ++i) {
        const stats::ComparisonRow& c = *rows[i];
        int col = 0;
        m_table->setItem(i, col++, text(schemeName(c.schemeA)));
        m_table->setItem(i, col++, text(schemeName(c.schemeB)));
        m_table->setItem(i, col++, c.kind == stats::ComparisonKind::EqualBits
                                       ? text(QStringLiteral("%1/%2").arg(c.budget).arg(c.budgetB))
                                       : number(c.budget));
        m_table->setItem(i, col++, number(c.units));
        m_table->setItem(i, col++, number(c.medianKlRatio));
        const bool tested = c.status == stats::ComparisonStatus::Tested;
        const bool drawn = c.status != stats::ComparisonStatus::Identical && c.status != stats::ComparisonStatus::Degenerate;
        m_table->setItem(i, col++, text(drawn ? QStringLiteral("[%1, %2]").arg(c.ratioLow, 0, 'g', 3).arg(c.ratioHigh, 0, 'g', 3)
                                              : QString()));
        m_table->setItem(i, col++, text(QString::fromStdString(c.test)));
        m_table->setItem(i, col++, text(tested ? pText(c.p) : QStringLiteral("-")));
        auto* holm = text(tested ? pText(c.pHolm) : QStringLiteral("-"));
        if (tested && c.pHolm.p < 0.05)
            holm->setForeground(seriesColor(0).darker(130));
        m_table->setItem(i, col++, holm);
        auto* status = text(QString::fromLatin1(stats::comparisonStatusName(c.status).data()));
        status->setToolTip(QString::fromStdString(c.statusNote));
        m_table->setItem(i, col++, status);
        m_table->setItem(i, col++, number(c.rankBiserial, 3));
        m_table->setItem(i, col++, number(c.ksD, 3));
        m_table->setItem(i, col++, text(pText(c.ksP)));
        m_table->setItem(i, col++, number(c.energy, 3));
        m_table->setItem(i, col++, number(c.energyP, 3));
    }
    m_table->setSortingEnabled(true);
}

double ComparisonView::printAspect(double widthInches) const
{
    // A row needs about 11 pt of height at print sizes; more rows than the default aspect holds
    // get a taller page.
    const double needed = (60.0 + 11.0 * m_rows) / (72.0 * widthInches);
    return needed > 0.75 ? std::min(1.8, needed) : 0.0;
}

} // namespace kvlens::widgets
