// Attaching to the test cluster's TAP devices: a persistent TAP (ip tuntap add mode tap) is
// created by scripts/test_cluster.sh; the delay line opens it by name from inside the network
// namespace that holds it (the TUN driver binds a /dev/net/tun descriptor to the namespace of the
// thread that opened it). Creates and configures nothing.
#pragma once

#include <string>

#include "launcher/agent/unique_fd.h"

namespace ds::netdelay {

// The TAP device `name` of the calling thread's network namespace: non-blocking, whole Ethernet
// frames without packet-information headers. Throws SystemError naming the device.
launcher::UniqueFd openTap(const std::string& name);

// Moves the calling thread into the network namespace at `path` (/run/netns/NAME, or
// /proc/PID/ns/net). Throws SystemError naming the path.
void enterNetns(const std::string& path);

}  // namespace ds::netdelay
