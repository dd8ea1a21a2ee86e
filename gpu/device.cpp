// SPDX-License-Identifier: GPL-3.0-or-later
// Device discovery through the official C++ bindings; exceptions stay inside this file.
#include "gpu/device.h"

#include <CL/opencl.hpp>

namespace kvlens::gpu {

std::string DeviceInfo::label() const
{
    return std::to_string(index) + ": " + name + " (" + type + ", " + platform + ")";
}

namespace {

std::string typeName(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (type & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (type & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

} // namespace

Result<std::vector<DeviceInfo>> listDevices()
{
    try {
        std::vector<cl::Platform> platforms;
        cl::Platform::get(&platforms);
        std::vector<DeviceInfo> out;
        for (const auto& platform : platforms) {
            std::vector<cl::Device> devices;
            try {
                platform.getDevices(CL_DEVICE_TYPE_ALL, &devices);
            } catch (const cl::Error&) {
                continue; // a platform without devices is not an error
            }
            for (const auto& device : devices) {
                DeviceInfo info;
                info.index = static_cast<int>(out.size());
                info.platform = platform.getInfo<CL_PLATFORM_NAME>();
                info.name = device.getInfo<CL_DEVICE_NAME>();
                info.type = typeName(device.getInfo<CL_DEVICE_TYPE>());
                info.version = device.getInfo<CL_DEVICE_VERSION>();
                info.driver = device.getInfo<CL_DRIVER_VERSION>();
                info.computeUnits = static_cast<int>(device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>());
                info.globalMemory = device.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
                out.push_back(std::move(info));
            }
        }
        if (out.empty())
            return Error{"OpenCL", "no OpenCL device found (no platform reported a device)"};
        return out;
    } catch (const cl::Error& e) {
        return Error{"OpenCL", std::string("no usable OpenCL platform: ") + e.what() + " (error "
                                   + std::to_string(e.err()) + ")"};
    }
}

} // namespace kvlens::gpu
