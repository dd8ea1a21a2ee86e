// SPDX-License-Identifier: GPL-3.0-or-later
// A spec's grid of trials: the one walk order, the one draw order, the one cell index, and
// trials grouped by cell. Everything that walks, shards, merges or groups trials uses these.
#pragma once

#include "core/spec/result.h"

#include <vector>

namespace kvlens {

/// A trial's place in a spec's grid, by index; the walk order is (point, budget, scheme, seed).
struct TrialSlot {
    int point = 0;
    int budgetIndex = 0;  ///< into pointSpec(point).budgets (the same list at every point)
    int schemeIndex = 0;  ///< into spec.schemes
    int seedIndex = 0;
};

/// The grid's sizes and the arithmetic of its orders.
struct GridShape {
    long long points = 1, budgets = 1, schemes = 1, seeds = 1;

    GridShape() = default;
    explicit GridShape(const ExperimentSpec& spec)
        : points(spec.pointCount()), budgets(static_cast<long long>(spec.budgets.size())),
          schemes(static_cast<long long>(spec.schemes.size())), seeds(spec.seedCount)
    {
    }
    long long total() const { return points * budgets * schemes * seeds; }
    /// Cells are (point, budget, scheme): a result table row, a figure's series point.
    long long cellCount() const { return points * budgets * schemes; }
    long long cellIndex(long long point, long long budgetIndex, long long schemeIndex) const
    {
        return (point * budgets + budgetIndex) * schemes + schemeIndex;
    }
    /// Walk order (point, budget, scheme, seed): the order of ResultSet::trials and of every table.
    long long walkIndex(const TrialSlot& t) const
    {
        return cellIndex(t.point, t.budgetIndex, t.schemeIndex) * seeds + t.seedIndex;
    }
    TrialSlot fromWalkIndex(long long i) const
    {
        TrialSlot t;
        t.seedIndex = static_cast<int>(i % seeds);
        i /= seeds;
        t.schemeIndex = static_cast<int>(i % schemes);
        i /= schemes;
        t.budgetIndex = static_cast<int>(i % budgets);
        t.point = static_cast<int>(i / budgets);
        return t;
    }
    /// Draw order (point, seed, budget, scheme): one (point, seed) data set is one run of trials.
    long long drawIndex(const TrialSlot& t) const
    {
        return ((t.point * seeds + t.seedIndex) * budgets + t.budgetIndex) * schemes + t.schemeIndex;
    }
    TrialSlot fromDrawIndex(long long i) const
    {
        TrialSlot t;
        t.schemeIndex = static_cast<int>(i % schemes);
        i /= schemes;
        t.budgetIndex = static_cast<int>(i % budgets);
        i /= budgets;
        t.seedIndex = static_cast<int>(i % seeds);
        t.point = static_cast<int>(i / seeds);
        return t;
    }
};

/// A result set's trials grouped by cell, each cell in seed order. Trials whose budget is not
/// in the spec's list (none in a result the runner made) are left out.
class TrialCells {
public:
    explicit TrialCells(const ResultSet& results);
    const GridShape& shape() const { return m_shape; }
    /// The trials of (point, budget index, scheme).
    const std::vector<const TrialResult*>& at(int point, int budgetIndex, int scheme) const;
    /// The same by budget value (n); empty for a budget the spec does not list.
    const std::vector<const TrialResult*>& atBudget(int point, int budget, int scheme) const;
    /// Index of budget n in the spec's list, or -1.
    int budgetIndex(int budget) const;

    /// A non-empty cell: where it is (seedIndex 0) and its trials in seed order.
    struct Cell {
        TrialSlot at;
        const std::vector<const TrialResult*>* trials = nullptr;
    };
    /// The non-empty cells in walk order: what every per-cell table iterates.
    std::vector<Cell> nonEmpty() const;

private:
    GridShape m_shape;
    std::vector<int> m_budgets;
    std::vector<std::vector<const TrialResult*>> m_cells;
};

/// Mean total bits per coordinate (BitAccounting::total) over trials, such as a cell's; 0 for none.
double meanBits(const std::vector<const TrialResult*>& trials);

} // namespace kvlens
