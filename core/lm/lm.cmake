# SPDX-License-Identifier: GPL-3.0-or-later
# The transformer engine of core/lm (Hugging Face config and weights, the forward pass, next-token
# statistics), added to kvlens_core. Layer: above core/attention, below core/quant.
target_sources(kvlens_core PRIVATE
  lm/architecture.cpp
  lm/architecture.h
  lm/checkpoint.cpp
  lm/checkpoint.h
  lm/hf_config.cpp
  lm/hf_config.h
  lm/next_token_stats.cpp
  lm/next_token_stats.h
  lm/products.cpp
  lm/products.h
  lm/transformer.cpp
  lm/transformer.h
  lm/weights.cpp
  lm/weight_matrix.cpp
  lm/weight_matrix.h
  lm/weights.h
)
