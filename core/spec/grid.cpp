// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/spec/grid.h"

#include <algorithm>

namespace kvlens {

namespace {
const std::vector<const TrialResult*> kEmpty;
}

TrialCells::TrialCells(const ResultSet& results) : m_shape(results.spec), m_budgets(results.spec.budgets)
{
    m_cells.resize(static_cast<std::size_t>(m_shape.cellCount()));
    for (const TrialResult& t : results.trials) {
        const int b = budgetIndex(t.key.budget);
        if (b < 0 || t.key.point < 0 || t.key.point >= m_shape.points || t.key.scheme < 0 || t.key.scheme >= m_shape.schemes)
            continue;
        m_cells[static_cast<std::size_t>(m_shape.cellIndex(t.key.point, b, t.key.scheme))].push_back(&t);
    }
    for (auto& cell : m_cells)
        std::stable_sort(cell.begin(), cell.end(), [](auto* a, auto* b) { return a->key.seedIndex < b->key.seedIndex; });
}

int TrialCells::budgetIndex(int budget) const
{
    const auto it = std::find(m_budgets.begin(), m_budgets.end(), budget);
    return it == m_budgets.end() ? -1 : static_cast<int>(it - m_budgets.begin());
}

const std::vector<const TrialResult*>& TrialCells::at(int point, int budgetIndex, int scheme) const
{
    if (point < 0 || point >= m_shape.points || budgetIndex < 0 || budgetIndex >= m_shape.budgets || scheme < 0
        || scheme >= m_shape.schemes)
        return kEmpty;
    return m_cells[static_cast<std::size_t>(m_shape.cellIndex(point, budgetIndex, scheme))];
}

std::vector<TrialCells::Cell> TrialCells::nonEmpty() const
{
    std::vector<Cell> out;
    for (long long c = 0; c < m_shape.cellCount(); ++c)
        if (!m_cells[static_cast<std::size_t>(c)].empty())
            out.push_back(Cell{m_shape.fromWalkIndex(c * m_shape.seeds), &m_cells[static_cast<std::size_t>(c)]});
    return out;
}

const std::vector<const TrialResult*>& TrialCells::atBudget(int point, int budget, int scheme) const
{
    return at(point, budgetIndex(budget), scheme);
}

double meanBits(const std::vector<const TrialResult*>& trials)
{
    double sum = 0.0;
    for (const TrialResult* t : trials)
        sum += t->bits.total();
    return trials.empty() ? 0.0 : sum / static_cast<double>(trials.size());
}

} // namespace kvlens
