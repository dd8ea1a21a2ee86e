# SPDX-License-Identifier: GPL-3.0-or-later
# Sources of core/stats (statistical instruments), added to kvlens_core.
target_sources(kvlens_core PRIVATE
)
