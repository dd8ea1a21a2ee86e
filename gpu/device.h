// SPDX-License-Identifier: GPL-3.0-or-later
// OpenCL platform and device discovery, reported as plain data (no OpenCL types leak out).
#pragma once

#include "core/common/result.h"

#include <string>
#include <vector>

namespace kvlens::gpu {

/// One OpenCL device as the user sees it in menus and on the command line.
struct DeviceInfo {
    int index = 0;            ///< position in the flattened (platform, device) list
    std::string platform;     ///< platform name
    std::string name;         ///< device name
    std::string type;         ///< "GPU", "CPU", "accelerator" or "other"
    std::string version;      ///< CL_DEVICE_VERSION
    std::string driver;       ///< CL_DRIVER_VERSION
    int computeUnits = 0;
    unsigned long long globalMemory = 0; ///< bytes

    /// "0: pthread-haswell (CPU, Portable Computing Language)"
    std::string label() const;
};

/// Every device of every platform, in platform order. An error when no platform is usable
/// (no ICD installed, or the ICD loader finds no vendor), with the OpenCL reason.
Result<std::vector<DeviceInfo>> listDevices();

/// Picks a device: `request` is an index into listDevices() or a case-insensitive substring
/// of the device or platform name; empty means $KVLENS_OPENCL_DEVICE, and when that is empty
/// too, the first GPU, else the first CPU device, else the first device. Errors list the
/// devices there are.
Result<DeviceInfo> selectDevice(const std::string& request);

} // namespace kvlens::gpu
