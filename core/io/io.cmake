# SPDX-License-Identifier: GPL-3.0-or-later
# Tensor file readers of core/io (.npy, .npz, .safetensors), added to kvlens_core.
