// SPDX-License-Identifier: GPL-3.0-or-later
// Every claim whose runs are present, in report order.
#include "core/report/claims.h"

#include "core/report/claim_support.h"

#include "core/spec/grid.h"
#include "core/analysis/figures.h"
#include "core/quant/wht.h"
#include "core/regimes/regime.h"
#include "core/rng/rng.h"
#include "core/stats/bootstrap.h"
#include "core/stats/kolmogorov_smirnov.h"
#include "core/stats/mann_whitney.h"
#include "core/stats/spearman.h"
#include "core/stats/wilcoxon.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numbers>
#include <set>

namespace kvlens::claims {

using namespace support;

std::vector<Claim> evaluateClaims(const Runs& r)
{
    std::vector<Claim> out;
    if (r.paperA)
        out.push_back(qjlVarianceClaim(*r.paperA));
    if (r.paperA)
        out.push_back(kqvBeatsQkqvClaim(*r.paperA, r.seed, r.resamples));
    if (r.scoreScale)
        out.push_back(klRatioClaim(*r.scoreScale, r.seed + 1000, r.resamples,
                                   {r.paperA, r.heavyTailSweep, r.lowRank1024, r.lowRankAxis1024, r.lowRankRandomAxes1024,
                                    r.heavyTail1024, r.vpathHeavyTail, r.vpathLowRank}));
    if (r.scoreScale)
        out.push_back(recallFollowsKlClaim(*r.scoreScale));
    if (r.heavyTailSweep)
        out.push_back(heavyTailClaim(*r.heavyTailSweep));
    if (r.lowRank1024 && r.heavyTail1024)
        out.push_back(lowRankClaim(*r.lowRank1024, *r.heavyTail1024, r.lowRankMarginal, r.heavyTailMarginal,
                                   {r.lowRankAxis1024, r.lowRankRandomAxes1024}));
    std::vector<const ResultSet*> crossover;
    for (const ResultSet* rs : {r.crossover, r.heavyTailSweep, r.vpathLowRank, r.lowRank1024})
        if (rs)
            crossover.push_back(rs);
    if (!crossover.empty())
        out.push_back(crossoverClaim(crossover));
    std::vector<const ResultSet*> vpath;
    for (const ResultSet* rs : {r.scoreScale, r.vpathHeavyTail, r.vpathLowRank})
        if (rs)
            vpath.push_back(rs);
    if (!vpath.empty()) {
        out.push_back(vpathPaperAClaim(vpath, r.seed + 2000, r.resamples));
        out.push_back(vpathPaperBClaim(vpath, r.seed + 2000, r.resamples));
    }
    if (r.paperBGaussian || r.paperBHeavyTail || r.paperBLowRank)
        out.push_back(sqVsTqClaim(r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank, r.seed + 3000, r.resamples));
    std::vector<const ResultSet*> paperB;
    for (const ResultSet* rs : {r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank})
        if (rs)
            paperB.push_back(rs);
    if (!paperB.empty())
        out.push_back(waterFillingClaim(paperB, r.seed + 4000, r.resamples));
    if (r.paperC)
        out.push_back(headqClaim(*r.paperC, r.seed + 5000, r.resamples));
    std::vector<const ResultSet*> proxies;
    for (const ResultSet* rs : {r.paperC, r.paperA, r.paperBGaussian, r.paperBHeavyTail, r.paperBLowRank})
        if (rs)
            proxies.push_back(rs);
    if (!proxies.empty())
        out.push_back(fisherProxyClaim(proxies, r.seed + 6000, std::max(50, r.resamples / 2)));
    if (r.tinyModel) {
        out.push_back(modelAsymmetryClaim(*r.tinyModel, r.seed + 7000, r.resamples));
        out.push_back(modelOrderingClaim(*r.tinyModel, r.seed + 8000, r.resamples));
    }
    return out;
}

} // namespace kvlens::claims
