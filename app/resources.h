// SPDX-License-Identifier: GPL-3.0-or-later
// Registration of the compiled-in resources (presets), which a static library must do by hand.
#pragma once

/// Registers :/presets/... Safe to call more than once. (Global namespace: Q_INIT_RESOURCE
/// declares the generated initializer at the enclosing scope.)
void initKvlensResources();
