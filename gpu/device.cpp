// SPDX-License-Identifier: GPL-3.0-or-later
// Device discovery through the official C++ bindings; exceptions stay inside this file.
#include "gpu/device.h"

#include <CL/opencl.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>

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

namespace {

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

} // namespace

Result<DeviceInfo> selectDevice(const std::string& given)
{
    auto devices = listDevices();
    if (!devices)
        return devices.error();
    std::string request = given;
    if (request.empty())
        if (const char* env = std::getenv("KVLENS_OPENCL_DEVICE"))
            request = env;
    const auto& list = *devices;
    if (request.empty()) {
        for (const char* type : {"GPU", "CPU"})
            for (const auto& d : list)
                if (d.type == type)
                    return d;
        return list.front();
    }
    auto available = [&] {
        std::string text;
        for (const auto& d : list)
            text += (text.empty() ? "" : "; ") + d.label();
        return text;
    };
    if (std::all_of(request.begin(), request.end(), [](unsigned char c) { return std::isdigit(c); })) {
        // Digit by digit, not std::stoul: "99999999999999999999" is a missing device, not an exception.
        std::size_t index = 0;
        bool inRange = request.size() <= 9;
        for (const char c : request)
            index = inRange ? index * 10 + static_cast<std::size_t>(c - '0') : index;
        if (inRange && index < list.size())
            return list[index];
        return Error{"device", "no OpenCL device " + request + " (devices: " + available() + ")"};
    }
    const std::string wanted = lower(request);
    for (const auto& d : list)
        if (lower(d.name).find(wanted) != std::string::npos || lower(d.platform).find(wanted) != std::string::npos)
            return d;
    return Error{"device", "no OpenCL device matches '" + request + "' (devices: " + available() + ")"};
}

} // namespace kvlens::gpu
