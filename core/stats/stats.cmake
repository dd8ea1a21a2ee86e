# SPDX-License-Identifier: GPL-3.0-or-later
# Sources of core/stats (statistical instruments), added to kvlens_core.
target_sources(kvlens_core PRIVATE
  stats/bootstrap.cpp
  stats/bootstrap.h
  stats/energy.cpp
  stats/energy.h
  stats/holm.cpp
  stats/holm.h
  stats/kolmogorov_smirnov.cpp
  stats/kolmogorov_smirnov.h
  stats/mann_whitney.cpp
  stats/mann_whitney.h
  stats/p_value.cpp
  stats/p_value.h
  stats/ranks.cpp
  stats/ranks.h
  stats/spearman.cpp
  stats/spearman.h
  stats/total_order.h
  stats/wilcoxon.cpp
  stats/wilcoxon.h
)
