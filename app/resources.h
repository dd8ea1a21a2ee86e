// SPDX-License-Identifier: GPL-3.0-or-later
// Registration of the compiled-in resources (presets), which a static library must do by hand.
#pragma once

/// Registers :/presets/... Safe to call more than once. (Global namespace: Q_INIT_RESOURCE
/// declares the generated initializer at the enclosing scope.)
void initKvlensResources();

#include <string>

/// Where the presets' relative data files are looked up (the shipped examples: the tiny model's
/// dump for repro_tiny_lm.json).
std::string presetDataDirectory();
/// The shipped example model's folder (resources/models/tiny-llama: config, weights, held-out text).
std::string shippedModelDirectory();
