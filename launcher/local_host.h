// Facts about the machine dsrun runs on: is a hostfile host this machine, how many GPUs are
// here, can a name be resolved. Not a network probe: nothing here connects anywhere.
#pragma once

#include <string>

#include "core/env.h"

namespace ds::launcher {

// "localhost", 127.0.0.1, ::1, this machine's host name (full or short) or one of its interface
// addresses. 127.0.0.2 and other loopback aliases are NOT local (they name test "hosts").
bool isLocalHost(const std::string& host);

// NVIDIA devices visible here (/dev/nvidia<N>), 0 on a CPU-only machine.
int localGpuCount();

// Whether a node agent sets CUDA_VISIBLE_DEVICES: the head's view (it had GPUs) or this host's
// own GPUs (a CPU-only head launching onto GPU hosts).
inline bool agentGpuHost(bool headGpuHost, int localGpus) { return headGpuHost || localGpus > 0; }

// True when `host` resolves (getaddrinfo) on this machine.
bool isResolvable(const std::string& host);

// The first executable `dir/name` over the directories of env's PATH ("/usr/bin:/bin" when
// unset), or "" when there is none. A name holding '/' is checked as given.
std::string findOnPath(const std::string& name, const EnvMap& env);

// The directory of the running executable (/proc/self/exe).
std::string selfExeDir();
std::string selfExePath();

}  // namespace ds::launcher
