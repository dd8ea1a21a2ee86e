# SPDX-License-Identifier: GPL-3.0-or-later
# The transformer engine of core/lm (Hugging Face config and weights, the forward pass, next-token
# statistics), added to kvlens_core. Layer: above core/attention, below core/quant.
target_sources(kvlens_core PRIVATE
  lm/hf_config.cpp
  lm/hf_config.h
  lm/next_token_stats.cpp
  lm/next_token_stats.h
  lm/transformer.cpp
  lm/transformer.h
  lm/weights.cpp
  lm/weights.h
)
