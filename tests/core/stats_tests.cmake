# SPDX-License-Identifier: GPL-3.0-or-later
# Tests of core/stats.
kvlens_add_test(tst_stats SOURCES tst_stats.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_comparison SOURCES tst_comparison.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_run_compare SOURCES tst_run_compare.cpp LIBS kvlens_core LABELS core)
kvlens_add_test(tst_validation SOURCES tst_validation.cpp LIBS kvlens_core LABELS core)
